package heap

import (
	"bytes"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// recordWorkload runs inserts, same- and cross-page updates, deletes,
// aborts, pruning, vacuuming (both paths), all-visible marking and
// truncation.
func recordWorkload(t *testing.T, e *testEnv) {
	var tids []page.TID
	for i := 0; i < 400; i++ {
		tids = append(tids, e.insertCommitted(fmt.Sprintf("row-%04d-%s", i, strings.Repeat("d", i%150)))...)
	}
	ab := e.begin()
	for i := 0; i < 20; i++ {
		e.insert(ab, "aborted")
	}
	_ = e.txns.Abort(ab, nil)
	u := e.begin()
	for i := 0; i < len(tids); i += 7 {
		nt, err := e.rel.Update(u, tids[i], []byte(fmt.Sprintf("updated-%d-%s", i, strings.Repeat("u", 300))), nil)
		if err != nil {
			t.Fatal(err)
		}
		tids[i] = nt
	}
	e.commit(u)
	e.deleteCommitted(tids[3], tids[50], tids[51], tids[399])
	// Delete everything on the last blocks so truncation has work.
	n := e.nblocks()
	var tail []page.TID
	for i, tid := range tids {
		if tid.Block >= n-2 && i%7 != 0 {
			tail = append(tail, tid)
		}
	}
	e.deleteCommitted(tail...)
	h := e.txns.OldestXmin()
	for blk := uint32(0); blk < n; blk++ {
		if blk%3 == 1 { // lazy vacuum's path: scan, then free tuples and slots at once
			sr, err := e.rel.ScanForVacuum(blk, h, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.rel.ReclaimBlock(blk, sr.DeadOffsets, h, nil); err != nil {
				t.Fatal(err)
			}
			continue
		}
		pr, err := e.rel.PruneBlock(blk, h, nil)
		if err != nil {
			t.Fatal(err)
		}
		if blk%2 == 0 { // leave some LP_DEAD slots unvacuumed
			if _, err := e.rel.VacuumBlock(blk, pr.DeadOffsets, h, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	keep, err := e.rel.TrailingEmptyBlocks(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rel.Truncate(keep, nil); err != nil {
		t.Fatal(err)
	}
	// More changes after vacuum: reuse of freed slots, clearing VM bits.
	w := e.begin()
	for i := 0; i < 50; i++ {
		e.insert(w, fmt.Sprintf("late-%d", i))
	}
	if err := e.rel.Delete(w, tids[14], nil); err != nil {
		t.Fatal(err)
	}
	e.commit(w)
	running := e.begin() // never committed: invisible after replay too
	e.insert(running, "in-flight")
}

// pageSummary is a page's replayable content: header fields that are
// WAL-logged and every line pointer with its tuple (hint bits masked).
func pageSummary(t *testing.T, e *testEnv, blk uint32) string {
	b, err := e.rel.read(blk, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	b.RLock()
	defer b.RUnlock()
	p := b.Page()
	var sb strings.Builder
	fmt.Fprintf(&sb, "lsn=%X allvisible=%v prunexid=%d items=%d\n", p.LSN(), p.Flags()&page.FlagAllVisible != 0, p.PruneXID(), p.NumItems())
	for i := 1; i <= p.NumItems(); i++ {
		id := p.Item(page.OffsetNumber(i))
		fmt.Fprintf(&sb, "%d %v", i, id.State)
		if id.State == page.LPNormal {
			h, data, err := DecodeTuple(p.ItemData(page.OffsetNumber(i)))
			if err != nil {
				t.Fatalf("block %d item %d: %v", blk, i, err)
			}
			fmt.Fprintf(&sb, " at=%d xmin=%d xmax=%d ctid=%v mask=%#x %q", id.Off, h.Xmin, h.Xmax, h.Ctid, h.Infomask&^hintBits, data)
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func TestRedoOfAllWALReproducesPagesAndVisibleContent(t *testing.T) {
	e := newTestEnv(t, 64)
	recordWorkload(t, e)
	f := e.replayAll()
	if f.replayedWithoutImage < 500 {
		t.Fatalf("only %d heap records were replayed without a full-page image", f.replayedWithoutImage)
	}

	n, m := e.nblocks(), f.nblocks()
	if n != m {
		t.Fatalf("replayed relation has %d blocks, original %d", m, n)
	}
	for blk := uint32(0); blk < n; blk++ {
		if a, b := pageSummary(t, e, blk), pageSummary(t, f, blk); a != b {
			t.Fatalf("block %d differs after replay:\noriginal:\n%s\nreplayed:\n%s", blk, a, b)
		}
	}
	for _, fork := range []storage.ForkNum{storage.VMFork} {
		a, _ := e.rel.VM().Count(storage.BlockNumber(n), nil)
		b, _ := f.rel.VM().Count(storage.BlockNumber(n), nil)
		if a != b {
			t.Errorf("fork %d: %d all-visible pages originally, %d after replay", fork, a, b)
		}
	}
	orig := e.visibleRows(e.rel, e.begin().Snapshot())
	replayed := e.visibleRows(f.rel, f.begin().Snapshot())
	if len(orig) < 300 || !maps.Equal(orig, replayed) {
		t.Fatalf("visible rows: %d originally, %d after replay (equal=%v)", len(orig), len(replayed), maps.Equal(orig, replayed))
	}
	for tid, row := range orig {
		if bytes.Contains([]byte(row), []byte("in-flight")) || row == "aborted" {
			t.Fatalf("row %v %q should be invisible", tid, row)
		}
	}
}

func TestRedoIsIdempotent(t *testing.T) {
	e := newTestEnv(t, 64)
	e.insertCommitted("a", "b", "c")
	tids := e.insertCommitted("d")
	e.deleteCommitted(tids[0])
	f := e.replayAll()
	before := pageSummary(t, f, 0)
	// Replay the same log again over the already replayed pages.
	g := e.replayInto(f)
	if after := pageSummary(t, g, 0); after != before {
		t.Fatalf("second replay changed the page:\n%s\nvs\n%s", before, after)
	}
}
