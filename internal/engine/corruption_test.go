package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal/waltest"
)

// flipBit flips one bit of the file at off.
func flipBit(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x04
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// fillTable creates table t with n rows and returns the TIDs by id.
func fillTable(t *testing.T, db *DB, n int) map[int64]page.TID {
	t.Helper()
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	tids := map[int64]page.TID{}
	for i := int64(0); i < int64(n); i++ {
		tid, err := tx.Insert("t", []any{i, strings.Repeat("o", 100), i})
		if err != nil {
			t.Fatal(err)
		}
		tids[i] = tid
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return tids
}

func TestBitFlipInHeapPageIsReportedWithFileAndBlock(t *testing.T) {
	opts := testOpts()
	db, dir := newDB(t, opts)
	tids := fillTable(t, db, 300)
	ti, _ := db.Table("t")
	path := filepath.Join(dir, "base", fmt.Sprint(ti.Relfilenode))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	flipBit(t, path, 1*page.Size+5000) // inside block 1's tuple area

	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	var victim page.TID
	for _, tid := range tids {
		if tid.Block == 1 {
			victim = tid
			break
		}
	}
	tx := mustTx(t, db)
	defer endTx(tx)
	_, _, err = tx.Get("t", victim)
	var cpe *storage.CorruptPageError
	if !errors.As(err, &cpe) || cpe.File != path || cpe.Block != 1 {
		t.Fatalf("read of the damaged block: %v, want a CorruptPageError naming %s block 1", err, path)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "block 1") {
		t.Fatalf("error %q does not name file and block", err)
	}
	rep, err := db.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		if p.File == path && p.Block == 1 {
			found = true
		}
	}
	if !found {
		t.Fatalf("Check did not list %s block 1: %v", path, rep.Problems)
	}
}

// abandonedAfterCommits makes a directory with table t, checkpoints, commits
// n transactions of 10 rows each (ids 0 to 10n-1) and abandons it without a
// shutdown checkpoint, so Open must replay them. It returns the directory
// and the redo point of the checkpoint before the commits.
func abandonedAfterCommits(t *testing.T, opts Options, n int64) (string, wal.LSN) {
	t.Helper()
	db, dir := newDB(t, opts)
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	redoLSN := wal.LSN(db.lastRedo.Load())
	for batch := range n {
		tx := mustTx(t, db)
		for i := range int64(10) {
			if _, err := tx.Insert("t", []any{batch*10 + i, "x", i}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	abandon(t, db)
	return dir, redoLSN
}

// TestBitFlipInTheMiddleOfTheWALIsCorruptionAndNothingIsDestroyed damages
// the first record of the 6th of 10 committed transactions: the valid
// records after it make it damage in the middle of the log, so Open
// refuses with ErrCorrupt naming both LSNs, and leaves the WAL as it was
// (replaying up to the damage would drop the last 5 commits, and Open
// would then have zeroed the log after it).
func TestBitFlipInTheMiddleOfTheWALIsCorruptionAndNothingIsDestroyed(t *testing.T) {
	opts := testOpts()
	dir, redoLSN := abandonedAfterCommits(t, opts, 10)

	// Find the first record of the 6th transaction and damage it.
	rd, err := wal.NewReader(vfs.OS(), dir, redoLSN, wal.Options{SegmentSize: opts.WALSegmentSize})
	if err != nil {
		t.Fatal(err)
	}
	commits := 0
	var target *wal.Record
	for target == nil {
		rec, err := rd.Next()
		if err != nil {
			t.Fatalf("reading WAL before damaging it: %v", err)
		}
		if rec.Rmgr == wal.RmgrXact {
			commits++
		} else if commits == 5 && rec.Rmgr == wal.RmgrHeap {
			target = rec
		}
	}
	_ = rd.Close()
	seg := int64(target.StartLSN) / opts.WALSegmentSize * opts.WALSegmentSize
	segFile := wal.SegmentPath(dir, wal.LSN(seg), opts.WALSegmentSize)
	flipBit(t, segFile, int64(target.StartLSN)-seg+20)
	before, err := os.ReadFile(segFile)
	if err != nil {
		t.Fatal(err)
	}

	_, err = Open(dir, opts)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "middle of the log") ||
		!strings.Contains(err.Error(), fmt.Sprintf("%X", uint64(target.StartLSN))) {
		t.Fatalf("Open with a damaged record at LSN %X followed by valid ones = %v, want ErrCorrupt naming it", uint64(target.StartLSN), err)
	}
	if after, err := os.ReadFile(segFile); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the refused Open changed the WAL segment (%v)", err)
	}
}

// TestBitFlipInTheLastWALRecordEndsReplayThereAndKeepsTheTail damages the
// last record (a torn end looks the same): replay ends there, the rows of
// the transactions before it are all there, and the discarded tail is
// kept in the quarantine.
func TestBitFlipInTheLastWALRecordEndsReplayThereAndKeepsTheTail(t *testing.T) {
	opts := testOpts()
	dir, redoLSN := abandonedAfterCommits(t, opts, 5)
	last := waltest.LastRecord(t, dir, redoLSN, wal.Options{SegmentSize: opts.WALSegmentSize})
	if last.Rmgr != wal.RmgrXact {
		t.Fatalf("the last WAL record is %+v, want the last commit", last)
	}
	seg := int64(last.StartLSN) / opts.WALSegmentSize * opts.WALSegmentSize
	flipBit(t, wal.SegmentPath(dir, wal.LSN(seg), opts.WALSegmentSize), int64(last.StartLSN)-seg+20)

	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	ri := db.RecoveryInfo()
	if ri.TornTail == nil || ri.TornTail.LSN != last.StartLSN || ri.EndLSN != last.StartLSN {
		t.Fatalf("recovery %+v: want replay to end at the damaged last record at LSN %X", ri, uint64(last.StartLSN))
	}
	if rows := scanAll(t, db, "t"); len(rows) != 40 {
		t.Fatalf("%d rows after replay up to the damage, want the 40 of the 4 transactions before it", len(rows))
	}
	if qi, err := db.Quarantine(); err != nil || qi.Files == 0 {
		t.Fatalf("the discarded WAL tail is not in the quarantine: %+v, %v", qi, err)
	}
	checkClean(t, db)
}
