package txn

import (
	"testing"
	"time"
)

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

// A page without hint bits alternates between its rows' inserter and the
// deleter of its dead rows: both answers must come from the cache, without
// mu (the test holds mu exclusively, so a lookup that misses blocks), and a
// third transaction must evict the older entry, not corrupt either.
func TestStatusCacheServesAnInserterAndADeleterInTurnWithoutTheLock(t *testing.T) {
	m, _ := newTestManager(t, t.TempDir(), 0)
	var xids []XID
	for range 3 {
		tx := m.Begin()
		tx.MarkWritten()
		if err := m.Commit(tx, nil); err != nil {
			t.Fatal(err)
		}
		xids = append(xids, tx.XID())
	}
	inserter, deleter, third := xids[0], xids[1], xids[2]
	m.Status(inserter)
	m.Status(deleter)
	lookups := func(xs ...XID) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 100 {
				for _, x := range xs {
					if got := m.Status(x); got != Committed {
						t.Errorf("Status(%d) = %v, want committed", x, got)
					}
				}
			}
		}()
		select {
		case <-done:
			return true
		case <-time.After(2 * time.Second):
			return false
		}
	}
	if !lookups(inserter, deleter) {
		t.Fatal("alternating lookups of two committed transactions waited for the manager's lock: the cache missed")
	}
	m.Status(third) // evicts the inserter, the older entry
	if !lookups(third, deleter) {
		t.Fatal("after a third transaction's lookup, the two newest were not both cached")
	}
	if got := m.Status(inserter); got != Committed {
		t.Fatalf("Status of the evicted inserter = %v, want committed", got)
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

// BenchmarkStatusOfAnInserterAndADeleterInTurn is the unhinted vacuum's
// case: a page's live rows share one inserter, its dead rows add one
// deleter, so lookups alternate between two transactions.
func BenchmarkStatusOfAnInserterAndADeleterInTurn(b *testing.B) {
	m, _ := newTestManager(b, b.TempDir(), 0)
	var xids [2]XID
	for i := range xids {
		tx := m.Begin()
		tx.MarkWritten()
		if err := m.Commit(tx, nil); err != nil {
			b.Fatal(err)
		}
		xids[i] = tx.XID()
	}
	i := 0
	for b.Loop() {
		if m.Status(xids[i&1]) != Committed {
			b.Fatal("not committed")
		}
		i++
	}
}
