package engine

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

// The storage-fault tests run the engine on faultfs, inject one kind of
// failure, and check three things: the failing call returns an error that
// says what failed (the errno is reachable with errors.Is, the message
// names the file); nothing is acknowledged that is not durable; and after
// a power loss right after the fault (only fsynced data survives) the
// directory opens with every committed row and a clean Check.

// faultEnv is a data directory with the work table (and its index) open on
// a faultfs, and the rows committed so far.
type faultEnv struct {
	t         *testing.T
	dir       string
	opts      Options
	ffs       *faultfs.FS
	db        *DB
	committed map[int64]rowVal
	next      int64
}

func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	return newFaultEnvWith(t, nil)
}

// newFaultEnvWith is newFaultEnv with the engine options changed by tweak
// (nil for none) before Init.
func newFaultEnvWith(t *testing.T, tweak func(*Options)) *faultEnv {
	t.Helper()
	e := &faultEnv{t: t, dir: filepath.Join(t.TempDir(), "data"), opts: testOpts(), committed: map[int64]rowVal{}}
	e.opts.CheckpointWALBytes = -1 // checkpoints only when the test asks
	if tweak != nil {
		tweak(&e.opts)
	}
	if err := Init(e.dir, e.opts); err != nil {
		t.Fatal(err)
	}
	e.ffs = faultfs.New(vfs.NewOS(t.Logf))
	o := e.opts
	o.FS = e.ffs
	db, err := Open(e.dir, o)
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	t.Cleanup(func() { abandonAfterPowerLoss(e.db) })
	if err := db.CreateTable(workTable, workCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex(workTable+"_id", workTable, "id"); err != nil {
		t.Fatal(err)
	}
	return e
}

// insert inserts n rows in one transaction and commits. On success the
// rows are committed; on failure it returns the error and the ops of the
// failed transaction (which must then be all visible or none).
func (e *faultEnv) insert(n int) ([]workOp, error) {
	tx, err := e.db.Begin()
	if err != nil {
		return nil, err
	}
	defer endTx(tx)
	var ops []workOp
	for range n {
		op := workOp{Kind: 'I', ID: e.next, N: e.next * 7, Val: fmt.Sprintf("row-%d-%s", e.next, strings.Repeat("f", 150))}
		e.next++
		if _, err := tx.Insert(workTable, []any{op.ID, op.Val, op.N}); err != nil {
			return ops, err
		}
		ops = append(ops, op)
	}
	if err := tx.Commit(); err != nil {
		return ops, err
	}
	applyOps(e.committed, ops)
	return nil, nil
}

// mustInsert inserts n committed rows.
func (e *faultEnv) mustInsert(n int) {
	e.t.Helper()
	if _, err := e.insert(n); err != nil {
		e.t.Fatalf("insert before the fault: %v", err)
	}
}

// powerLossAndReopen cuts the power (everything not fsynced is lost),
// reopens the directory on the real file system and verifies it: every
// committed row, the in-flight ones all or none, the index, Check.
func (e *faultEnv) powerLossAndReopen(inflight []workOp) *DB {
	e.t.Helper()
	if err := e.ffs.PowerLoss(faultfs.PowerLossOptions{TearProb: 0.5, Seed: 1}); err != nil {
		e.t.Fatal(err)
	}
	abandonAfterPowerLoss(e.db)
	db, err := Open(e.dir, e.opts)
	if err != nil {
		e.t.Fatalf("reopen after the fault and a power loss: %v", err)
	}
	e.db = db
	if verifyAgainstLedger(e.t, db, e.committed, inflight) {
		applyOps(e.committed, inflight)
	}
	verifyIndexes(e.t, db, e.committed)
	checkClean(e.t, db)
	if _, err := e.insert(5); err != nil {
		e.t.Fatalf("insert after recovery: %v", err)
	}
	return db
}

// wantErr fails unless err wraps errno and its message names a file under
// the data directory containing pathPart.
func wantErr(t *testing.T, what string, err error, target error, pathPart string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s = %v, want an error wrapping %v", what, err, target)
	}
	if !strings.Contains(err.Error(), pathPart) {
		t.Fatalf("%s = %q, want the message to name the file (%q)", what, err, pathPart)
	}
}

func TestENOSPCExtendingATableFailsTheInsertAndTheDirectoryRecovers(t *testing.T) {
	e := newFaultEnv(t)
	e.mustInsert(50)
	if err := e.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	heap := e.db.st.Path(mustTable(t, e.db).Relfilenode, 0)
	rule := e.ffs.Inject(faultfs.Rule{Ops: faultfs.OpExtend, Path: filepath.Base(heap), Fault: faultfs.ENOSPC})
	// Rows of ~200 bytes: a few hundred need new heap pages.
	ops, err := e.insert(400)
	if rule.Fired() == 0 {
		t.Fatalf("the table was never extended (insert: %v)", err)
	}
	wantErr(t, "insert into a full volume", err, syscall.ENOSPC, filepath.Base(heap))
	e.ffs.RemoveRule(rule)
	// The space came back: the same DB goes on working.
	e.mustInsert(10)
	db := e.powerLossAndReopen(ops)
	if got, _ := visibleState(db); len(got) != len(e.committed) {
		t.Fatalf("%d rows visible, want %d", len(got), len(e.committed))
	}
}

func TestENOSPCWritingWALFailsTheCommitAndNothingIsAcknowledged(t *testing.T) {
	e := newFaultEnv(t)
	e.mustInsert(20)
	rule := e.ffs.Inject(faultfs.Rule{Ops: faultfs.OpWrite | faultfs.OpExtend, Path: "wal", Fault: faultfs.ENOSPC})
	ops, err := e.insert(30)
	if rule.Fired() == 0 {
		t.Fatalf("no WAL write was attempted (insert: %v)", err)
	}
	wantErr(t, "commit with a full WAL volume", err, syscall.ENOSPC, "wal")
	e.ffs.RemoveRule(rule)
	// A failed WAL write is sticky: no later commit may be acknowledged,
	// since the log has a hole the engine cannot fill.
	if _, err := e.insert(1); err == nil {
		t.Fatal("commit after a failed WAL write succeeded: the log has a hole")
	}
	e.powerLossAndReopen(ops)
}

func TestEIOReadingAPageIsAnErrorNamingTheFileAndIsNotCached(t *testing.T) {
	e := newFaultEnv(t)
	e.mustInsert(300)
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	o := e.opts
	o.FS = e.ffs
	db, err := Open(e.dir, o) // a cold pool: every page comes from the file
	if err != nil {
		t.Fatal(err)
	}
	e.db = db
	heap := filepath.Base(db.st.Path(mustTable(t, db).Relfilenode, 0))
	rule := e.ffs.Inject(faultfs.Rule{Ops: faultfs.OpRead, Path: heap, After: 1, Times: 1, Fault: faultfs.EIO})
	_, err = visibleState(db)
	wantErr(t, "scan over an unreadable block", err, syscall.EIO, heap)
	if !strings.Contains(err.Error(), "block") {
		t.Fatalf("scan error %q does not name the block", err)
	}
	if rule.Fired() != 1 {
		t.Fatalf("rule fired %d times", rule.Fired())
	}
	// The device recovers: the failed read was not cached, the data is intact.
	got, err := visibleState(db)
	if err != nil {
		t.Fatalf("scan after the read error: %v", err)
	}
	if diff := stateDiff(got, e.committed); diff != "" {
		t.Fatalf("rows after a transient read error: %s", diff)
	}
	checkClean(t, db)
}

func TestFailedFsyncOfATableFileStopsWritesUntilReopened(t *testing.T) {
	e := newFaultEnv(t)
	e.mustInsert(100)
	if err := e.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	e.mustInsert(100) // dirty pages the next checkpoint writes and fsyncs
	rule := e.ffs.Inject(faultfs.Rule{Ops: faultfs.OpSync, Path: "base", Times: 1, Fault: faultfs.EIO})
	err := e.db.Checkpoint()
	if rule.Fired() != 1 {
		t.Fatalf("checkpoint did not fsync a table file (err %v)", err)
	}
	wantErr(t, "checkpoint with a failing fsync", err, syscall.EIO, "base")
	// The device "recovers" but the data written before the failed fsync
	// may be gone: the engine must not carry on as if it were safe. Writes
	// are refused; a second checkpoint must not succeed and move the redo
	// pointer past WAL that still covers the lost pages.
	ops, err := e.insert(1)
	if err == nil {
		t.Fatal("a commit after a failed fsync was acknowledged; want writes refused until the directory is reopened")
	}
	if !errors.Is(err, ErrNeedsRecovery) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("write after a failed fsync = %v, want ErrNeedsRecovery wrapping the EIO", err)
	}
	if err := e.db.Checkpoint(); err == nil {
		t.Fatal("a checkpoint after a failed fsync succeeded: it would discard WAL that covers lost pages")
	}
	// Reads keep working (and a read-only transaction still commits).
	if got, err := visibleState(e.db); err != nil || stateDiff(got, e.committed) != "" {
		t.Fatalf("read after a failed fsync: err %v, diff %s", err, stateDiff(got, e.committed))
	}
	if tx, err := e.db.Begin(); err != nil || tx.Commit() != nil {
		t.Fatalf("read-only commit after a failed fsync: %v", err)
	}
	e.powerLossAndReopen(ops)
}

func TestFailedWALFsyncFailsTheCommitAndTheRowsAreAllOrNothing(t *testing.T) {
	e := newFaultEnv(t)
	e.mustInsert(20)
	rule := e.ffs.Inject(faultfs.Rule{Ops: faultfs.OpSync, Path: "wal", Times: 1, Fault: faultfs.EIO})
	ops, err := e.insert(10)
	if rule.Fired() != 1 {
		t.Fatalf("commit did not fsync the WAL (err %v)", err)
	}
	wantErr(t, "commit with a failing WAL fsync", err, syscall.EIO, "wal")
	if _, err := e.insert(1); err == nil {
		t.Fatal("commit after a failed WAL fsync succeeded; the failure must be sticky")
	}
	e.powerLossAndReopen(ops)
}

func TestShortWriteOfWALFailsTheCommitAndReplayEndsBeforeIt(t *testing.T) {
	e := newFaultEnv(t)
	e.mustInsert(20)
	rule := e.ffs.Inject(faultfs.Rule{Ops: faultfs.OpWrite, Path: "wal", Times: 1, Fault: faultfs.ShortWrite})
	ops, err := e.insert(10)
	if rule.Fired() != 1 {
		t.Fatalf("no WAL write (err %v)", err)
	}
	if !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("commit after a short WAL write = %v, want io.ErrShortWrite", err)
	}
	e.powerLossAndReopen(ops)
}

func TestShortWriteOfATablePageFailsTheCheckpointAndTheDirectoryRecovers(t *testing.T) {
	e := newFaultEnv(t)
	e.mustInsert(100)
	if err := e.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	e.mustInsert(100)
	rule := e.ffs.Inject(faultfs.Rule{Ops: faultfs.OpWrite, Path: "base", Times: 1, Fault: faultfs.ShortWrite})
	err := e.db.Checkpoint()
	if rule.Fired() != 1 {
		t.Fatalf("checkpoint wrote no table page (err %v)", err)
	}
	if !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("checkpoint after a short page write = %v, want io.ErrShortWrite", err)
	}
	// The half-written page is repaired from the WAL (its full-page image).
	e.powerLossAndReopen(nil)
}

func mustTable(t *testing.T, db *DB) TableInfo {
	t.Helper()
	ti, err := db.Table(workTable)
	if err != nil {
		t.Fatal(err)
	}
	return ti
}
