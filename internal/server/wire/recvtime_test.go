package wire

import (
	"net"
	"testing"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5/pgproto3"
	"golang.org/x/sys/unix"
)

// tcpPair is a connected loopback pair: the server's side read with receive times.
func tcpPair(t *testing.T) (client net.Conn, server *stampedConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	server, err = newStampedConn(nc)
	if err != nil {
		t.Fatalf("a loopback TCP connection takes SO_TIMESTAMPNS: %v", err)
	}
	return client, server
}

// TestMessagesReadLateAreTimedFromTheirArrival: two messages sent in one write and read
// 200 ms later both carry the time they arrived (the second from the framer's buffer, not
// from when it was read), and a message sent 300 ms after them carries its own.
func TestMessagesReadLateAreTimedFromTheirArrival(t *testing.T) {
	client, server := tcpPair(t)
	fr := newFramer(server, server)
	fr.typed = true
	be := pgproto3.NewBackend(fr, server)
	// The kernel stamps segments once its deferred switch is on (recvtime_linux.go): wait
	// for a stamped read before timing anything.
	for deadline := time.Now().Add(5 * time.Second); !server.kernel; {
		if time.Now().After(deadline) {
			t.Fatal("no read carried the kernel's receive time within 5 s")
		}
		if _, err := client.Write(encode(t, &pgproto3.Sync{})); err != nil {
			t.Fatal(err)
		}
		if _, err := be.Receive(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	sent := time.Now()
	if _, err := client.Write(encode(t, &pgproto3.Query{String: "SELECT 1"}, &pgproto3.Query{String: "SELECT 2"})); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the server is held up: the bytes wait in the socket
	var at []time.Time
	var got []string
	receive := func() {
		t.Helper()
		msg, err := be.Receive()
		if err != nil {
			t.Fatal(err)
		}
		q, ok := msg.(*pgproto3.Query)
		if !ok {
			t.Fatalf("received %T, want a Query", msg)
		}
		got = append(got, q.String)
		at = append(at, fr.received())
	}
	receive()
	if waited := time.Since(at[0]); waited < 200*time.Millisecond {
		t.Errorf("a message read 200 ms after it was sent is timed from %v before now, want at least 200ms", waited)
	}
	if d := at[0].Sub(sent); d < -time.Millisecond || d > 100*time.Millisecond {
		t.Errorf("the message's receive time is %v after it was sent, want about 0", d)
	}
	time.Sleep(100 * time.Millisecond)
	receive()
	if !at[1].Equal(at[0]) {
		t.Errorf("the second message of one read is timed at %v, the first at %v: want the same", at[1], at[0])
	}

	time.Sleep(300 * time.Millisecond)
	if _, err := client.Write(encode(t, &pgproto3.Query{String: "SELECT 3"})); err != nil {
		t.Fatal(err)
	}
	receive()
	if d := at[2].Sub(at[0]); d < 300*time.Millisecond {
		t.Errorf("a message sent 300 ms after the first two is timed %v after them", d)
	}
	if got[0] != "SELECT 1" || got[1] != "SELECT 2" || got[2] != "SELECT 3" {
		t.Errorf("messages read through the framer: %q", got)
	}
}

// TestLargeMessagesPassTheFramerWhole: a message longer than the framer's buffer, split
// across reads, arrives intact, and the message after it is framed right.
func TestLargeMessagesPassTheFramerWhole(t *testing.T) {
	client, server := tcpPair(t)
	fr := newFramer(server, server)
	fr.typed = true
	be := pgproto3.NewBackend(fr, server)
	big := make([]byte, 3*framerBufBytes+17)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	go func() {
		_, _ = client.Write(encode(t, &pgproto3.CopyData{Data: big}, &pgproto3.Sync{}))
	}()
	msg, err := be.Receive()
	if err != nil {
		t.Fatal(err)
	}
	if cd, ok := msg.(*pgproto3.CopyData); !ok || string(cd.Data) != string(big) {
		t.Fatalf("a %d-byte CopyData came through as %T", len(big), msg)
	}
	if msg, err = be.Receive(); err != nil {
		t.Fatal(err)
	}
	if _, ok := msg.(*pgproto3.Sync); !ok {
		t.Fatalf("the message after a large one came through as %T", msg)
	}
}

// TestReceiveTimeIgnoresAbsentAndMalformedControlData: no control data, garbage, a
// truncated header and a timestamp message too short give no time, without panicking.
func TestReceiveTimeIgnoresAbsentAndMalformedControlData(t *testing.T) {
	short := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&short[0]))
	h.Level, h.Type = unix.SOL_SOCKET, unix.SCM_TIMESTAMPNS
	h.SetLen(unix.CmsgLen(4))
	for name, oob := range map[string][]byte{
		"none":             nil,
		"garbage":          {1, 2, 3, 4, 5, 6, 7},
		"truncated header": make([]byte, unix.CmsgSpace(0)-1),
		"short timestamp":  short,
		"huge length":      {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0, 35, 0, 0, 0},
	} {
		if got := receiveTime(oob); !got.IsZero() {
			t.Errorf("%s: receive time %v, want none", name, got)
		}
	}
}
