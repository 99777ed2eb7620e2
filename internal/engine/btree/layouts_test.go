package btree

import (
	"bytes"
	"errors"
	"flag"
	"maps"
	"slices"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

var layoutMatrix = flag.Bool("btree-matrix", false, "run the B-tree tests in layout 1 and with long keys (about 90 s)")

// withLayout runs tests with mustCreate making indexes in layout (and sets
// the layout for the rest of the calling test).
func withLayout(t *testing.T, layout uint16, tests map[string]func(*testing.T)) {
	old := testLayout
	testLayout = layout
	t.Cleanup(func() { testLayout = old })
	for name, fn := range tests {
		t.Run(name, fn)
	}
}

// An index made by an earlier build (layout 1: fixed 14-byte items, the
// high key in the special space) keeps working: inserts split it, scans,
// bulk delete, Check and redo read it, all in layout 1.
// (The whole matrix runs with -btree-matrix.)
func TestLayoutOneIndexesKeepWorking(t *testing.T) {
	tests := map[string]func(*testing.T){
		"damage": TestCheckDetectsDamagedPages,
		"redo":   TestRedoOverPartlyWrittenFilesIsIdempotent,
	}
	if *layoutMatrix {
		maps.Copy(tests, map[string]func(*testing.T){
			"random inserts":    TestInsertManyRandomKeysSplitsAndFindsEveryKey,
			"ascending inserts": TestAscendingInsertsFillPagesNinetyPercent,
			"duplicates":        TestDuplicateKeysAreKeptInTIDOrderAndDuplicatePairsRejected,
			"range scans":       TestRangeScanReturnsKeysInBoundsInOrder,
			"bulk delete":       TestBulkDeleteRemovesExactlyTheDeadEntriesInPhysicalOrder,
		})
	}
	withLayout(t, layout1, tests)
	env := newEnv(t, 64)
	ix := mustCreate(t, env, 10)
	if err := ix.Insert([]byte("text"), tidFor(1), nil); !errors.Is(err, errNotIntegerKey) {
		t.Fatalf("a text key into a layout-1 index: %v, want errNotIntegerKey", err)
	}
	m, err := ix.readMeta(nil)
	if err != nil || m.layout != layout1 {
		t.Fatalf("meta %+v, %v; want layout 1", m, err)
	}
}

// Keys of 0 to MaxKeySize bytes: pages of a few large entries split where
// both halves fit, and every operation holds up (-btree-matrix; make test
// runs TestVariableKeysThroughInsertDeleteBuildAndRedo).
func TestLongVariableKeys(t *testing.T) {
	if !*layoutMatrix {
		t.Skip("the long-key matrix runs with -btree-matrix")
	}
	longKeys = true
	defer func() { longKeys = false }()
	withLayout(t, layout2, map[string]func(*testing.T){
		"random inserts": TestInsertManyRandomKeysSplitsAndFindsEveryKey,
		"bulk delete":    TestBulkDeleteRemovesExactlyTheDeadEntriesInPhysicalOrder,
		"build":          TestBuildHoldsTheSameEntriesAsInserting,
		"redo":           TestRedoReplaysTheWorkloadIntoAnEmptyDirectory,
		"concurrency":    TestConcurrentInsertsLookupsAndBulkDelete,
	})
}

func TestMaximalKeysSplitAndLongerOnesAreRefused(t *testing.T) {
	env := newEnv(t, 128)
	ix := mustCreate(t, env, 10)
	var want []Entry
	for i := range 300 {
		k := bytes.Repeat([]byte{byte(i % 251)}, MaxKeySize)
		k[MaxKeySize-1] = byte(i / 251)
		e := Entry{Key: k, TID: tidFor(i)}
		if err := ix.Insert(e.Key, e.TID, nil); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		want = append(want, e)
	}
	mustCheck(t, ix)
	if got := allEntries(t, ix); !equalEntries(got, sorted(want)) {
		t.Fatalf("index holds %d entries, want %d", len(got), len(want))
	}
	if err := ix.Insert(make([]byte, MaxKeySize+1), tidFor(1), nil); !errors.Is(err, ErrKeyTooLong) {
		t.Fatalf("a %d-byte key: %v, want ErrKeyTooLong", MaxKeySize+1, err)
	}
	es := []Entry{{Key: make([]byte, MaxKeySize+1)}}
	if _, err := Build(env.deps, 11, iterate(es), nil, nil); !errors.Is(err, ErrKeyTooLong) {
		t.Fatalf("Build of a %d-byte key: %v, want ErrKeyTooLong", MaxKeySize+1, err)
	}
}

// A range over a key prefix returns exactly the keys that extend it.
func TestRangeOverVariableKeysIsBytewise(t *testing.T) {
	env := newEnv(t, 64)
	ix := mustCreate(t, env, 10)
	keys := []string{"", "a", "ab", "abc", "abd", "b", "ba", "\xff"}
	for i, k := range keys {
		if err := ix.Insert([]byte(k), tidFor(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	if err := ix.Range([]byte("ab"), []byte("ab\xff"), nil, func(k []byte, _ page.TID) error {
		got = append(got, string(k))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ab", "abc", "abd"}; !slices.Equal(got, want) {
		t.Fatalf("range [ab, ab\\xff] = %q, want %q", got, want)
	}
	if tids, err := ix.Lookup([]byte(""), nil); err != nil || len(tids) != 1 {
		t.Fatalf("lookup of the empty key: %v, %v", tids, err)
	}
}

// Variable keys of 1 to 1000 bytes through every operation: inserts that
// split leaves and internal pages, a bulk delete, a bottom-up build of the
// same entries, and redo of it all into an empty directory.
func TestVariableKeysThroughInsertDeleteBuildAndRedo(t *testing.T) {
	longKeys = true
	defer func() { longKeys = false }()
	env := newEnv(t, 128)
	ix := mustCreate(t, env, 10)
	es := randomEntries(3, 3_000, 1<<30)
	insertAll(t, ix, es)
	mustCheck(t, ix)
	if m, err := ix.readMeta(nil); err != nil || m.level < 2 {
		t.Fatalf("meta %+v, %v: want a tree of three levels or more", m, err)
	}
	dead := func(tid page.TID) bool { return tid.Off%3 == 0 }
	if _, err := ix.BulkDelete(dead, nil, nil); err != nil {
		t.Fatal(err)
	}
	var live []Entry
	for _, e := range es {
		if !dead(e.TID) {
			live = append(live, e)
		}
	}
	live = sorted(live)
	if got := allEntries(t, ix); !equalEntries(got, live) {
		t.Fatalf("after bulk delete %d entries, want %d", len(got), len(live))
	}
	built, err := Build(env.deps, 11, iterate(live), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustCheck(t, built)
	for _, e := range live[:200] {
		if tids, err := built.Lookup(e.Key, nil); err != nil || !slices.Contains(tids, e.TID) {
			t.Fatalf("built index: lookup of a %d-byte key: %v, %v", len(e.Key), tids, err)
		}
	}
	deps := recoveryDeps(t, t.TempDir())
	replay(t, env.fs, env.dir, deps)
	for _, rel := range []storage.RelFileNode{10, 11} {
		re := Open(deps, rel)
		if got := allEntries(t, re); !equalEntries(got, live) {
			t.Fatalf("index %d after redo: %d entries, want %d", rel, len(got), len(live))
		}
		mustCheck(t, re)
	}
}
