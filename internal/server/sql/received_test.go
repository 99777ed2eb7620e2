package sql

import (
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/server/latency"
)

// TestOnlyTheFirstStatementOfAMessageIsTimedFromItsReceipt: a message received 1 s before
// it runs has its first foreground statement timed from then (the wait counts); the second
// statement of the same Query counts from its own start, and so does the next message's
// when the wire layer gives no receive time.
func TestOnlyTheFirstStatementOfAMessageIsTimedFromItsReceipt(t *testing.T) {
	db := newTestDB(t)
	lat := latency.New()
	s := NewSession(Config{DB: db, PID: 42, User: "tester", Latency: lat})

	s.SetReceived(time.Now().Add(-time.Second))
	runSQL(t, s, "SELECT 1; SELECT 2")
	s.SetReceived(time.Time{})
	runSQL(t, s, "SELECT 3")

	for _, st := range lat.Snapshot() {
		if st.Kind != "select" {
			continue
		}
		if st.Count != 3 || st.Max < time.Second || st.P50 >= time.Second {
			t.Errorf("selects: %d, slowest %v, median %v; want 3, the first over 1s, the others under it", st.Count, st.Max, st.P50)
		}
		return
	}
	t.Error("no select in the latency histograms")
}
