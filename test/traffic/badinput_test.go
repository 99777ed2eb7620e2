package traffic_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// probe requires a new session to get SELECT 1 within 1 s (trying again at once after a
// refusal, for a slot a closing session has not yet given back).
func probe(t *testing.T, s *server, when string) {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tries := 0
	for {
		tries++
		err := selectOne(ctx, s.connString())
		if err == nil {
			if tries > 1 {
				t.Logf("%s: SELECT 1 after %v, at try %d", when, time.Since(start), tries)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: no new session got SELECT 1 within 1 s (%d tries): %v", when, tries, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// message frames a protocol message: type byte (0 for none, as the startup packet), length, body.
func message(typ byte, body []byte) []byte {
	var b []byte
	if typ != 0 {
		b = append(b, typ)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)+4))
	return append(b, body...)
}

// header is a message header that announces length bytes (the length field included).
func header(typ byte, length uint32) []byte {
	var b []byte
	if typ != 0 {
		b = append(b, typ)
	}
	return binary.BigEndian.AppendUint32(b, length)
}

// authenticated opens a session with pgconn and takes its socket over, past authentication.
func authenticated(t *testing.T, s *server) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, err := pgconn.Connect(ctx, s.connString())
	if err != nil {
		t.Fatal(err)
	}
	hc, err := pc.Hijack()
	if err != nil {
		t.Fatal(err)
	}
	return hc.Conn
}

func dial(t *testing.T, s *server) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", s.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// dropped requires the server to close nc within 5 s (after an ErrorResponse or not).
func dropped(t *testing.T, nc net.Conn, what string) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open 5 s after the bad input", what)
	}
}

// TestBadInputBesidePgbenchNeverDisturbsOtherSessions sends the engine server malformed,
// oversized and truncated messages (before and after authentication), vanishes mid-COPY,
// opens connections beyond --max-connections (53300) and logs in with wrong passwords
// (28P01), while pgbench select-only runs beside it. During and after each, a new session
// gets SELECT 1 within 1 s; each bad connection is dropped within 5 s (unless it is held
// on purpose: a truncated message waits for the rest, as PostgreSQL waits); the abandoned
// COPY leaves no row and no lock; and pgbench ends with zero failures.
func TestBadInputBesidePgbenchNeverDisturbsOtherSessions(t *testing.T) {
	const maxConnections = 8
	s, _ := startPgbenchServer(t, "--max-connections", "8")
	ctl := s.connect(t)
	if _, err := ctl.Exec(context.Background(), "CREATE TABLE copied (id bigint PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	const pgbenchFor = 5 * time.Second
	pgbenchStart := time.Now()
	wait := background(t, s, "", "-b", "select-only", "-M", "prepared", "-c", "2", "-j", "1", "-T", "5")
	time.Sleep(time.Second)

	startupBody := func(params ...string) []byte {
		b := binary.BigEndian.AppendUint32(nil, pgproto3.ProtocolVersionNumber)
		for _, p := range params {
			b = append(append(b, p...), 0)
		}
		return append(b, 0)
	}
	garbage := make([]byte, 4096)
	for i := range garbage {
		garbage[i] = byte(i*7919 + 13)
	}
	for _, tc := range []struct {
		name string
		auth bool   // after authentication (query phase)
		send []byte // what the client sends
		hold bool   // the server should wait for more: probe while it waits, then hang up
	}{
		{name: "startup: length below 8", send: []byte{0, 0, 0, 4}},
		{name: "startup: oversized length", send: append(header(0, 0x7fffffff), 0, 3, 0, 0)},
		{name: "startup: unknown protocol version", send: message(0, []byte{0, 9, 0, 0, 'u', 0, 0})},
		{name: "startup: parameters without terminator", send: message(0, startupBody("user", "app")[:12])},
		{name: "startup: garbage", send: garbage},
		{name: "startup: truncated", send: append(header(0, 100), startupBody("user", "app")...), hold: true},
		{name: "query: unknown message type", auth: true, send: message('z', nil)},
		{name: "query: length below 4", auth: true, send: []byte{'Q', 0, 0, 0, 2}},
		{name: "query: oversized Query", auth: true, send: append(header('Q', 0x7fffffff), garbage...)},
		{name: "query: Query without terminator", auth: true, send: message('Q', []byte("SELECT 1"))},
		{name: "query: Bind announcing parameters it lacks", auth: true,
			send: message('B', []byte{0, 0, 0, 0, 0xff, 0xff, 0, 3, 0, 0, 0, 5})},
		{name: "query: Parse with a negative parameter count", auth: true,
			send: message('P', []byte{0, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1', 0, 0x80, 0})},
		{name: "query: garbage", auth: true, send: garbage},
		{name: "query: truncated Parse", auth: true, send: append(header('P', 100), 0, 'S', 'E', 'L'), hold: true},
	} {
		var nc net.Conn
		if tc.auth {
			nc = authenticated(t, s)
		} else {
			nc = dial(t, s)
		}
		_ = nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = nc.Write(tc.send)
		probe(t, s, tc.name+", during")
		if tc.hold {
			_ = nc.Close()
		} else {
			dropped(t, nc, tc.name)
			_ = nc.Close()
		}
		probe(t, s, tc.name+", after")
	}

	// A client that vanishes in the middle of COPY FROM STDIN: nothing it sent stays, and
	// the table is free at once.
	nc := authenticated(t, s)
	fe := pgproto3.NewFrontend(nc, nc)
	fe.Send(&pgproto3.Query{String: "COPY copied FROM STDIN"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		m, err := fe.Receive()
		if err != nil {
			t.Fatalf("COPY: %v", err)
		}
		if _, ok := m.(*pgproto3.CopyInResponse); ok {
			break
		}
		if e, ok := m.(*pgproto3.ErrorResponse); ok {
			t.Fatalf("COPY: %s %s", e.Code, e.Message)
		}
	}
	for i := range 100 {
		fe.Send(&pgproto3.CopyData{Data: []byte(string(rune('0'+i%10)) + "\tx\n")})
	}
	fe.Send(&pgproto3.CopyData{Data: []byte("1000\thalf a li")})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	probe(t, s, "COPY in progress")
	_ = nc.Close()
	probe(t, s, "after the COPY's client vanished")
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := ctl.Exec(ctx, "INSERT INTO copied VALUES (1, 'after')")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the abandoned COPY's table still refuses an INSERT 5 s later: %v", err)
		}
	}
	if n := scanInt(t, ctl, "SELECT count(*) FROM copied"); n != 1 {
		t.Fatalf("after an abandoned COPY and one INSERT, copied has %d rows, want 1", n)
	}

	// Wrong passwords, four at once (with pgbench's two sessions, the control session and the
	// probe, within --max-connections), three rounds, a probe among each.
	for round := range 3 {
		bad := make(chan error, 4)
		for range 4 {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for {
					c, err := pgx.Connect(ctx, "postgres://app:wrong@"+s.addr+"/postgres?sslmode=disable")
					if err == nil {
						_ = c.Close(context.Background())
					}
					// The last round's refused sessions may hold their slots for a moment after
					// their client read the 28P01: a 53300 then is this test's own doing.
					if sqlstate(err) == "53300" && ctx.Err() == nil {
						time.Sleep(20 * time.Millisecond)
						continue
					}
					bad <- err
					return
				}
			}()
		}
		probe(t, s, "wrong passwords, during")
		for range 4 {
			if err := <-bad; sqlstate(err) != "28P01" {
				t.Fatalf("round %d: a wrong password got %v, want 28P01", round, err)
			}
		}
	}
	probe(t, s, "wrong passwords, after")

	// Connections beyond --max-connections: hold sessions until the server refuses one with
	// 53300; pgbench's sessions keep working meanwhile; once they close, a new session gets in.
	var held []*pgx.Conn
	refused := false
	for range maxConnections + 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := pgx.Connect(ctx, s.connString())
		cancel()
		if err != nil {
			if sqlstate(err) != "53300" {
				t.Fatalf("connection beyond the limit: %v, want 53300", err)
			}
			refused = true
			break
		}
		held = append(held, c)
	}
	if !refused {
		t.Fatalf("%d sessions beside pgbench's, none refused with --max-connections %d", len(held), maxConnections)
	}
	t.Logf("%d sessions held beside pgbench's and the control session, the next refused with 53300", len(held))
	for _, c := range held {
		_ = c.Close(context.Background())
	}
	probe(t, s, "after the sessions beyond --max-connections")

	if took := time.Since(pgbenchStart); took > pgbenchFor-time.Second {
		t.Fatalf("the bad input took %v, longer than pgbench's %v beside it", took, pgbenchFor)
	} else {
		t.Logf("the bad input took %v of pgbench's %v", took, pgbenchFor)
	}
	b := wait()
	b.ok(t, "select-only beside the bad input")
	t.Logf("pgbench select-only beside it: %d transactions, %.0f tps", b.processed, b.tps)
	select {
	case <-s.done:
		t.Fatal("the server exited")
	default:
	}
}

func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return "no SQLSTATE (" + errString(err) + ")"
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
