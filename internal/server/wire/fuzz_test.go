package wire

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/server/auth"
)

// fuzzServer is a server over a fresh data directory for the whole fuzz run.
func fuzzServer(f *testing.F, method string) *Server {
	dir := f.TempDir()
	if err := engine.Init(dir, engine.Options{}); err != nil {
		f.Fatal(err)
	}
	db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	users, err := auth.Parse([]byte("fuzz:pw\n"))
	if err != nil {
		f.Fatal(err)
	}
	return New(Config{DB: db, Auth: method, Users: users, MaxConnections: 1000})
}

// feed runs one connection that receives input and then end-of-file; the server must
// neither panic nor hang.
func feed(t *testing.T, srv *Server, input []byte) {
	client, server := net.Pipe()
	c := &conn{srv: srv, nc: server}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.serve()
	}()
	go func() { _, _ = io.Copy(io.Discard, client) }()
	_ = client.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = client.Write(input)
	_ = client.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("connection still running 10 s after end of input %q", input)
	}
}

func encode(t testing.TB, msgs ...pgproto3.FrontendMessage) []byte {
	var out []byte
	for _, m := range msgs {
		b, err := m.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

func startup(t testing.TB) []byte {
	return encode(t, &pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
		Parameters: map[string]string{"user": "fuzz", "database": "postgres", "application_name": "fuzz"}})
}

// FuzzStartupPhase feeds arbitrary bytes as the first bytes of a connection (startup packet,
// SSLRequest, GSSENCRequest, CancelRequest, SASL messages).
func FuzzStartupPhase(f *testing.F) {
	f.Add(startup(f))
	f.Add(encode(f, &pgproto3.SSLRequest{}))
	f.Add(encode(f, &pgproto3.GSSEncRequest{}, &pgproto3.SSLRequest{}))
	f.Add(encode(f, &pgproto3.CancelRequest{ProcessID: 1001, SecretKey: []byte{1, 2, 3, 4}}))
	f.Add(append(startup(f), encode(f, &pgproto3.SASLInitialResponse{AuthMechanism: "SCRAM-SHA-256", Data: []byte("n,,n=,r=abc")})...))
	f.Add([]byte{0, 0, 0, 8, 0, 3, 0, 0})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	srv := fuzzServer(f, AuthSCRAM)
	f.Fuzz(func(t *testing.T, input []byte) { feed(t, srv, input) })
}

// FuzzQueryPhase feeds arbitrary bytes after a valid startup (trust): every message
// decoder of the simple and extended protocols.
func FuzzQueryPhase(f *testing.F) {
	f.Add(encode(f, &pgproto3.Query{String: "SELECT 1; SELECT 'a'"}))
	f.Add(encode(f, &pgproto3.Query{String: "CREATE TABLE IF NOT EXISTS f (id bigint PRIMARY KEY)"}, &pgproto3.Query{String: "INSERT INTO f VALUES (1)"}))
	f.Add(encode(f,
		&pgproto3.Parse{Name: "s", Query: "SELECT $1::bigint + $2", ParameterOIDs: []uint32{20}},
		&pgproto3.Describe{ObjectType: 'S', Name: "s"},
		&pgproto3.Bind{PreparedStatement: "s", ParameterFormatCodes: []int16{1, 0}, Parameters: [][]byte{{0, 0, 0, 0, 0, 0, 0, 7}, []byte("5")}, ResultFormatCodes: []int16{1}},
		&pgproto3.Execute{MaxRows: 1},
		&pgproto3.Close{ObjectType: 'S', Name: "s"},
		&pgproto3.Sync{}))
	f.Add(encode(f, &pgproto3.Bind{PreparedStatement: "nope"}, &pgproto3.Execute{}, &pgproto3.Sync{}, &pgproto3.Flush{}))
	f.Add(encode(f, &pgproto3.CopyData{Data: []byte("1\n")}, &pgproto3.CopyDone{}, &pgproto3.Terminate{}))
	f.Add([]byte{'Q', 0, 0, 0, 4})
	f.Add([]byte{'P', 0x7f, 0xff, 0xff, 0xff})
	srv := fuzzServer(f, AuthTrust)
	pre := startup(f)
	f.Fuzz(func(t *testing.T, input []byte) { feed(t, srv, append(append([]byte{}, pre...), input...)) })
}
