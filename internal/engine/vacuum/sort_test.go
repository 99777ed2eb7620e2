package vacuum

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func TestEntrySorterMergesSpilledRunsInOrder(t *testing.T) {
	for _, n := range []int{0, 1, 1023, 1024, 10_000} {
		rng := rand.New(rand.NewSource(int64(n)))
		s := newEntrySorter(t.TempDir(), 1) // 1024 entries a run
		var want []btree.Entry
		for i := range n {
			e := btree.Entry{Key: rng.Int63n(500) - 250, TID: page.TID{Block: uint32(i / 50), Off: page.OffsetNumber(i%50 + 1)}}
			want = append(want, e)
			if err := s.add(e); err != nil {
				t.Fatal(err)
			}
		}
		slices.SortFunc(want, btree.Compare)
		next, err := s.iterator()
		if err != nil {
			t.Fatal(err)
		}
		var got []btree.Entry
		for {
			e, ok, err := next()
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			got = append(got, e)
		}
		if wantRuns := n / 1024; n%1024 != 0 && n > 1024 {
			wantRuns++
			if s.Runs() != wantRuns {
				t.Errorf("n=%d: %d runs, want %d", n, s.Runs(), wantRuns)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("n=%d: merged %d entries, not the %d sorted ones", n, len(got), len(want))
		}
		s.close()
	}
}
