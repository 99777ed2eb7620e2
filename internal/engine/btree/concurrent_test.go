package btree

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// TestConcurrentInsertsLookupsAndBulkDelete runs inserters, readers and a
// bulk delete at once. Readers must always find the entries that were
// inserted before they started and are never deleted; at the end the index
// holds exactly the surviving entries and passes Check.
func TestConcurrentInsertsLookupsAndBulkDelete(t *testing.T) {
	env := newEnv(t, 128)
	ix := mustCreate(t, env, 10)
	stable := randomEntries(9, 5_000, 1<<20) // never deleted: TID block < 1000
	insertAll(t, ix, stable)

	// Deleted later: TID blocks >= 1000.
	doomed := func(tid page.TID) bool { return tid.Block >= 1000 }
	var wg, readers sync.WaitGroup
	var stop atomic.Bool
	for w := range 2 {
		wg.Go(func() {
			for i := range 3_000 {
				k := int64(i*2 + w)
				if err := ix.Insert(IntKey(int64(k)), page.TID{Block: 1000 + uint32(w), Off: page.OffsetNumber(i + 1)}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	readers.Go(func() {
		for i := 0; !stop.Load(); i = (i + 37) % len(stable) {
			e := stable[i]
			tids, err := ix.Lookup(e.Key, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if !slices.Contains(tids, e.TID) {
				t.Errorf("lookup of stable key %x missed %v", e.Key, e.TID)
				return
			}
		}
	})
	readers.Go(func() {
		for !stop.Load() {
			prev := Entry{Key: IntKey(-1 << 63)}
			if err := rangeInts(ix, 0, 1<<19, func(k int64, tid page.TID) error {
				e := Entry{IntKey(k), tid}
				if Compare(prev, e) >= 0 {
					t.Errorf("range scan went backwards: %+v after %+v", e, prev)
				}
				prev = e
				return nil
			}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var bulk sync.WaitGroup
	bulk.Go(func() {
		for range 3 {
			if _, err := ix.BulkDelete(doomed, nil, nil); err != nil {
				t.Error(err)
			}
		}
	})
	bulk.Wait()
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	// One final pass removes what the inserters added after the others.
	if _, err := ix.BulkDelete(doomed, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := allEntries(t, ix); !equalEntries(got, sorted(stable)) {
		t.Fatalf("index holds %d entries, want the %d stable ones", len(got), len(stable))
	}
	mustCheck(t, ix)
}
