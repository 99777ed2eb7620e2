package vacuum

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func TestEntrySorterMergesSpilledRunsInOrder(t *testing.T) {
	for _, n := range []int{0, 1, 1023, 1024, 10_000} {
		rng := rand.New(rand.NewSource(int64(n)))
		s := newEntrySorter(t.TempDir(), 1) // 40 KiB a run: 500 to 800 entries
		var want []btree.Entry
		for i := range n {
			key := btree.IntKey(rng.Int63n(500) - 250)
			if i%3 == 0 { // a variable-length key
				key = []byte(strings.Repeat("k", rng.Intn(100)))
			}
			e := btree.Entry{Key: key, TID: page.TID{Block: uint32(i / 50), Off: page.OffsetNumber(i%50 + 1)}}
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
		if n == 10_000 && s.Runs() < 10 {
			t.Errorf("n=%d: %d runs, want at least 10 of 40 KiB", n, s.Runs())
		}
		if !slices.EqualFunc(got, want, func(a, b btree.Entry) bool { return btree.Compare(a, b) == 0 }) {
			t.Errorf("n=%d: merged %d entries, not the %d sorted ones", n, len(got), len(want))
		}
		s.close()
	}
}
