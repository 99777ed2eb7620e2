package btree

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func TestEmptyIndexFindsNothing(t *testing.T) {
	env := newEnv(t, 64)
	ix := mustCreate(t, env, 10)
	tids, err := ix.Lookup(IntKey(5), nil)
	if err != nil || len(tids) != 0 {
		t.Fatalf("Lookup on an empty index = %v, %v", tids, err)
	}
	if got := allEntries(t, ix); len(got) != 0 {
		t.Fatalf("empty index has %d entries", len(got))
	}
	mustCheck(t, ix)
}

func TestInsertManyRandomKeysSplitsAndFindsEveryKey(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 20_000
	}
	env := newEnv(t, 512)
	ix := mustCreate(t, env, 10)
	es := randomEntries(1, n, 1<<40)
	insertAll(t, ix, es)

	m, err := ix.readMeta(nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.level < 1 {
		t.Fatalf("root level %d after %d inserts: the tree never split", m.level, n)
	}
	for _, e := range es {
		tids, err := ix.Lookup(e.Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(tids, e.TID) {
			t.Fatalf("key %x: lookup returned %v, missing %v", e.Key, tids, e.TID)
		}
	}
	if got, want := allEntries(t, ix), sorted(es); !equalEntries(got, want) {
		t.Fatalf("index holds %d entries, want %d in order", len(got), len(want))
	}
	if tids, _ := ix.Lookup(IntKey(-1), nil); len(tids) != 0 {
		t.Fatalf("lookup of an absent key returned %v", tids)
	}
	mustCheck(t, ix)
}

func TestAscendingInsertsFillPagesNinetyPercent(t *testing.T) {
	env := newEnv(t, 256)
	ix := mustCreate(t, env, 10)
	for i := range 20_000 {
		if err := ix.Insert(IntKey(int64(i)), tidFor(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	st, err := ix.Cleanup(nil)
	if err != nil {
		t.Fatal(err)
	}
	// A page holds 290 entries of a 9-byte key in layout 2 (28 bytes
	// with the line pointer), 406 in layout 1 (20 bytes).
	perPage := 290.0
	if testLayout == layout1 {
		perPage = 406
	}
	perLeaf := float64(st.Entries) / float64(st.LeafPages)
	if perLeaf < 0.85*perPage {
		t.Fatalf("%.0f entries per leaf after ascending inserts, want about 90%% of %.0f", perLeaf, perPage)
	}
	mustCheck(t, ix)
}

func TestDuplicateKeysAreKeptInTIDOrderAndDuplicatePairsRejected(t *testing.T) {
	env := newEnv(t, 128)
	ix := mustCreate(t, env, 10)
	// 2,000 entries of one key span several leaves.
	var want []page.TID
	for i := 1999; i >= 0; i-- {
		if err := ix.Insert(IntKey(42), tidFor(i), nil); err != nil {
			t.Fatal(err)
		}
		want = append(want, tidFor(i))
	}
	for i := range 500 {
		for _, k := range []int64{41, 43} {
			if err := ix.Insert(IntKey(int64(k)), tidFor(i), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.SortFunc(want, func(a, b page.TID) int { return Compare(Entry{TID: a}, Entry{TID: b}) })
	got, err := ix.Lookup(IntKey(42), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("lookup of a duplicated key returned %d TIDs, want %d in TID order", len(got), len(want))
	}
	if err := ix.Insert(IntKey(42), tidFor(7), nil); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("inserting an existing pair: err = %v, want ErrDuplicate", err)
	}
	mustCheck(t, ix)
}

func TestRangeScanReturnsKeysInBoundsInOrder(t *testing.T) {
	env := newEnv(t, 128)
	ix := mustCreate(t, env, 10)
	es := randomEntries(2, 20_000, 10_000)
	insertAll(t, ix, es)
	all := sorted(es)
	tests := []struct {
		name   string
		lo, hi int64
	}{
		{"middle", 2_000, 3_000},
		{"single key", 5_000, 5_000},
		{"below everything", math.MinInt64, -1},
		{"everything", math.MinInt64, math.MaxInt64},
		{"upper tail", 9_990, math.MaxInt64},
		{"empty (lo > hi)", 10, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []Entry
			if err := rangeInts(ix, tc.lo, tc.hi, func(k int64, tid page.TID) error {
				got = append(got, Entry{IntKey(k), tid})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			var want []Entry
			for _, e := range all {
				if k := keyInt(t, e.Key); k >= tc.lo && k <= tc.hi {
					want = append(want, e)
				}
			}
			if !equalEntries(got, want) {
				t.Fatalf("range [%d, %d] returned %d entries, want %d", tc.lo, tc.hi, len(got), len(want))
			}
		})
	}
	stop := errors.New("stop")
	calls := 0
	err := rangeInts(ix, 0, 10_000, func(int64, page.TID) error {
		calls++
		if calls == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Fatalf("Range did not stop at the callback's error: err %v after %d calls", err, calls)
	}
}
