package txn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// countingLog is a tiny fake WAL that isolates the manager: it counts
// inserts and flushes and runs a hook inside Flush, so a test can observe
// the transaction's state while its commit record is being made durable.
type countingLog struct {
	mu       sync.Mutex
	lsn      wal.LSN
	flushed  wal.LSN
	inserts  []*wal.Record
	flushes  int
	onFlush  func(upTo wal.LSN)
	flushErr error
}

func (l *countingLog) Insert(rec *wal.Record, _ *usage.Counters) (wal.LSN, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lsn += 100
	l.inserts = append(l.inserts, rec)
	return l.lsn, nil
}

func (l *countingLog) Flush(upTo wal.LSN, _ *usage.Counters) error {
	if l.onFlush != nil {
		l.onFlush(upTo)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flushErr != nil {
		return l.flushErr
	}
	l.flushes++
	l.flushed = max(l.flushed, upTo)
	return nil
}

func newTestManager(t testing.TB, dir string, next XID) (*Manager, *countingLog) {
	t.Helper()
	log := &countingLog{}
	m, err := newManagerWithLog(testFS(), dir, log, next)
	if err != nil {
		t.Fatalf("NewManager: %v", err)
	}
	return m, log
}

func TestCommitReturnsOnlyAfterCommitRecordIsFlushed(t *testing.T) {
	m, log := newTestManager(t, t.TempDir(), 0)
	tx := m.Begin()
	tx.MarkWritten()
	var statusDuringFlush Status
	var visibleDuringFlush bool
	log.onFlush = func(wal.LSN) {
		statusDuringFlush = m.Status(tx.XID())
		other := m.Begin()
		visibleDuringFlush = other.Snapshot().XidVisible(m, tx.XID())
		_ = m.Abort(other, nil)
	}
	if err := m.Commit(tx, nil); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if statusDuringFlush != InProgress || visibleDuringFlush {
		t.Errorf("during flush: status %v visible %v, want in progress and invisible", statusDuringFlush, visibleDuringFlush)
	}
	if len(log.inserts) != 1 || log.inserts[0].Rmgr != wal.RmgrXact || log.inserts[0].Info != InfoCommit || XID(log.inserts[0].XID) != tx.XID() {
		t.Fatalf("inserted records %+v, want one commit record of xid %d", log.inserts, tx.XID())
	}
	if log.flushes != 1 || log.flushed < log.lsn {
		t.Errorf("flushes %d up to %d, want 1 up to the commit record's LSN %d", log.flushes, log.flushed, log.lsn)
	}
	if st := m.Status(tx.XID()); st != Committed {
		t.Errorf("status after commit = %v, want committed", st)
	}
}

func TestReadOnlyCommitWritesNoWAL(t *testing.T) {
	m, log := newTestManager(t, t.TempDir(), 0)
	tx := m.Begin()
	if err := m.Commit(tx, nil); err != nil {
		t.Fatal(err)
	}
	if len(log.inserts) != 0 || log.flushes != 0 {
		t.Errorf("read-only commit: %d inserts %d flushes, want none", len(log.inserts), log.flushes)
	}
	if err := m.Commit(tx, nil); !errors.Is(err, ErrTxnFinished) {
		t.Errorf("second commit: %v, want ErrTxnFinished", err)
	}
}

func TestFailedCommitFlushLeavesTransactionInvisible(t *testing.T) {
	m, log := newTestManager(t, t.TempDir(), 0)
	log.flushErr = errors.New("fsync: input/output error")
	tx := m.Begin()
	tx.MarkWritten()
	if err := m.Commit(tx, nil); err == nil {
		t.Fatal("Commit succeeded with a failing flush")
	}
	if st := m.Status(tx.XID()); st != Aborted {
		t.Errorf("status = %v, want aborted in this process", st)
	}
}

func TestAbortWritesUnflushedAbortRecord(t *testing.T) {
	m, log := newTestManager(t, t.TempDir(), 0)
	tx := m.Begin()
	tx.MarkWritten()
	if err := m.Abort(tx, nil); err != nil {
		t.Fatal(err)
	}
	if len(log.inserts) != 1 || log.inserts[0].Info != InfoAbort || log.flushes != 0 {
		t.Errorf("abort: records %d (info %v) flushes %d, want one abort record, no flush", len(log.inserts), log.inserts, log.flushes)
	}
	if st := m.Status(tx.XID()); st != Aborted {
		t.Errorf("status = %v, want aborted", st)
	}
}

func TestOldestXminIsMinimumSnapshotXminOfActiveTransactions(t *testing.T) {
	m, _ := newTestManager(t, t.TempDir(), 0)
	if h := m.OldestXmin(); h != FirstNormalXID {
		t.Fatalf("horizon with nothing active = %d, want %d", h, FirstNormalXID)
	}
	a := m.Begin() // 3
	b := m.Begin() // 4, snapshot xmin 3
	c := m.Begin() // 5, snapshot xmin 3
	if h := m.OldestXmin(); h != a.XID() {
		t.Fatalf("horizon = %d, want %d", h, a.XID())
	}
	if err := m.Commit(a, nil); err != nil {
		t.Fatal(err)
	}
	// b's and c's snapshots still treat a as running.
	if h := m.OldestXmin(); h != a.XID() {
		t.Fatalf("horizon after a commits = %d, want %d (held by b's and c's snapshots)", h, a.XID())
	}
	_ = m.Commit(b, nil)
	_ = m.Commit(c, nil)
	if h := m.OldestXmin(); h != m.NextXID() {
		t.Fatalf("horizon with nothing active = %d, want NextXID %d", h, m.NextXID())
	}
}

func TestCheckpointBarrierHoldsCommitsBeforeTheirRecord(t *testing.T) {
	m, log := newTestManager(t, t.TempDir(), 0)
	tx := m.Begin()
	tx.MarkWritten()
	unlock := m.CheckpointBarrier()
	done := make(chan error)
	go func() { done <- m.Commit(tx, nil) }()
	time.Sleep(20 * time.Millisecond)
	log.mu.Lock()
	n := len(log.inserts)
	log.mu.Unlock()
	if n != 0 {
		t.Errorf("commit inserted its record while the barrier was held")
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.Status(tx.XID()) != Committed {
		t.Error("transaction not committed after the barrier was released")
	}
}

func TestRedoSetsStatusAndAdvancesNextXID(t *testing.T) {
	m, _ := newTestManager(t, t.TempDir(), 0)
	for _, rec := range []*wal.Record{
		{Rmgr: wal.RmgrXact, Info: InfoCommit, XID: 10},
		{Rmgr: wal.RmgrXact, Info: InfoAbort, XID: 11},
	} {
		if err := m.Redo(rec); err != nil {
			t.Fatal(err)
		}
	}
	m.AdvanceNextXID(14)
	if m.Status(10) != Committed || m.Status(11) != Aborted || m.Status(12) != Aborted {
		t.Errorf("statuses 10,11,12 = %v,%v,%v; want committed, aborted, aborted (never committed)", m.Status(10), m.Status(11), m.Status(12))
	}
	if m.NextXID() != 14 {
		t.Errorf("NextXID = %d, want 14", m.NextXID())
	}
	if tx := m.Begin(); tx.XID() != 14 {
		t.Errorf("first xid after recovery = %d, want 14", tx.XID())
	}
	if err := m.Redo(&wal.Record{Rmgr: wal.RmgrXact, Info: 99, XID: 20}); err == nil {
		t.Error("redo of an unknown record kind succeeded")
	}
}

func TestClogSurvivesRewriteAndReopen(t *testing.T) {
	dir := t.TempDir()
	m, _ := newTestManager(t, dir, 0)
	var committed, aborted []XID
	var running *Txn
	for i := 0; i < 50; i++ {
		tx := m.Begin()
		tx.MarkWritten()
		if i%3 == 0 {
			_ = m.Abort(tx, nil)
			aborted = append(aborted, tx.XID())
		} else {
			_ = m.Commit(tx, nil)
			committed = append(committed, tx.XID())
		}
	}
	running = m.Begin()
	if err := m.WriteClog(); err != nil {
		t.Fatal(err)
	}
	next := m.NextXID()
	m2, _ := newTestManager(t, dir, next)
	for _, x := range committed {
		if st := m2.Status(x); st != Committed {
			t.Fatalf("xid %d after reopen: %v, want committed", x, st)
		}
	}
	for _, x := range aborted {
		if st := m2.Status(x); st != Aborted {
			t.Fatalf("xid %d after reopen: %v, want aborted", x, st)
		}
	}
	if st := m2.Status(running.XID()); st != Aborted {
		t.Errorf("transaction running at the crash: %v, want aborted", st)
	}
	if m2.NextXID() != next {
		t.Errorf("NextXID after reopen = %d, want %d", m2.NextXID(), next)
	}
	if _, err := os.Stat(filepath.Join(dir, clogTempName)); !os.IsNotExist(err) {
		t.Errorf("temporary clog left behind: %v", err)
	}
}

func TestCorruptClogIsDetected(t *testing.T) {
	dir := t.TempDir()
	m, _ := newTestManager(t, dir, 0)
	for i := 0; i < 10; i++ {
		tx := m.Begin()
		_ = m.Commit(tx, nil)
	}
	if err := m.WriteClog(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, clogFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0x01 // flip one status bit
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = newManagerWithLog(testFS(), dir, &countingLog{}, m.NextXID())
	var ce *CorruptClogError
	if !errors.As(err, &ce) || ce.File != path {
		t.Fatalf("open with a damaged clog: %v, want *CorruptClogError naming %s", err, path)
	}
}

func TestMissingClogIsAnErrorOnceTransactionsRan(t *testing.T) {
	if _, err := newManagerWithLog(testFS(), t.TempDir(), &countingLog{}, 0); err != nil {
		t.Fatalf("fresh directory: %v", err)
	}
	_, err := newManagerWithLog(testFS(), t.TempDir(), &countingLog{}, 100)
	if !errors.Is(err, ErrClogMissing) {
		t.Fatalf("missing clog with nextXID 100: %v, want ErrClogMissing", err)
	}
}

func TestConcurrentTransactionsKeepConsistentStatuses(t *testing.T) {
	m, _ := newTestManager(t, t.TempDir(), 0)
	var wg sync.WaitGroup
	results := make([]map[XID]Status, 4)
	for w := range results {
		results[w] = map[XID]Status{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				tx := m.Begin()
				tx.MarkWritten()
				_ = m.OldestXmin()
				if (i+w)%4 == 0 {
					_ = m.Abort(tx, nil)
					results[w][tx.XID()] = Aborted
				} else {
					_ = m.Commit(tx, nil)
					results[w][tx.XID()] = Committed
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := m.WriteClog(); err != nil {
			t.Error(err)
		}
	}()
	wg.Wait()
	for _, r := range results {
		for x, want := range r {
			if got := m.Status(x); got != want {
				t.Fatalf("xid %d: %v, want %v", x, got, want)
			}
		}
	}
	if m.ActiveCount() != 0 {
		t.Errorf("%d transactions still active", m.ActiveCount())
	}
	if fmt.Sprint(m.OldestXmin()) != fmt.Sprint(m.NextXID()) {
		t.Errorf("horizon %d != NextXID %d with nothing active", m.OldestXmin(), m.NextXID())
	}
}

func TestCommitWithRealWALIsFlushedAndReplayable(t *testing.T) {
	dir := t.TempDir()
	opts := wal.Options{SegmentSize: 1 << 20}
	log, err := wal.Open(testFS(), dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	m, err := NewManager(testFS(), dir, log, 0)
	if err != nil {
		t.Fatal(err)
	}
	committed, aborted := m.Begin(), m.Begin()
	committed.MarkWritten()
	aborted.MarkWritten()
	if err := m.Abort(aborted, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(committed, nil); err != nil {
		t.Fatal(err)
	}
	if f, i := log.FlushedLSN(), log.InsertLSN(); f < i {
		t.Fatalf("Commit returned with the log flushed to %X of %X", f, i)
	}
	// A crash now: a new manager rebuilt from the WAL alone.
	m2, err := NewManager(testFS(), t.TempDir(), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := wal.NewReader(testFS(), dir, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read WAL: %v", err)
		}
		m2.AdvanceNextXID(XID(rec.XID) + 1)
		if err := m2.Redo(rec); err != nil {
			t.Fatal(err)
		}
	}
	if m2.Status(committed.XID()) != Committed || m2.Status(aborted.XID()) != Aborted {
		t.Errorf("after replay: committed %v, aborted %v", m2.Status(committed.XID()), m2.Status(aborted.XID()))
	}
	if m2.NextXID() <= committed.XID() {
		t.Errorf("NextXID %d not past the replayed xids", m2.NextXID())
	}
}

func TestWaitEndsWithTheTransactionOrTheContextAndRefusesACycle(t *testing.T) {
	m, _ := newTestManager(t, t.TempDir(), FirstNormalXID)
	a, b, c := m.Begin(), m.Begin(), m.Begin()
	if err := m.Wait(context.Background(), a.XID(), 999999); err != nil {
		t.Fatalf("wait for a transaction that is not running: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.Wait(ctx, a.XID(), b.XID()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait past the deadline: %v", err)
	}
	// a waits for b, b for c: c waiting for a closes the cycle.
	done := make(chan error, 2)
	go func() { done <- m.Wait(context.Background(), a.XID(), b.XID()) }()
	go func() { done <- m.Wait(context.Background(), b.XID(), c.XID()) }()
	for m.Waits() < 3 {
		time.Sleep(time.Millisecond)
	}
	if err := m.Wait(context.Background(), c.XID(), a.XID()); !errors.Is(err, ErrDeadlock) {
		t.Fatalf("closing a cycle of three: %v, want ErrDeadlock", err)
	}
	if err := m.Abort(c, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := m.Commit(b, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m.Deadlocks() != 1 {
		t.Fatalf("Deadlocks = %d, want 1", m.Deadlocks())
	}
}
