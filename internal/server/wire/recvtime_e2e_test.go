package wire_test

import (
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// TestAPipelinedStatementIsTimedFromItsMessagesArrival: two queries sent in one write, the
// first sleeping 1 s, reach the server together; the second waits for the first before
// the session reads it, and the server's foreground latency counts that wait (as the
// client sees it), so both selects took at least 1 s.
func TestAPipelinedStatementIsTimedFromItsMessagesArrival(t *testing.T) {
	s := startServer(t, wire.Config{})
	nc, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = nc.Close() }()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	fe := pgproto3.NewFrontend(nc, nc)
	fe.Send(&pgproto3.StartupMessage{ProtocolVersion: pgproto3.ProtocolVersionNumber,
		Parameters: map[string]string{"user": "postgres", "database": "postgres"}})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	ready := func() {
		t.Helper()
		for {
			msg, err := fe.Receive()
			if err != nil {
				t.Fatal(err)
			}
			switch m := msg.(type) {
			case *pgproto3.ErrorResponse:
				t.Fatalf("server error: %s", m.Message)
			case *pgproto3.ReadyForQuery:
				return
			}
		}
	}
	ready()
	// The kernel turns receive timestamps on a moment after the first socket asks for them
	// (recvtime_linux.go); segments before that are timed when read.
	time.Sleep(100 * time.Millisecond)
	fe.Send(&pgproto3.Query{String: "SELECT pg_sleep(1)"})
	fe.Send(&pgproto3.Query{String: "SELECT 1"})
	if err := fe.Flush(); err != nil {
		t.Fatal(err)
	}
	ready()
	ready()
	for _, st := range s.srv.Latency().Snapshot() {
		if st.Kind != "select" {
			continue
		}
		// With two values the histogram's median is the lesser: the SELECT 1.
		if st.Count != 2 || st.P50 < time.Second {
			t.Errorf("selects: %d, the lesser took %v; want 2, both at least 1s", st.Count, st.P50)
		}
		return
	}
	t.Errorf("no select in the server's latency histograms")
}
