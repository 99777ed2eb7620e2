package heap

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// deleteCommitted deletes tids in one committed transaction.
func (e *testEnv) deleteCommitted(tids ...page.TID) {
	e.t.Helper()
	d := e.begin()
	for _, tid := range tids {
		if err := e.rel.Delete(d, tid, nil); err != nil {
			e.t.Fatalf("delete %v: %v", tid, err)
		}
	}
	e.commit(d)
}

func TestPruneRemovesExactlyTheVersionsDeadForTheHorizon(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("keep", "dead-early", "dead-late", "aborted-later")
	ab := e.begin()
	e.insert(ab, "aborted-insert")
	_ = e.txns.Abort(ab, nil)
	e.deleteCommitted(tids[1])
	holder := e.begin() // its snapshot still sees dead-late
	e.deleteCommitted(tids[2])
	del := e.begin()
	if err := e.rel.Delete(del, tids[3], nil); err != nil {
		t.Fatal(err)
	}
	_ = e.txns.Abort(del, nil)

	horizon := e.txns.OldestXmin()
	if horizon != holder.XID() {
		t.Fatalf("horizon %d, want the holder's xid %d", horizon, holder.XID())
	}
	res, err := e.rel.PruneBlock(0, horizon, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Dead: dead-early (deleted below the horizon) and the aborted insert.
	// Recently dead: dead-late. Live: keep, aborted-later (deleter aborted).
	if res.TuplesRemoved != 2 || res.TuplesRemaining != 3 || res.RecentlyDead != 1 || res.AllVisible || !res.WALLogged {
		t.Fatalf("prune result %+v: want 2 removed, 3 remaining (1 recently dead), not all-visible, logged", res)
	}
	if !slices.Equal(res.DeadOffsets, []page.OffsetNumber{tids[1].Off, 5}) {
		t.Errorf("dead offsets %v, want [%d 5]", res.DeadOffsets, tids[1].Off)
	}
	if got := e.visibleRows(e.rel, holder.Snapshot()); len(got) != 3 || got[tids[2]] != "dead-late" {
		t.Errorf("holder's snapshot after prune sees %v, want keep, dead-late, aborted-later", got)
	}
	// Pruning again removes nothing new but still reports the dead slots.
	again, err := e.rel.PruneBlock(0, horizon, nil)
	if err != nil || again.TuplesRemoved != 0 || again.WALLogged || len(again.DeadOffsets) != 2 {
		t.Errorf("second prune %+v, %v: want nothing removed, 2 dead slots, no WAL", again, err)
	}
	// Once the holder ends, dead-late is dead too.
	e.commit(holder)
	res, err = e.rel.PruneBlock(0, e.txns.OldestXmin(), nil)
	if err != nil || res.TuplesRemoved != 1 || res.TuplesRemaining != 2 || len(res.DeadOffsets) != 3 {
		t.Errorf("prune after the holder ended %+v, %v: want 1 removed, 2 remaining, 3 dead slots", res, err)
	}
	if free := res.FreeSpace; free < MaxItemSize-200 {
		t.Errorf("free space %d after pruning all but two tiny rows", free)
	}
}

func TestVacuumFreesDeadSlotsAndTheTableDoesNotGrowOnReinsert(t *testing.T) {
	e := newTestEnv(t, 64)
	row := strings.Repeat("r", 200)
	var tids []page.TID
	for i := 0; i < 5; i++ {
		rows := make([]string, 60)
		for j := range rows {
			rows[j] = row
		}
		tids = append(tids, e.insertCommitted(rows...)...)
	}
	n := e.nblocks()
	e.deleteCommitted(tids[:len(tids)/2]...)

	horizon := e.txns.OldestXmin()
	removed := 0
	for blk := uint32(0); blk < n; blk++ {
		pr, err := e.rel.PruneBlock(blk, horizon, nil)
		if err != nil {
			t.Fatal(err)
		}
		removed += pr.TuplesRemoved
		vr, err := e.rel.VacuumBlock(blk, pr.DeadOffsets, horizon, nil)
		if err != nil {
			t.Fatal(err)
		}
		if vr.Freed != len(pr.DeadOffsets) {
			t.Errorf("block %d: freed %d of %d dead slots", blk, vr.Freed, len(pr.DeadOffsets))
		}
		if !vr.AllVisible {
			t.Errorf("block %d with only committed old rows is not all-visible after vacuum", blk)
		}
	}
	if removed != len(tids)/2 {
		t.Fatalf("pruned %d tuples, want %d", removed, len(tids)/2)
	}
	c, err := e.rel.CountTuples(context.Background(), e.txns.OldestXmin(), nil)
	if err != nil || c.Live != int64(len(tids)-len(tids)/2) || c.Dead != 0 || c.DeadLinePointers != 0 {
		t.Fatalf("after vacuum: %+v, %v", c, err)
	}
	// Re-inserting as many rows reuses the freed space.
	rows := make([]string, len(tids)/2)
	for i := range rows {
		rows[i] = row
	}
	e.insertCommitted(rows...)
	if got := e.nblocks(); got != n {
		t.Errorf("table grew from %d to %d blocks although vacuum freed room for every new row", n, got)
	}
}

func TestModificationClearsTheVisibilityMapBit(t *testing.T) {
	ops := []struct {
		name string
		do   func(e *testEnv, tx *txn.Txn, tid page.TID) error
	}{
		{"insert", func(e *testEnv, tx *txn.Txn, _ page.TID) error {
			_, err := e.rel.Insert(tx, []byte("new"), nil)
			return err
		}},
		{"delete", func(e *testEnv, tx *txn.Txn, tid page.TID) error { return e.rel.Delete(tx, tid, nil) }},
		{"update", func(e *testEnv, tx *txn.Txn, tid page.TID) error {
			_, err := e.rel.Update(tx, tid, []byte("v2"), nil)
			return err
		}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			e := newTestEnv(t, 64)
			tid := e.insertCommitted("a", "b")[0]
			ok, err := e.rel.SetAllVisible(0, e.txns.OldestXmin(), nil)
			if err != nil || !ok {
				t.Fatalf("SetAllVisible = %v, %v", ok, err)
			}
			if set, _ := e.rel.VM().IsSet(0, nil); !set {
				t.Fatal("VM bit not set")
			}
			tx := e.begin()
			if err := op.do(e, tx, tid); err != nil {
				t.Fatal(err)
			}
			if set, _ := e.rel.VM().IsSet(0, nil); set {
				t.Errorf("VM bit still set after %s", op.name)
			}
			c, _ := e.rel.CountTuples(context.Background(), e.txns.OldestXmin(), nil)
			if c.AllVisible != 0 {
				t.Errorf("page flag still all-visible after %s", op.name)
			}
		})
	}
}

func TestSetAllVisibleRefusesPagesWithInvisibleTuples(t *testing.T) {
	e := newTestEnv(t, 64)
	e.insertCommitted("a")
	w := e.begin()
	e.insert(w, "running")
	if ok, err := e.rel.SetAllVisible(0, e.txns.OldestXmin(), nil); err != nil || ok {
		t.Fatalf("SetAllVisible with an in-progress insert = %v, %v; want false", ok, err)
	}
	if n, _ := e.rel.VM().Count(1, nil); n != 0 {
		t.Errorf("VM count %d, want 0", n)
	}
}

func TestTruncateRemovesTrailingEmptyBlocks(t *testing.T) {
	e := newTestEnv(t, 64)
	big := strings.Repeat("z", 3000)
	var tids []page.TID
	for i := 0; i < 10; i++ {
		tids = append(tids, e.insertCommitted(big)...)
	}
	n := e.nblocks()
	if n < 4 {
		t.Fatalf("setup: %d blocks", n)
	}
	// Delete every row outside block 0, then vacuum everything.
	var doomed []page.TID
	for _, tid := range tids {
		if tid.Block > 0 {
			doomed = append(doomed, tid)
		}
	}
	e.deleteCommitted(doomed...)
	h := e.txns.OldestXmin()
	for blk := uint32(0); blk < n; blk++ {
		pr, err := e.rel.PruneBlock(blk, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.rel.VacuumBlock(blk, pr.DeadOffsets, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	keep, err := e.rel.TrailingEmptyBlocks(nil)
	if err != nil || keep != 1 {
		t.Fatalf("TrailingEmptyBlocks = %d, %v; want 1", keep, err)
	}
	if err := e.rel.Truncate(0, nil); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("truncating a non-empty block: %v, want ErrNotEmpty", err)
	}
	if err := e.rel.Truncate(keep, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.nblocks(); got != 1 {
		t.Errorf("after truncate: %d blocks, want 1", got)
	}
	if vmn, _ := e.st.NBlocks(testRel, storage.VMFork); vmn > 1 {
		t.Errorf("VM fork has %d pages", vmn)
	}
	want := map[page.TID]string{}
	for _, tid := range tids {
		if tid.Block == 0 {
			want[tid] = big
		}
	}
	if got := e.visibleRows(e.rel, e.begin().Snapshot()); !maps.Equal(got, want) {
		t.Errorf("after truncate: %d rows, want %d", len(got), len(want))
	}
	// New inserts extend again from block 1.
	if tid := e.insertCommitted(big)[0]; tid.Block > 1 {
		t.Errorf("insert after truncation landed in block %d", tid.Block)
	}
}

func TestRewriteKeepsEveryVersionSomeSnapshotNeeds(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("live", "gone", "old-version")
	e.deleteCommitted(tids[1])
	holder := e.begin()
	u := e.begin()
	if _, err := e.rel.Update(u, tids[2], []byte("new-version"), nil); err != nil {
		t.Fatal(err)
	}
	e.commit(u)

	dst, err := Create(e.rel.d, testRel+1)
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	err = e.rel.ScanLiveForRewrite(context.Background(), e.txns.OldestXmin(), nil,
		func() error { pages++; return nil },
		func(_ page.TID, h TupleHeader, data []byte) error {
			_, err := dst.InsertRaw(h, data, nil)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	if pages != 1 {
		t.Errorf("hook ran %d times for a 1-page table", pages)
	}
	values := func(m map[page.TID]string) []string {
		v := slices.Collect(maps.Values(m))
		slices.Sort(v)
		return v
	}
	if got := values(e.visibleRows(dst, holder.Snapshot())); !slices.Equal(got, []string{"live", "old-version"}) {
		t.Errorf("holder's snapshot of the rewritten table: %v", got)
	}
	if got := values(e.visibleRows(dst, e.begin().Snapshot())); !slices.Equal(got, []string{"live", "new-version"}) {
		t.Errorf("new snapshot of the rewritten table: %v", got)
	}
	c, _ := dst.CountTuples(context.Background(), e.txns.OldestXmin(), nil)
	if c.Live+c.RecentlyDead != 3 {
		t.Errorf("rewritten table holds %+v, want 3 versions (the deleted row dropped)", c)
	}
}

func TestCountTuplesClassifiesEveryVersion(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("a", "b", "c")
	e.deleteCommitted(tids[0])
	d := e.begin()
	_ = e.rel.Delete(d, tids[1], nil)
	w := e.begin()
	e.insert(w, "new")
	c, err := e.rel.CountTuples(context.Background(), e.txns.OldestXmin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := TupleCounts{Live: 1, Dead: 1, DeleteInProgress: 1, InsertInProgress: 1}
	got := TupleCounts{Live: c.Live, Dead: c.Dead, DeleteInProgress: c.DeleteInProgress, InsertInProgress: c.InsertInProgress}
	if got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if c.Pages != 1 || c.LiveBytes == 0 {
		t.Errorf("pages %d live bytes %d", c.Pages, c.LiveBytes)
	}
}

func TestInsertThroughAStaleTargetAfterTruncationSucceeds(t *testing.T) {
	e := newTestEnv(t, 64)
	big := strings.Repeat("q", 3000)
	var tids []page.TID
	for i := 0; i < 6; i++ {
		tids = append(tids, e.insertCommitted(big)...)
	}
	e.deleteCommitted(tids...)
	// A second handle on the same relation (as recovery or another
	// session would have) vacuums and truncates it to nothing.
	other := Open(e.rel.d, testRel)
	h := e.txns.OldestXmin()
	for blk := uint32(0); blk < e.nblocks(); blk++ {
		pr, err := other.PruneBlock(blk, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.VacuumBlock(blk, pr.DeadOffsets, h, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Truncate(0, nil); err != nil {
		t.Fatal(err)
	}
	// e.rel still targets a block that no longer exists.
	tid := e.insertCommitted("after")[0]
	if tid.Block != 0 {
		t.Errorf("insert after truncation landed in block %d, want 0", tid.Block)
	}
}

func TestBulkLoaderPacksPagesAndReplays(t *testing.T) {
	e := newTestEnv(t, 64)
	l := e.rel.NewBulkLoader(nil)
	want := map[page.TID]string{}
	for i := 0; i < 500; i++ {
		row := strings.Repeat("b", 100+i%50)
		tid, err := l.Add(TupleHeader{Xmin: txn.FrozenXID, Infomask: XminCommitted}, []byte(row))
		if err != nil {
			t.Fatal(err)
		}
		want[tid] = row
	}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := e.visibleRows(e.rel, e.begin().Snapshot()); !maps.Equal(got, want) {
		t.Fatalf("bulk-loaded table shows %d rows, want %d", len(got), len(want))
	}
	if n := e.nblocks(); n > 11 {
		t.Errorf("500 rows of ~150 bytes took %d pages; they fit in 11", n)
	}
	f := e.replayAll()
	if got := e.visibleRows(f.rel, f.begin().Snapshot()); !maps.Equal(got, want) {
		t.Fatalf("replayed bulk load shows %d rows, want %d", len(got), len(want))
	}
	// Ordinary inserts afterwards find room through the FSM or extend.
	e.insertCommitted("after")
}

func TestScanForVacuumLeavesDeadTuplesAndReclaimBlockFreesThemInOneRecord(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("keep-1", "dead-1", "keep-2", "dead-2", "dead-3")
	e.deleteCommitted(tids[1], tids[3], tids[4])
	h := e.txns.OldestXmin()
	lsnOf := func() uint64 {
		b, err := e.rel.read(0, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Release()
		return uint64(b.LSN())
	}
	before := lsnOf()
	sr, err := e.rel.ScanForVacuum(0, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []page.OffsetNumber{tids[1].Off, tids[3].Off, tids[4].Off}
	if !slices.Equal(sr.DeadOffsets, want) || sr.DeadTuples != 3 || sr.TuplesRemaining != 2 || sr.AllVisible {
		t.Fatalf("scan result %+v: want dead offsets %v (3 tuples), 2 remaining, not all-visible", sr, want)
	}
	if got := lsnOf(); got != before {
		t.Fatalf("page LSN moved from %X to %X: the scan changed a page with dead tuples", before, got)
	}
	c, _ := e.rel.CountTuples(context.Background(), h, nil)
	if c.Dead != 3 || c.DeadLinePointers != 0 {
		t.Fatalf("after the scan: %+v, want the 3 dead tuples untouched", c)
	}

	// A live offset among the given ones is left alone.
	vr, err := e.rel.ReclaimBlock(0, append(sr.DeadOffsets, tids[0].Off), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	if vr.Freed != 3 || vr.TuplesRemoved != 3 || !vr.AllVisible {
		t.Fatalf("reclaim result %+v: want 3 freed, 3 tuples removed, all-visible", vr)
	}
	if set, _ := e.rel.VM().IsSet(0, nil); !set {
		t.Error("VM bit not set after reclaiming every dead slot")
	}
	c, _ = e.rel.CountTuples(context.Background(), e.txns.OldestXmin(), nil)
	if c.Live != 2 || c.Dead != 0 || c.DeadLinePointers != 0 {
		t.Fatalf("after reclaim: %+v, want 2 live and nothing dead", c)
	}
	if got := e.visibleRows(e.rel, e.begin().Snapshot()); len(got) != 2 || got[tids[0]] != "keep-1" || got[tids[2]] != "keep-2" {
		t.Errorf("visible rows after reclaim: %v", got)
	}
	// The page is now finished: a second scan has nothing to report.
	if sr, err := e.rel.ScanForVacuum(0, e.txns.OldestXmin(), nil); err != nil || len(sr.DeadOffsets) != 0 || !sr.AllVisible {
		t.Errorf("second scan %+v, %v: want no dead slots, all-visible", sr, err)
	}
}

func TestReclaimBlockKeepsTuplesThatAreNotDeadForTheHorizon(t *testing.T) {
	e := newTestEnv(t, 64)
	tids := e.insertCommitted("a", "b")
	holder := e.begin() // still sees b
	e.deleteCommitted(tids[1])
	h := e.txns.OldestXmin()
	vr, err := e.rel.ReclaimBlock(0, []page.OffsetNumber{tids[1].Off}, h, nil)
	if err != nil || vr.Freed != 0 || vr.TuplesRemoved != 0 || vr.AllVisible {
		t.Fatalf("reclaim of a recently dead tuple = %+v, %v; want nothing freed", vr, err)
	}
	if got := e.visibleRows(e.rel, holder.Snapshot()); got[tids[1]] != "b" {
		t.Errorf("the holder's snapshot lost row b: %v", got)
	}
}
