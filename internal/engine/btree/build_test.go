package btree

import (
	"slices"
	"testing"
)

func iterate(es []Entry) func() (Entry, bool, error) {
	i := 0
	return func() (Entry, bool, error) {
		if i == len(es) {
			return Entry{}, false, nil
		}
		i++
		return es[i-1], true, nil
	}
}

func TestBuildHoldsTheSameEntriesAsInserting(t *testing.T) {
	for _, n := range []int{0, 1, 261, 262, 50_000} {
		env := newEnv(t, 256)
		es := randomEntries(5, n, 1000)
		inserted := mustCreate(t, env, 10)
		insertAll(t, inserted, es)
		pages := 0
		built, err := Build(env.deps, 11, iterate(sorted(es)), nil, func() error { pages++; return nil })
		if err != nil {
			t.Fatalf("%d entries: %v", n, err)
		}
		if got, want := allEntries(t, built), allEntries(t, inserted); !equalEntries(got, want) {
			t.Fatalf("%d entries: built index has %d entries, inserted one %d", n, len(got), len(want))
		}
		mustCheck(t, built)
		nb, _ := built.nblocks()
		if pages != int(nb)-1 {
			t.Fatalf("%d entries: hook called %d times for %d pages", n, pages, nb-1)
		}
		for _, e := range es[:min(n, 300)] {
			if tids, _ := built.Lookup(e.Key, nil); !slices.Contains(tids, e.TID) {
				t.Fatalf("built index misses %+v", e)
			}
		}
		// A built index accepts inserts like any other.
		for i := range 2_000 {
			if err := built.Insert(IntKey(int64(i)), tidFor(1_000_000+i), nil); err != nil {
				t.Fatal(err)
			}
		}
		mustCheck(t, built)
	}
}

func TestBuildPacksLeavesNinetyPercent(t *testing.T) {
	env := newEnv(t, 256)
	es := randomEntries(6, 40_000, 1<<40)
	built, err := Build(env.deps, 11, iterate(sorted(es)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := built.Cleanup(nil)
	if err != nil {
		t.Fatal(err)
	}
	// A 9-byte key makes a 28-byte item with its line pointer (8 bytes
	// of header, 9 of key, aligned to 24); 8144 bytes hold 290.
	if per := st.Entries / st.LeafPages; per < 255 || per > 265 {
		t.Fatalf("%d entries per leaf, want ~261 (90%% of 290)", per)
	}
}

func TestBuildRejectsUnsortedInput(t *testing.T) {
	env := newEnv(t, 64)
	es := []Entry{{Key: IntKey(2)}, {Key: IntKey(1)}}
	if _, err := Build(env.deps, 11, iterate(es), nil, nil); err == nil {
		t.Fatal("Build accepted entries out of order")
	}
}
