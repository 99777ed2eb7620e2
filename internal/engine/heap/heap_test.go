package heap

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func TestInsertIsVisibleToOwnTransactionAndLaterSnapshotsOnly(t *testing.T) {
	e := newTestEnv(t, 64)
	before := e.begin()
	w := e.begin()
	tid := e.insert(w, "alice")

	if got := e.visibleRows(e.rel, w.Snapshot()); got[tid] != "alice" {
		t.Errorf("inserter does not see its own row: %v", got)
	}
	if got := e.visibleRows(e.rel, before.Snapshot()); len(got) != 0 {
		t.Errorf("concurrent snapshot sees an uncommitted row: %v", got)
	}
	e.commit(w)
	if _, vis, _ := e.rel.Fetch(before.Snapshot(), tid, nil); vis {
		t.Error("snapshot taken before the commit sees the row")
	}
	after := e.begin()
	data, vis, err := e.rel.Fetch(after.Snapshot(), tid, nil)
	if err != nil || !vis || string(data) != "alice" {
		t.Errorf("Fetch after commit = %q, %v, %v; want alice visible", data, vis, err)
	}
}

func TestAbortedInsertIsInvisibleToEveryone(t *testing.T) {
	e := newTestEnv(t, 64)
	w := e.begin()
	tid := e.insert(w, "ghost")
	if err := e.txns.Abort(w, nil); err != nil {
		t.Fatal(err)
	}
	r := e.begin()
	if _, vis, _ := e.rel.Fetch(r.Snapshot(), tid, nil); vis {
		t.Error("aborted row is visible")
	}
	if got := e.visibleRows(e.rel, r.Snapshot()); len(got) != 0 {
		t.Errorf("scan returns aborted rows: %v", got)
	}
	// The second look used the XminInvalid hint set by the first.
	_, h, err := e.rel.LinePointer(tid, nil)
	if err != nil || h.Infomask&XminInvalid == 0 {
		t.Errorf("hint bit not set after a clog lookup: infomask %#x, %v", h.Infomask, err)
	}
}

func TestDeleteHidesRowFromSnapshotsTakenAfterCommit(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("a", "b", "c")
	old := e.begin()
	d := e.begin()
	if err := e.rel.Delete(d, tids[1], nil); err != nil {
		t.Fatal(err)
	}
	if got := e.visibleRows(e.rel, d.Snapshot()); len(got) != 2 || got[tids[1]] != "" {
		t.Errorf("deleter sees %v, want a and c", got)
	}
	e.commit(d)
	if got := e.visibleRows(e.rel, old.Snapshot()); len(got) != 3 {
		t.Errorf("older snapshot sees %v, want all three rows", got)
	}
	if got := e.visibleRows(e.rel, e.begin().Snapshot()); len(got) != 2 {
		t.Errorf("new snapshot sees %v, want a and c", got)
	}
	if err := e.rel.Delete(e.begin(), tids[1], nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleting a deleted row: %v, want ErrNotFound", err)
	}
}

func TestModifyingARowChangedByAnotherTransactionFails(t *testing.T) {
	cases := []struct {
		name        string
		commitFirst bool
		abortFirst  bool
		wantErr     error
	}{
		{"first updater still running", false, false, ErrConcurrentUpdate},
		{"first updater committed after our snapshot", true, false, ErrConcurrentUpdate},
		{"first updater aborted", false, true, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newTestEnv(t, 64)
			tid := e.insertCommitted("v1")[0]
			a, b := e.begin(), e.begin()
			if _, err := e.rel.Update(a, tid, []byte("v2-a"), nil); err != nil {
				t.Fatal(err)
			}
			switch {
			case c.commitFirst:
				e.commit(a)
			case c.abortFirst:
				_ = e.txns.Abort(a, nil)
			}
			_, err := e.rel.Update(b, tid, []byte("v2-b"), nil)
			if c.wantErr == nil && err != nil || c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Fatalf("second update: %v, want %v", err, c.wantErr)
			}
			if delErr := e.rel.Delete(b, tid, nil); c.wantErr != nil && !errors.Is(delErr, c.wantErr) {
				t.Errorf("second delete: %v, want %v", delErr, c.wantErr)
			}
		})
	}
}

func TestUpdateChainsVersionsAndShowsOneVersionPerSnapshot(t *testing.T) {
	e := newTestEnv(t, 64)
	v1 := e.insertCommitted("v1")[0]
	s1 := e.begin()
	u := e.begin()
	v2, err := e.rel.Update(u, v1, []byte("v2"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.commit(u)
	u2 := e.begin()
	v3, err := e.rel.Update(u2, v2, []byte("v3"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.commit(u2)

	_, h1, _ := e.rel.LinePointer(v1, nil)
	_, h2, _ := e.rel.LinePointer(v2, nil)
	_, h3, _ := e.rel.LinePointer(v3, nil)
	if h1.Ctid != v2 || h2.Ctid != v3 || h3.Ctid != v3 {
		t.Errorf("ctid chain %v -> %v -> %v, want %v -> %v -> %v (self)", h1.Ctid, h2.Ctid, h3.Ctid, v2, v3, v3)
	}
	if h1.Infomask&Updated == 0 || h3.Infomask&Updated != 0 {
		t.Errorf("Updated bit: v1 %v v3 %v, want set and clear", h1.Infomask&Updated != 0, h3.Infomask&Updated != 0)
	}
	if got := e.visibleRows(e.rel, s1.Snapshot()); !maps.Equal(got, map[page.TID]string{v1: "v1"}) {
		t.Errorf("old snapshot sees %v, want only v1", got)
	}
	if got := e.visibleRows(e.rel, e.begin().Snapshot()); !maps.Equal(got, map[page.TID]string{v3: "v3"}) {
		t.Errorf("new snapshot sees %v, want only v3", got)
	}
}

func TestUpdateOfARowOnAFullPageMovesTheNewVersion(t *testing.T) {
	e := newTestEnv(t, 64)
	big := strings.Repeat("x", 2000)
	tids := e.insertCommitted(big, big, big, big) // fills block 0
	if tids[3].Block != 0 {
		t.Fatalf("setup: four 2000-byte rows did not share block 0: %v", tids)
	}
	u := e.begin()
	nt, err := e.rel.Update(u, tids[0], []byte(big+"!"), nil)
	if err != nil {
		t.Fatal(err)
	}
	e.commit(u)
	if nt.Block == 0 {
		t.Fatalf("new version stayed on the full page: %v", nt)
	}
	got := e.visibleRows(e.rel, e.begin().Snapshot())
	if len(got) != 4 || got[nt] != big+"!" || got[tids[0]] != "" {
		t.Errorf("after a cross-page update: %d rows, new version %q present=%v, old present=%v", len(got), got[nt][:3], got[nt] != "", got[tids[0]] != "")
	}
}

func TestOversizedRowIsRejectedWithTypedError(t *testing.T) {
	e := newTestEnv(t, 64)
	w := e.begin()
	if _, err := e.rel.Insert(w, make([]byte, MaxTupleData), nil); err != nil {
		t.Fatalf("largest row (%d bytes): %v", MaxTupleData, err)
	}
	if _, err := e.rel.Insert(w, make([]byte, MaxTupleData+1), nil); !errors.Is(err, ErrTupleTooLarge) {
		t.Fatalf("row of %d bytes: %v, want ErrTupleTooLarge", MaxTupleData+1, err)
	}
	tid := e.insert(w, "small")
	if _, err := e.rel.Update(w, tid, make([]byte, 9000), nil); !errors.Is(err, ErrTupleTooLarge) {
		t.Fatalf("update to 9000 bytes: %v, want ErrTupleTooLarge", err)
	}
}

func TestFetchOfMissingTIDsIsNotVisible(t *testing.T) {
	e := newTestEnv(t, 64)
	e.insertCommitted("a")
	snap := e.begin().Snapshot()
	for _, tid := range []page.TID{{Block: 0, Off: 9}, {Block: 7, Off: 1}, {Block: 0, Off: 0}} {
		if data, vis, err := e.rel.Fetch(snap, tid, nil); err != nil || vis || data != nil {
			t.Errorf("Fetch(%v) = %q, %v, %v; want invisible without error", tid, data, vis, err)
		}
	}
}

func TestRowsSpreadOverManyPagesScanInOrder(t *testing.T) {
	e := newTestEnv(t, 32) // smaller than the table: pages are evicted and read back
	w := e.begin()
	want := map[page.TID]string{}
	for i := 0; i < 3000; i++ {
		row := fmt.Sprintf("row-%05d-%s", i, strings.Repeat("p", 80))
		want[e.insert(w, row)] = row
	}
	e.commit(w)
	if n := e.nblocks(); n < 30 {
		t.Fatalf("3000 rows of ~100 bytes fill only %d blocks", n)
	}
	if got := e.visibleRows(e.rel, e.begin().Snapshot()); !maps.Equal(got, want) {
		t.Fatalf("scan returned %d rows, want %d identical", len(got), len(want))
	}
}
