package engine

import (
	"os"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

func TestCheckpointRunsAutomaticallyAndRecyclesWAL(t *testing.T) {
	opts := testOpts()
	opts.WALSegmentSize = 64 << 10
	opts.CheckpointWALBytes = 128 << 10
	db, dir := newDB(t, opts)
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	first, err := wal.ReadControl(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for batch := int64(0); batch < 40; batch++ {
		tx := mustTx(t, db)
		for i := int64(0); i < 50; i++ {
			if _, err := tx.Insert("t", []any{batch*50 + i, "some bytes to fill the log", i}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpointer runs in the background; give it a moment.
	deadline := time.Now().Add(10 * time.Second)
	var ctl *wal.Control
	for {
		if ctl, err = wal.ReadControl(vfs.OS(), dir); err != nil {
			t.Fatal(err)
		}
		_, serr := os.Stat(wal.SegmentPath(dir, 0, opts.WALSegmentSize))
		if (ctl.RedoLSN >= wal.LSN(opts.WALSegmentSize) && os.IsNotExist(serr)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ctl.RedoLSN <= first.RedoLSN {
		t.Fatalf("no automatic checkpoint: redo LSN still %X after %X of WAL", uint64(ctl.RedoLSN), uint64(db.log.InsertLSN()-first.RedoLSN))
	}
	if ctl.State != wal.StateInProduction {
		t.Fatalf("control state %v while open", ctl.State)
	}
	// Segments wholly before the redo pointer are gone: the first one
	// (LSN 0) ends long before it.
	if ctl.RedoLSN < wal.LSN(opts.WALSegmentSize) {
		t.Fatalf("redo LSN %X still in the first segment", uint64(ctl.RedoLSN))
	}
	if _, err := os.Stat(wal.SegmentPath(dir, 0, opts.WALSegmentSize)); !os.IsNotExist(err) {
		t.Fatalf("first WAL segment not recycled: %v", err)
	}
}
