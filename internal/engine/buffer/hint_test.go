package buffer

import (
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// hint sets a "hint bit" on the page under a share lock.
func hint(t *testing.T, p *Pool, tag Tag, s *Strategy) {
	t.Helper()
	b, err := p.Read(tag, s)
	if err != nil {
		t.Fatal(err)
	}
	b.RLock()
	b.MarkDirtyHint(s)
	b.RUnlock()
	b.Release()
}

func TestMarkDirtyHintLogsAFullPageImageOncePerCheckpoint(t *testing.T) {
	p, st, log := newTestPool(t, 16)
	var u usage.Counters
	s := &Strategy{Usage: &u}
	tag := blk(1, 0)

	hint(t, p, tag, s) // page LSN 0 <= redo pointer: needs an image
	if n := log.recordCount(); n != 1 {
		t.Fatalf("first hint after the checkpoint inserted %d records, want 1", n)
	}
	rec := log.records[0]
	if rec.Rmgr != wal.RmgrXLOG || rec.Info != XLOGFPIForHint || len(rec.Blocks) != 1 ||
		rec.Blocks[0].Block != tag.Block || rec.Blocks[0].Image == nil {
		t.Fatalf("hint record = %+v, want one RmgrXLOG FPI-for-hint image of block 0", rec)
	}
	if snap := u.Read(); snap.Dirtied != 1 || snap.WALFPIs != 1 {
		t.Fatalf("counters %+v, want 1 dirtied and 1 FPI", snap)
	}

	hint(t, p, tag, s) // already dirty: nothing to log
	if err := p.FlushAll(); err != nil {
		t.Fatal(err)
	}
	st.checkWALRule(t)
	if got := page.Page(st.pages[tag]).LSN(); got != 1100 {
		t.Fatalf("page written with LSN %d, want 1100 (the image record's end)", got)
	}
	hint(t, p, tag, s) // clean again, but imaged since the redo pointer
	if n := log.recordCount(); n != 1 {
		t.Fatalf("%d records, want still 1: the page was imaged after the redo pointer", n)
	}

	log.checkpoint()
	if err := p.FlushAll(); err != nil {
		t.Fatal(err)
	}
	hint(t, p, tag, s) // new checkpoint: imaged again
	if n := log.recordCount(); n != 2 {
		t.Fatalf("%d records after a checkpoint and a new hint, want 2", n)
	}
	if u.Read().Dirtied != 3 {
		t.Fatalf("Dirtied = %d, want 3 (three clean-to-dirty transitions)", u.Read().Dirtied)
	}
}

func TestMarkDirtyHintSkipsTheImageForAPageLoggedAfterTheRedoPointer(t *testing.T) {
	p, _, log := newTestPool(t, 16)
	b, err := p.Read(blk(1, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	modify(t, b, log, nil) // page LSN now past the redo pointer
	if err := p.FlushAll(); err != nil {
		t.Fatal(err)
	}
	before := log.recordCount()
	b.RLock()
	b.MarkDirtyHint(nil)
	b.RUnlock()
	b.Release()
	if n := log.recordCount(); n != before {
		t.Fatalf("hint on a page logged after the redo pointer inserted %d records", n-before)
	}
}
