package engine

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// DataVersion is the data directory format version this build writes and
// reads (stored in the control file). Version 2: rows carry a null bitmap
// and the catalog names PostgreSQL's types (packages row and catalog).
// Version 3: an index has a list of key columns of any type and new
// indexes are B-tree page layout 2 (variable-length keys; packages btree
// and row). Version 4: the WAL logs the creation of every relation fork
// and the abandon of a creation (RmgrStorage records) and a primary's Open
// logs the end of its recovery (relfile.go), which a version-3 build could
// not replay. A version-1, -2 or -3 directory is upgraded by Upgrade
// (`vacuum-runner upgrade`), and a build of version 3 refuses a version-4
// directory as written by a newer build.
const DataVersion = 4

// UpgradeCommand is the command that upgrades an older data directory;
// ErrUnsupportedVersion names it.
const UpgradeCommand = "vacuum-runner upgrade --data DIR"

// versionError refuses a directory of format version v.
func versionError(v uint32) error {
	if v < DataVersion {
		return fmt.Errorf("data directory version %d, this build supports %d: upgrade it with %q: %w",
			v, DataVersion, UpgradeCommand, ErrUnsupportedVersion)
	}
	return fmt.Errorf("data directory version %d, this build supports %d (written by a newer build): %w",
		v, DataVersion, ErrUnsupportedVersion)
}

// LockFileName is the data directory's lock file.
const LockFileName = "LOCK"

// DB is an open data directory. Its methods are safe for concurrent use.
type DB struct {
	dir  string
	opts Options
	fs   vfs.FS

	lock io.Closer
	st   *storage.Manager
	pool *buffer.Pool
	gate *walGate
	log  *wal.Log
	txns *txn.Manager

	// mu guards cat and the relation handles. Row operations hold it
	// shared for their duration; DDL, the VACUUM FULL switch and Close
	// hold it exclusively.
	//
	// Lock order: ckptMu, then a table's lock (tableLock), then mu, then the
	// lower packages' locks (ARCHITECTURE.md). No goroutine takes mu shared
	// while it holds it: Go's RWMutex lets no new reader past a waiting
	// writer, so the second RLock would wait for a DDL that waits for the
	// first. A caller's callback (Scan's and IndexRange's fn, UpdateRow's
	// Recheck) therefore runs with the operation's locks let go (Tx.callOut).
	mu  sync.RWMutex
	cat *catalog.Catalog
	// catGen counts the catalogs db.cat has held (setCatalog): a plan made from one
	// generation's tables stays valid while the count is unchanged.
	catGen atomic.Uint64
	// hmu serializes the creation of handles and table locks. Every
	// statement looks its table's lock and handles up, so the lookups take
	// no lock: handles and tlocks are sync.Maps.
	hmu     sync.Mutex
	handles sync.Map  // *heap.Rel or *btree.Index, by storage.RelFileNode
	tlocks  sync.Map  // *sync.RWMutex, table locks by name, see tableLock
	uses    tableUses // table users, vacuum locks and the wait-for graph (tableuse.go)

	sysID  uint64 // the directory's system identifier (control file)
	closed atomic.Bool
	ckptMu sync.Mutex // one checkpoint at a time
	// ckptHurry counts callers waiting for an immediate checkpoint: a spread
	// checkpoint running meanwhile stops pacing its writes (spread.go).
	ckptHurry   atomic.Int32
	lastRedo    atomic.Uint64
	lastCkptLSN atomic.Uint64 // a standby's last restartpoint's checkpoint record
	lastCkptXID atomic.Uint64 // next xid at the last checkpoint
	ckpts       atomic.Int64  // checkpoints completed since Open
	recovery    RecoveryInfo

	ckptReq chan struct{}
	// followWake tells a standby's Follow that more WAL is durable (WakeFollow).
	followWake chan struct{}
	stop       chan struct{}
	bg         sync.WaitGroup
	bgErr      atomic.Pointer[error]
	// failed is the first sticky failure (see fail): a failed fsync of
	// relation files or directories, or a catalog, control file or commit
	// log replace that may or may not be durable. Writes, commits and
	// checkpoints are refused until the directory is reopened and
	// recovered (see writable).
	failed atomic.Pointer[error]

	// A hot standby's replay (standby.go): the end of the last record
	// replayed, when, and the transactions it cancelled.
	replayEnd      atomic.Uint64
	receivedEnd    atomic.Uint64 // what Follow last saw the receiver make durable
	replayAt       atomic.Pointer[time.Time]
	standbyCancels atomic.Int64
	// skip is the replay's record of retired relations (catalogrec.go), kept from
	// Open's recovery for Follow; only the replaying goroutine uses it.
	skip *replaySkip

	// commitWait is SetCommitWait's function (nil: none).
	commitWait atomic.Pointer[func(ctx context.Context, lsn wal.LSN) error]

	usage usage.Counters // foreground (non-vacuum) usage
	uniq  uniqueLocks    // unique-key check stripes (unique.go)
}

// Dir is the data directory.
func (db *DB) Dir() string { return db.dir }

// SystemID is the data directory's system identifier: a random 64-bit
// number made at Init and kept in the control file (as PostgreSQL's
// pg_control_system() reports it). A directory initialized before the
// identifier existed gets one at its first Open by this build.
func (db *DB) SystemID() uint64 { return db.sysID }

// newSystemID returns a random non-zero system identifier.
func newSystemID() uint64 {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// takeLock acquires <dir>/LOCK, polling until timeout.
func takeLock(fsys vfs.FS, dir string, timeout time.Duration) (io.Closer, error) {
	path := filepath.Join(dir, LockFileName)
	deadline := time.Now().Add(timeout)
	for {
		l, err := fsys.Lock(path)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w: %s is locked by another process (waited %v)", ErrInUse, dir, timeout)
		}
		time.Sleep(min(50*time.Millisecond, time.Until(deadline)+time.Millisecond))
	}
}

// Init creates a new, empty data directory at dir (creating dir itself if
// needed). It fails with ErrAlreadyInitialised if dir already holds one.
// Open it afterwards.
func Init(dir string, opts Options) error {
	opts = opts.withDefaults()
	fsys := opts.FS
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	lk, err := takeLock(fsys, dir, opts.LockTimeout)
	if err != nil {
		return err
	}
	defer func() { _ = lk.Close() }() // releasing the lock cannot lose data
	if _, err := fsys.Stat(filepath.Join(dir, wal.ControlFileName)); err == nil {
		return fmt.Errorf("init %s: %w", dir, ErrAlreadyInitialised)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	for _, sub := range []string{"base", "wal"} {
		if err := fsys.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return fmt.Errorf("init %s: %w", dir, err)
		}
	}
	cat := catalog.New()
	if err := catalog.Save(fsys, dir, cat); err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	log, err := wal.Open(fsys, dir, 0, wal.Options{SegmentSize: opts.WALSegmentSize, Logf: opts.Logf,
		RecycleSegments: wal.SpareSegmentsFor(opts.CheckpointWALBytes, opts.WALSegmentSize)})
	if err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	txns, err := txn.NewManager(fsys, dir, log, txn.FirstNormalXID)
	if err != nil {
		return fmt.Errorf("init %s: %w", dir, errors.Join(err, log.Close()))
	}
	if err := txns.WriteClog(); err != nil {
		return fmt.Errorf("init %s: %w", dir, errors.Join(err, log.Close()))
	}
	redo := log.SetRedoPtr()
	ck := checkpointRecord{Redo: redo, NextXID: uint64(txn.FirstNormalXID), NextOID: cat.NextOID, Shutdown: true}
	start, _, err := insertCheckpoint(log, ck)
	if err = errors.Join(err, log.Close()); err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	// The control file is written last: its presence is what makes dir a
	// data directory.
	c := &wal.Control{Version: DataVersion, State: wal.StateShutdown, CheckpointLSN: start,
		RedoLSN: redo, NextXID: ck.NextXID, NextOID: cat.NextOID, SystemID: newSystemID(), Opener: opts.Opener}
	if err := wal.WriteControl(fsys, dir, c); err != nil {
		return fmt.Errorf("init %s: %w", dir, err)
	}
	return nil
}

// Open opens the data directory dir, which Init created: it takes the
// directory's exclusive lock (ErrInUse if another process holds it past
// opts.LockTimeout), replays the WAL if the directory was not shut down
// cleanly, checks that every relation the catalog names exists, removes
// the relation files the catalog does not reference (or, when anything is
// inconsistent, moves them into QuarantineDirName) and takes a checkpoint. A directory without a control file is ErrNotDataDir.
func Open(dir string, opts Options) (*DB, error) {
	opts = opts.withDefaults()
	fsys := opts.FS
	if _, err := fsys.Stat(filepath.Join(dir, wal.ControlFileName)); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("open %s: no control file: %w", dir, ErrNotDataDir)
		}
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	lk, err := takeLock(fsys, dir, opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	db := &DB{dir: dir, opts: opts, fs: fsys, lock: lk,
		ckptReq: make(chan struct{}, 1), followWake: make(chan struct{}, 1), stop: make(chan struct{})}
	if err := db.start(); err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, errors.Join(err, db.release()))
	}
	db.bg.Add(1)
	go db.checkpointer()
	return db, nil
}

// release closes whatever start opened, without checkpointing (failed
// open or after Close's checkpoint).
func (db *DB) release() error {
	var errs []error
	if db.log != nil {
		errs = append(errs, db.log.Close())
	}
	if db.st != nil {
		errs = append(errs, db.st.Close())
	}
	if db.lock != nil {
		errs = append(errs, db.lock.Close())
	}
	return errors.Join(errs...)
}

// Close takes a shutdown checkpoint (so the next Open replays nothing),
// marks the directory cleanly shut down and releases the lock. Later calls
// return ErrClosed, as does every method of the DB and its transactions.
func (db *DB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	close(db.stop)
	db.bg.Wait()
	// ckptMu before db.mu, as every checkpoint takes them (checkpointOpen).
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	db.mu.Lock()
	defer db.mu.Unlock()
	var err error
	if db.opts.Standby {
		err = db.restartpointLocked(checkpointRecord{Redo: wal.LSN(db.lastRedo.Load()), NextOID: db.cat.NextOID},
			wal.LSN(db.lastCkptLSN.Load()), db.cat.NextOID)
	} else {
		err = db.checkpointPaced(true, db.cat.NextOID, false)
	}
	if rerr := db.release(); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("close %s: %w", db.dir, err)
	}
	return nil
}

// walGate is the buffer pool's view of the log. During recovery there is
// no open Log yet: every page the pool writes then has its WAL on disk
// already (it came from there), so flushing is a no-op. After recovery
// the gate forwards to the Log.
type walGate struct {
	log atomic.Pointer[wal.Log]
	// standby: a hot standby logs nothing, so a hint bit never dirties a page
	// (RedoPtr says every page would need a full-page image).
	standby atomic.Bool
}

func (g *walGate) Flush(upTo wal.LSN, u *usage.Counters) error {
	if l := g.log.Load(); l != nil {
		return l.Flush(upTo, u)
	}
	return nil
}

func (g *walGate) FlushedLSN() wal.LSN {
	if l := g.log.Load(); l != nil {
		return l.FlushedLSN()
	}
	return ^wal.LSN(0)
}

func (g *walGate) Insert(rec *wal.Record, u *usage.Counters) (wal.LSN, error) {
	if l := g.log.Load(); l != nil {
		return l.Insert(rec, u)
	}
	return 0, errors.New("no WAL insertion during recovery")
}

func (g *walGate) RedoPtr() wal.LSN {
	if g.standby.Load() {
		return ^wal.LSN(0)
	}
	if l := g.log.Load(); l != nil {
		return l.RedoPtr()
	}
	return 0
}
