package txn

import "testing"

// Status keeps a single-entry cache of the last final answer: it must
// never answer for another xid, and never cache a transaction still
// running (its answer changes at commit).
func TestStatusCacheAnswersOnlyForItsXIDAndNeverCachesARunningOne(t *testing.T) {
	m, _ := newTestManager(t, t.TempDir(), 0)
	committed := m.Begin()
	committed.MarkWritten()
	if err := m.Commit(committed, nil); err != nil {
		t.Fatal(err)
	}
	aborted := m.Begin()
	aborted.MarkWritten()
	if err := m.Abort(aborted, nil); err != nil {
		t.Fatal(err)
	}
	running := m.Begin()
	running.MarkWritten()
	for range 3 {
		for _, c := range []struct {
			x    XID
			want Status
		}{{committed.XID(), Committed}, {committed.XID(), Committed}, {aborted.XID(), Aborted},
			{running.XID(), InProgress}, {aborted.XID(), Aborted}, {committed.XID(), Committed}} {
			if got := m.Status(c.x); got != c.want {
				t.Fatalf("Status(%d) = %v, want %v", c.x, got, c.want)
			}
		}
	}
	if err := m.Commit(running, nil); err != nil {
		t.Fatal(err)
	}
	if got := m.Status(running.XID()); got != Committed {
		t.Fatalf("Status of a transaction after its commit = %v, want committed (a running answer was cached)", got)
	}
}

// BenchmarkStatusOfOneXID is the vacuum's case: consecutive tuples of a
// page deleted (or inserted) by the same transaction.
func BenchmarkStatusOfOneXID(b *testing.B) {
	m, _ := newTestManager(b, b.TempDir(), 0)
	tx := m.Begin()
	tx.MarkWritten()
	if err := m.Commit(tx, nil); err != nil {
		b.Fatal(err)
	}
	x := tx.XID()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if m.Status(x) != Committed {
				b.Fatal("not committed")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if m.Status(x) != Committed {
					b.Fatal("not committed")
				}
			}
		})
	})
}
