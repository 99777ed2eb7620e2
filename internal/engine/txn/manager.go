package txn

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// walLog is what the manager needs from the WAL (*wal.Log implements it;
// tests use a small counting fake).
type walLog interface {
	Insert(rec *wal.Record, u *usage.Counters) (wal.LSN, error)
	Flush(upTo wal.LSN, u *usage.Counters) error
}

// Manager assigns xids, keeps the clog and the set of active transactions.
// Safe for concurrent use.
type Manager struct {
	fs  vfs.FS
	dir string

	// barrier is the commit barrier: Commit holds it shared from the
	// commit record's insert to the clog update; CheckpointBarrier holds
	// it exclusively.
	barrier sync.RWMutex
	// writeMu serialises WriteClog calls.
	writeMu sync.Mutex

	mu     sync.RWMutex
	log    walLog
	next   XID
	clog   []byte // 2 bits per xid, see doc.go
	active map[XID]*Txn
	// waitingFor is the wait-for graph: a waiting transaction -> the one
	// it waits for (Wait).
	waitingFor map[XID]XID
	waits      atomic.Int64
	deadlocks  atomic.Int64
	sb         standbyState // hot standby (standby.go)
	// finals is Status's cache (PostgreSQL's cachedFetchXid, with two
	// entries where PostgreSQL keeps one): the last two xids whose clog
	// state was final, newest first, each packed as xid<<2 | status, 0 when
	// empty. A final state never changes, so an entry needs no
	// invalidation, and each entry is one atomic word, so a race between
	// two misses can only lose an entry, never pair an xid with another's
	// state. Two entries because a page whose tuples have no hint bits
	// alternates between two transactions, its rows' inserter and the
	// deleter of the dead ones (xmin A, xmin A and xmax D, xmin A, ...):
	// one entry would miss on every dead tuple and on the tuple after it.
	finals [2]atomic.Uint64
}

// Txn is one transaction. Its methods are safe for concurrent use, but a
// transaction is normally driven by one goroutine.
type Txn struct {
	xid     XID
	snap    *Snapshot
	written atomic.Bool
	done    bool          // guarded by Manager.mu
	ended   chan struct{} // closed when the transaction ends (Wait)
	// cancelled is set when a standby's replay cancelled the transaction (Cancel).
	cancelled atomic.Pointer[error]
}

// XID is the transaction's id.
func (t *Txn) XID() XID { return t.xid }

// Snapshot is the transaction's snapshot (one per transaction).
func (t *Txn) Snapshot() *Snapshot { return t.snap }

// MarkWritten records that the transaction wrote (or is about to write) a
// WAL record carrying its xid, so Commit must log and flush a commit
// record. Heap and index code call it before their first change.
func (t *Txn) MarkWritten() { t.written.Store(true) }

// Written reports whether MarkWritten was called.
func (t *Txn) Written() bool { return t.written.Load() }

// NewManager returns a manager for the data directory dir, loading
// <dir>/clog when it exists. nextXID is the first id to assign (from the
// control file; values below FirstNormalXID mean FirstNormalXID). A missing
// clog is fine in a fresh directory (nextXID <= FirstNormalXID) and
// ErrClogMissing otherwise; a damaged one is a *CorruptClogError. log may
// be nil during recovery; attach it with SetLog before the first Commit.
func NewManager(fs vfs.FS, dir string, log *wal.Log, nextXID XID) (*Manager, error) {
	m := &Manager{fs: fs, dir: dir, next: max(nextXID, FirstNormalXID), active: make(map[XID]*Txn),
		waitingFor: make(map[XID]XID)}
	if log != nil {
		m.log = log
	}
	fileNext, data, ok, err := readClogFile(fs, dir)
	if err != nil {
		return nil, err
	}
	if !ok && nextXID > FirstNormalXID {
		return nil, fmt.Errorf("open transaction manager in %s (nextXID %d): %w", dir, nextXID, ErrClogMissing)
	}
	if ok && nextXID > fileNext {
		// The commit log is written before the control file at every
		// checkpoint, with a next xid at least the checkpoint's: a larger
		// one comes from a damaged or forged control file, and growing the
		// log to it could take gigabytes.
		return nil, &CorruptClogError{File: filepath.Join(dir, clogFileName),
			Reason: fmt.Sprintf("it covers transactions below %d, but the control file's next transaction id is %d", fileNext, nextXID)}
	}
	if ok {
		m.clog = data
		m.next = max(m.next, fileNext)
	}
	m.growLocked(m.next)
	return m, nil
}

// newManagerWithLog is NewManager with any walLog (tests).
func newManagerWithLog(fs vfs.FS, dir string, log walLog, nextXID XID) (*Manager, error) {
	m, err := NewManager(fs, dir, nil, nextXID)
	if err != nil {
		return nil, err
	}
	m.log = log
	return m, nil
}

// SetLog attaches the WAL log (after recovery opened it).
func (m *Manager) SetLog(log *wal.Log) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if log == nil {
		m.log = nil
		return
	}
	m.log = log
}

// growLocked makes the clog cover xids below next.
func (m *Manager) growLocked(next XID) {
	if n := clogBytes(next); n > len(m.clog) {
		m.clog = append(m.clog, make([]byte, n-len(m.clog)+len(m.clog)/4)...)
	}
}

func (m *Manager) clogGetLocked(x XID) Status {
	i := uint64(x) / 4
	if i >= uint64(len(m.clog)) {
		return InProgress
	}
	return Status((m.clog[i] >> (2 * (x % 4))) & 3)
}

func (m *Manager) clogSetLocked(x XID, st Status) {
	m.growLocked(x + 1)
	i, sh := uint64(x)/4, 2*(x%4)
	m.clog[i] = m.clog[i]&^(3<<sh) | byte(st)<<sh
}

// Begin starts a transaction: it assigns the next xid and takes the
// transaction's snapshot.
func (m *Manager) Begin() *Txn {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sb.on {
		return m.beginStandbyLocked()
	}
	x := m.next
	m.next++
	m.growLocked(m.next)
	snap := &Snapshot{Current: x, Xmin: x, Xmax: m.next, XIP: make([]XID, 0, len(m.active))}
	for a := range m.active {
		snap.XIP = append(snap.XIP, a)
		snap.Xmin = min(snap.Xmin, a)
	}
	slices.Sort(snap.XIP)
	t := &Txn{xid: x, snap: snap, ended: make(chan struct{})}
	m.active[x] = t
	return t
}

// Resnapshot replaces t's snapshot with one taken now, as READ COMMITTED takes one per
// statement: transactions that committed since become visible, t's own changes stay
// visible (Current). Its Xmin never rises above t's own xid, so the vacuum horizon stays
// held by t as before. Only t's own goroutine may call it (it reads t's snapshot unlocked).
func (m *Manager) Resnapshot(t *Txn) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sb.on && t.xid == InvalidXID {
		t.snap = m.standbySnapshotLocked()
		return
	}
	snap := &Snapshot{Current: t.xid, Xmin: t.xid, Xmax: m.next, XIP: make([]XID, 0, len(m.active))}
	for a := range m.active {
		if a == t.xid {
			continue
		}
		snap.XIP = append(snap.XIP, a)
		snap.Xmin = min(snap.Xmin, a)
	}
	slices.Sort(snap.XIP)
	t.snap = snap
}

// Commit makes t's changes durable and visible. For a transaction that
// wrote, it inserts a commit record, flushes the WAL up to it, and only
// then marks the clog; it returns only once the commit is durable. On a
// WAL error the transaction ends as aborted in this process (after a crash,
// replay decides) and the error is returned.
func (m *Manager) Commit(t *Txn, u *usage.Counters) error {
	if !t.written.Load() {
		return m.finish(t, Committed)
	}
	m.barrier.RLock()
	defer m.barrier.RUnlock()
	m.mu.RLock()
	log, done := m.log, t.done
	m.mu.RUnlock()
	if done {
		return fmt.Errorf("commit xid %d: %w", t.xid, ErrTxnFinished)
	}
	if log == nil {
		return fmt.Errorf("commit xid %d: %w", t.xid, ErrNoLog)
	}
	lsn, err := log.Insert(&wal.Record{Rmgr: wal.RmgrXact, Info: InfoCommit, XID: uint64(t.xid)}, u)
	if err != nil {
		_ = m.finish(t, Aborted)
		return fmt.Errorf("insert commit record of xid %d: %w", t.xid, err)
	}
	if err := log.Flush(lsn, u); err != nil {
		// The record may or may not be durable: leave the clog "in
		// progress" (aborted here, decided by replay after a restart).
		_ = m.finish(t, InProgress)
		return fmt.Errorf("flush commit record of xid %d: %w", t.xid, err)
	}
	return m.finish(t, Committed)
}

// Abort rolls t back: an abort record (not flushed: a lost abort record
// means the same thing after a crash) and the clog marked aborted.
func (m *Manager) Abort(t *Txn, u *usage.Counters) error {
	if t.written.Load() {
		m.mu.RLock()
		log, done := m.log, t.done
		m.mu.RUnlock()
		if done {
			return fmt.Errorf("abort xid %d: %w", t.xid, ErrTxnFinished)
		}
		if log != nil {
			if _, err := log.Insert(&wal.Record{Rmgr: wal.RmgrXact, Info: InfoAbort, XID: uint64(t.xid)}, u); err != nil {
				_ = m.finish(t, Aborted)
				return fmt.Errorf("insert abort record of xid %d: %w", t.xid, err)
			}
		}
	}
	return m.finish(t, Aborted)
}

// finish sets t's clog status (unless InProgress) and unregisters it.
func (m *Manager) finish(t *Txn, st Status) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.done {
		return fmt.Errorf("finish xid %d: %w", t.xid, ErrTxnFinished)
	}
	t.done = true
	if t.xid == InvalidXID { // a standby's read-only transaction
		delete(m.sb.readers, t)
		close(t.ended)
		return nil
	}
	if st != InProgress {
		m.clogSetLocked(t.xid, st)
	}
	delete(m.active, t.xid)
	close(t.ended)
	return nil
}

// Wait makes transaction self wait until transaction x is no longer
// running in this process (committed or aborted: ask Status which), or
// returns ctx's error. Waits form a wait-for graph: a Wait that would
// close a cycle (x waits, directly or through others, for self) returns
// ErrDeadlock at once instead, so of the transactions in a cycle exactly
// the one that closed it is told. Each call that had to wait counts in
// Waits.
func (m *Manager) Wait(ctx context.Context, self, x XID) error {
	m.mu.Lock()
	t, ok := m.active[x]
	if !ok {
		m.mu.Unlock()
		return nil
	}
	for y, n := x, 0; n <= len(m.waitingFor); n++ {
		next, waiting := m.waitingFor[y]
		if !waiting {
			break
		}
		if next == self {
			m.deadlocks.Add(1)
			m.mu.Unlock()
			return fmt.Errorf("transaction %d waits for %d, which waits for %d: %w", self, x, self, ErrDeadlock)
		}
		y = next
	}
	m.waitingFor[self] = x
	m.mu.Unlock()
	m.waits.Add(1)
	defer func() {
		m.mu.Lock()
		delete(m.waitingFor, self)
		m.mu.Unlock()
	}()
	select {
	case <-t.ended:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for transaction %d: %w", x, ctx.Err())
	}
}

// Deadlocks is the number of Wait calls refused with ErrDeadlock.
func (m *Manager) Deadlocks() int64 { return m.deadlocks.Load() }

// Waits is the number of Wait calls that found the transaction running
// and waited for it (row and unique-key waits: lock waits, for views).
func (m *Manager) Waits() int64 { return m.waits.Load() }

// Status reports x's state: the clog's answer when it is final; otherwise
// InProgress if x is active in this process, else Aborted (a transaction
// that crashed, or an id never assigned). FrozenXID and BootstrapXID are
// Committed; InvalidXID is Aborted.
func (m *Manager) Status(x XID) Status {
	switch x {
	case InvalidXID:
		return Aborted
	case BootstrapXID, FrozenXID:
		return Committed
	}
	for i := range m.finals {
		if c := m.finals[i].Load(); c != 0 && XID(c>>2) == x {
			return Status(c & 3)
		}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if st := m.clogGetLocked(x); st != InProgress {
		if x < 1<<62 {
			m.finals[1].Store(m.finals[0].Load())
			m.finals[0].Store(uint64(x)<<2 | uint64(st))
		}
		return st
	}
	if m.sb.on {
		// Replay has not met its end yet: it may still commit. (One the primary
		// lost in a crash stays in progress here until the next Open.)
		return InProgress
	}
	if _, ok := m.active[x]; ok {
		return InProgress
	}
	return Aborted
}

// OldestXmin is the vacuum horizon: the minimum Xmin over every active
// transaction's snapshot, or NextXID when none is active. Tuples deleted by
// committed xids below it are invisible to every snapshot now and later.
func (m *Manager) OldestXmin() XID {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h := m.next
	for _, t := range m.active {
		h = min(h, t.snap.Xmin)
	}
	return h
}

// ActiveCount is the number of running transactions.
func (m *Manager) ActiveCount() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.active)
}

// CheckpointBarrier blocks new commits from passing between their commit
// record and their clog update, waits for those in flight, and returns the
// function that releases the barrier. The checkpoint holds it only while
// it sets the WAL redo pointer.
func (m *Manager) CheckpointBarrier() (unlock func()) {
	m.barrier.Lock()
	return m.barrier.Unlock
}

// NextXID is the first xid not yet assigned.
func (m *Manager) NextXID() XID {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.next
}

// AdvanceNextXID makes NextXID at least x (recovery calls it with
// XID(rec.XID)+1 for every replayed record).
func (m *Manager) AdvanceNextXID(x XID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if x > m.next {
		m.next = x
		m.growLocked(x)
	}
}

// Redo replays an RmgrXact record: it sets the clog entry of rec.XID and
// advances NextXID past it.
func (m *Manager) Redo(rec *wal.Record) error {
	if rec.Rmgr != wal.RmgrXact {
		return fmt.Errorf("txn redo of record at %X: rmgr %d is not RmgrXact", uint64(rec.StartLSN), rec.Rmgr)
	}
	x := XID(rec.XID)
	if !x.IsNormal() {
		return fmt.Errorf("txn redo of record at %X: invalid xid %d", uint64(rec.StartLSN), x)
	}
	var st Status
	switch rec.Info {
	case InfoCommit:
		st = Committed
	case InfoAbort:
		st = Aborted
	default:
		return fmt.Errorf("txn redo of record at %X: unknown info %d", uint64(rec.StartLSN), rec.Info)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clogSetLocked(x, st)
	delete(m.sb.running, x)
	if x+1 > m.next {
		m.next = x + 1
		m.growLocked(m.next)
	}
	return nil
}

// WriteClog atomically replaces <dir>/clog with the statuses of every xid
// below NextXID (the checkpoint calls it after setting its redo pointer).
// Active transactions are stored as in progress; after a crash they are
// aborted unless replay finds their commit record.
func (m *Manager) WriteClog() error {
	m.writeMu.Lock()
	defer m.writeMu.Unlock()
	m.mu.RLock()
	next := m.next
	b := EncodeClog(next, m.clog)
	m.mu.RUnlock()
	if err := writeClogFile(m.fs, m.dir, b); err != nil {
		return fmt.Errorf("write commit log (nextXID %d): %w", next, err)
	}
	return nil
}

// IsClogCorrupt reports whether err is a damaged clog file.
func IsClogCorrupt(err error) bool {
	var ce *CorruptClogError
	return errors.As(err, &ce)
}
