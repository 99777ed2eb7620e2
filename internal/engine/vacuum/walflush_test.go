package vacuum

import (
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// TestTheBackgroundFlushMakesTheVacuumsWALDurableWithoutBeingAsked: once
// lazyWALFlushAfter of WAL is unflushed, the lazy vacuum's background flush
// makes it durable although nobody calls Flush (so a ring eviction finds
// its LSN flushed instead of waiting for an fdatasync); less than that is
// left to the next flush; and stopping it ends its goroutine.
func TestTheBackgroundFlushMakesTheVacuumsWALDurableWithoutBeingAsked(t *testing.T) {
	log, err := wal.Open(vfs.OS(), t.TempDir(), 0, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := log.Close(); err != nil {
			t.Error(err)
		}
	}()
	f := startWALFlusher(log, nil, func() {})
	rec := &wal.Record{Rmgr: wal.RmgrHeap, Main: make([]byte, 8<<10)}
	insert := func() wal.LSN {
		t.Helper()
		end, err := log.Insert(rec, nil)
		if err != nil {
			t.Fatal(err)
		}
		return end
	}
	end := insert()
	for end-log.FlushedLSN() < lazyWALFlushAfter {
		end = insert()
	}
	deadline := time.Now().Add(10 * time.Second)
	for log.FlushedLSN() < end {
		if time.Now().After(deadline) {
			t.Fatalf("WAL flushed to %X after 10s, inserted to %X: the background flush did not flush it",
				uint64(log.FlushedLSN()), uint64(end))
		}
		time.Sleep(time.Millisecond)
	}
	// Just under lazyWALFlushAfter (four times VACUUM FULL's piece) is
	// left for the next flush.
	flushed := log.FlushedLSN()
	small := insert()
	for one := small - flushed; small-flushed+one < lazyWALFlushAfter; {
		small = insert()
	}
	time.Sleep(50 * walFlushInterval)
	if log.FlushedLSN() >= small {
		t.Fatalf("%d bytes of WAL were flushed on their own: want them left for the next flush (at %d)",
			uint64(small-flushed), lazyWALFlushAfter)
	}
	f.stopAndWait()
	for end-log.FlushedLSN() < lazyWALFlushAfter {
		end = insert()
	}
	time.Sleep(50 * walFlushInterval)
	if log.FlushedLSN() >= end {
		t.Fatal("the background flush still flushed after it was stopped")
	}
}
