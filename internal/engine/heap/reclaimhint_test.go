package heap

import (
	"slices"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// The first pass's classification stands for a page whose LSN has not
// moved: a hint that says a remaining tuple was not visible to all keeps
// the page from being marked all-visible, though classifying it again
// would mark it (every remaining tuple is visible by now).
func TestReclaimAfterScanTrustsTheScanForAnUnchangedPage(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("keep", "dead")
	e.deleteCommitted(tids[1])
	h := e.txns.OldestXmin()
	sr, err := e.rel.ScanForVacuum(0, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sr.DeadOffsets, []page.OffsetNumber{tids[1].Off}) || !sr.Reclaim.TuplesVisible || sr.Reclaim.LSN == 0 {
		t.Fatalf("scan result %+v: want dead offset %d and a hint with the page's LSN, tuples visible", sr, tids[1].Off)
	}
	hint := sr.Reclaim
	hint.TuplesVisible = false
	vr, err := e.rel.ReclaimBlockAfterScan(0, sr.DeadOffsets, hint, h, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if vr.Freed != 1 || vr.TuplesRemoved != 1 || vr.AllVisible {
		t.Fatalf("reclaim result %+v: want 1 tuple freed and the page left not all-visible, as the hint says", vr)
	}
	if set, _ := e.rel.VM().IsSet(0, nil); set {
		t.Error("VM bit set: the page was classified again")
	}
}

// A page changed between the passes (here a remaining tuple deleted by a
// transaction still in progress) is classified again: the first pass's
// "every remaining tuple visible to all" no longer holds and must not mark
// the page all-visible.
func TestReclaimAfterScanClassifiesAPageChangedSinceTheScanAgain(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("keep", "dead", "other")
	e.deleteCommitted(tids[1])
	h := e.txns.OldestXmin()
	sr, err := e.rel.ScanForVacuum(0, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !sr.Reclaim.TuplesVisible {
		t.Fatalf("scan result %+v: want every remaining tuple visible to all", sr)
	}
	d := e.begin()
	if err := e.rel.Delete(d, tids[2], nil); err != nil {
		t.Fatal(err)
	}
	vr, err := e.rel.ReclaimBlockAfterScan(0, sr.DeadOffsets, sr.Reclaim, h, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if vr.Freed != 1 || vr.TuplesRemoved != 1 || vr.AllVisible {
		t.Fatalf("reclaim result %+v: want 1 tuple freed and the page not all-visible (a delete is in progress)", vr)
	}
	if set, _ := e.rel.VM().IsSet(0, nil); set {
		t.Error("VM bit set on a page with a delete in progress")
	}
	e.commit(d)
	if got := e.visibleRows(e.rel, e.begin().Snapshot()); len(got) != 1 || got[tids[0]] != "keep" {
		t.Errorf("visible rows after the delete committed: %v, want only keep", got)
	}
}

// An unchanged page whose remaining tuples were all visible ends as
// ReclaimBlock leaves it: dead slots freed, all-visible.
func TestReclaimAfterScanOfAnUnchangedPageFreesAndMarksItAllVisible(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("keep-1", "dead-1", "keep-2", "dead-2")
	e.deleteCommitted(tids[1], tids[3])
	h := e.txns.OldestXmin()
	sr, err := e.rel.ScanForVacuum(0, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	vr, err := e.rel.ReclaimBlockAfterScan(0, sr.DeadOffsets, sr.Reclaim, h, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if vr.Freed != 2 || vr.TuplesRemoved != 2 || !vr.AllVisible {
		t.Fatalf("reclaim result %+v: want 2 tuples freed, all-visible", vr)
	}
	if set, _ := e.rel.VM().IsSet(0, nil); !set {
		t.Error("VM bit not set")
	}
	got := e.visibleRows(e.rel, e.begin().Snapshot())
	if len(got) != 2 || got[tids[0]] != "keep-1" || got[tids[2]] != "keep-2" {
		t.Errorf("visible rows after reclaim: %v", got)
	}
	f := e.replayAll()
	if got := e.visibleRows(f.rel, f.begin().Snapshot()); len(got) != 2 {
		t.Errorf("replayed rows after reclaim: %v", got)
	}
}
