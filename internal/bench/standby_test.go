package bench

import (
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// A standby that has not read the WAL yet must still find it after
// checkpoints, which recycle WAL before the redo pointer: the standby's
// retention point keeps it.
func TestStandbyReadsWALThatCheckpointsWouldHaveRecycled(t *testing.T) {
	dir := t.TempDir()
	opts := engine.Options{BufferPoolBytes: 1 << 20, WALSegmentSize: 64 << 10, CheckpointWALBytes: -1}
	if err := engine.Init(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.CreateTable("t", benchCols); err != nil {
		t.Fatal(err)
	}
	sb := StartStandby(opts.FS, db.Dir(), db.WAL(), wal.Options{SegmentSize: opts.WALSegmentSize}, 0) // paused
	start := sb.Consumed()
	for batch := range 4 {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 500 {
			id := int64(batch*500 + i)
			if _, err := tx.Insert("t", []any{id, id, payloadOf(id, 200)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	written := db.WAL().InsertLSN() - start
	if written < 4*64<<10 {
		t.Fatalf("only %d bytes of WAL: the test needs several segments", written)
	}
	if sb.Consumed() != start || sb.Lag() < int64(written) {
		t.Fatalf("paused standby consumed %d, lag %d", sb.Consumed()-start, sb.Lag())
	}
	sb.SetRate(1 << 30)
	deadline := time.Now().Add(20 * time.Second)
	for sb.Lag() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := sb.Stop(); err != nil {
		t.Fatalf("standby: %v", err)
	}
	if lag := sb.Lag(); lag != 0 {
		t.Fatalf("standby stuck at lag %d of %d bytes (WAL it had not read was recycled?)", lag, written)
	}
	if sb.records.Load() < 2000 {
		t.Errorf("standby read %d records for 2000 inserts", sb.records.Load())
	}
}
