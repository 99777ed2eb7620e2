package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// xlogCheckpoint is the Info of the RmgrXLOG checkpoint record. Its Main:
//
//	offset size field
//	     0    8 redo LSN
//	     8    8 next xid
//	    16    4 next oid
//	    20    1 flags (1 = shutdown checkpoint)
const (
	xlogCheckpoint       uint8 = 0x01
	checkpointMainSize   int   = 21
	checkpointFlagShutdn uint8 = 1
)

type checkpointRecord struct {
	Redo     wal.LSN
	NextXID  uint64
	NextOID  uint32
	Shutdown bool
}

func (c checkpointRecord) encode() []byte {
	b := make([]byte, checkpointMainSize)
	binary.LittleEndian.PutUint64(b[0:], uint64(c.Redo))
	binary.LittleEndian.PutUint64(b[8:], c.NextXID)
	binary.LittleEndian.PutUint32(b[16:], c.NextOID)
	if c.Shutdown {
		b[20] = checkpointFlagShutdn
	}
	return b
}

func decodeCheckpoint(b []byte) (checkpointRecord, error) {
	if len(b) != checkpointMainSize {
		return checkpointRecord{}, fmt.Errorf("checkpoint record of %d bytes, want %d", len(b), checkpointMainSize)
	}
	return checkpointRecord{
		Redo:     wal.LSN(binary.LittleEndian.Uint64(b[0:])),
		NextXID:  binary.LittleEndian.Uint64(b[8:]),
		NextOID:  binary.LittleEndian.Uint32(b[16:]),
		Shutdown: b[20]&checkpointFlagShutdn != 0,
	}, nil
}

// insertCheckpoint inserts and flushes a checkpoint record and returns its
// start and end LSNs.
func insertCheckpoint(log *wal.Log, ck checkpointRecord) (start, end wal.LSN, err error) {
	rec := &wal.Record{Rmgr: wal.RmgrXLOG, Info: xlogCheckpoint, Main: ck.encode()}
	size := wal.LSN(len(wal.Encode(rec)))
	end, err = log.Insert(rec, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("insert checkpoint record: %w", err)
	}
	if err := log.Flush(end, nil); err != nil {
		return 0, 0, fmt.Errorf("flush checkpoint record: %w", err)
	}
	return end - size, end, nil
}

// Checkpoint makes every change so far durable in the relation files, so
// that recovery replays only what follows, and recycles the WAL before it:
// take the commit barrier, set the redo pointer, release the barrier;
// flush every dirty buffer; fsync every relation file; write the clog;
// insert and flush a checkpoint record; write the control file; remove WAL
// segments wholly before the redo pointer.
func (db *DB) Checkpoint() error { return db.checkpointOpen(false) }

// checkpointSpread is the checkpoint the engine starts by itself (after
// CheckpointWALBytes of WAL): Checkpoint with its buffer writes paced over
// the WAL and time that follow (spread.go) instead of written at once.
func (db *DB) checkpointSpread() error { return db.checkpointOpen(true) }

// checkpointOpen is Checkpoint (spread: checkpointSpread) of an open primary.
//
// Every checkpoint takes db.ckptMu before db.mu, never the other way round:
// a spread checkpoint holds ckptMu while it takes db.mu shared again after
// each nap (spread.go). A checkpoint that waited for ckptMu while holding
// db.mu shared, with a writer (DDL, VACUUM FULL's switch) waiting for db.mu,
// would stop all three, and every transaction after them, for good: Go's
// RWMutex lets no new reader in while a writer waits (the engine server hung
// so in experiment 10 on 2026-12-07: a CHECKPOINT statement beside a spread
// checkpoint and a VACUUM FULL).
func (db *DB) checkpointOpen(spread bool) error {
	if !spread {
		defer db.hurryCheckpoint()()
	}
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.Standby {
		return ErrReadOnly
	}
	return db.checkpointPaced(false, db.cat.NextOID, spread)
}

// hurryCheckpoint makes a spread checkpoint running meanwhile stop pacing
// (ckptHurry), so that an immediate one starts as soon as it can; call the
// function it returns once the immediate checkpoint is done.
func (db *DB) hurryCheckpoint() func() {
	db.ckptHurry.Add(1)
	return func() { db.ckptHurry.Add(-1) }
}

// checkpoint is an immediate checkpoint by a caller that holds neither
// db.ckptMu nor db.mu (the end of recovery, before the DB is shared).
func (db *DB) checkpoint(shutdown bool, nextOID uint32) error {
	defer db.hurryCheckpoint()()
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	return db.checkpointPaced(shutdown, nextOID, false)
}

// checkpointPaced is a checkpoint; the caller holds db.ckptMu. spread paces
// its buffer writes, and then the caller holds db.mu shared, which the pacing
// lets go of while it sleeps.
func (db *DB) checkpointPaced(shutdown bool, nextOID uint32, spread bool) error {
	// After a sticky failure a checkpoint would move the redo pointer past
	// WAL that may still be needed, or mark a directory clean whose
	// catalog switch may not be durable: only a reopen recovers.
	if err := db.writable(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	began := time.Now()
	unlock := db.txns.CheckpointBarrier()
	redo := db.log.SetRedoPtr()
	nextXID := uint64(db.txns.NextXID())
	unlock()
	why := "immediate"
	switch {
	case shutdown:
		why = "shutdown"
	case spread:
		why = "wal"
	}
	if db.opts.LogCheckpoints {
		db.opts.Logf("checkpoint starting: %s", why)
	}

	var pace func(done, total int) error
	if spread && db.opts.CheckpointSpread > 0 {
		pace = db.newCheckpointPace(redo).pace
	}
	written, err := db.pool.FlushAllPaced(pace)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	wrote := time.Now()
	if spread {
		// db.mu was let go of while the writes were paced: an OID allocated
		// meanwhile logged its record before this checkpoint's, which must
		// count it (a checkpoint's NextOID may only be larger than needed).
		nextOID = max(nextOID, db.cat.NextOID)
	}
	if err := db.st.SyncAll(); err != nil {
		db.fail(err)
		return fmt.Errorf("checkpoint: %w", err)
	}
	synced := time.Now()
	if err := db.txns.WriteClog(); err != nil {
		return fmt.Errorf("checkpoint: %w", db.failIfMaybeReplaced(err))
	}
	ck := checkpointRecord{Redo: redo, NextXID: nextXID, NextOID: nextOID, Shutdown: shutdown}
	start, _, err := insertCheckpoint(db.log, ck)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	state := wal.StateInProduction
	if shutdown {
		state = wal.StateShutdown
	}
	c := &wal.Control{Version: DataVersion, State: state, CheckpointLSN: start, RedoLSN: redo,
		NextXID: nextXID, NextOID: nextOID, SystemID: db.sysID, Opener: db.opts.Opener}
	if err := wal.WriteControl(db.fs, db.dir, c); err != nil {
		return fmt.Errorf("checkpoint: %w", db.failIfMaybeReplaced(err))
	}
	prevRedo := wal.LSN(db.lastRedo.Swap(uint64(redo)))
	db.lastCkptXID.Store(nextXID)
	db.ckpts.Add(1)
	if err := db.log.RemoveBefore(redo); err != nil {
		return fmt.Errorf("checkpoint: recycle WAL: %w", err)
	}
	// As PostgreSQL's log_checkpoints (on by default since 15) does: what a
	// checkpoint wrote and how long it took, so that a foreground slowed by
	// one can be told from one slowed by a VACUUM.
	if db.opts.LogCheckpoints {
		db.opts.Logf("checkpoint complete: wrote %d buffers; write=%.3f s, sync=%.3f s, total=%.3f s; distance=%d kB",
			written, wrote.Sub(began).Seconds(), synced.Sub(wrote).Seconds(), time.Since(began).Seconds(),
			max(0, int64(redo)-int64(prevRedo))/1024)
	}
	return nil
}

// xidCheckpointInterval: see maybeCheckpoint.
const xidCheckpointInterval = maxReplayXIDAdvance / 4

// maybeCheckpoint asks the background checkpointer for a checkpoint when
// more than CheckpointWALBytes of WAL were written since the last one
// began. It never blocks.
func (db *DB) maybeCheckpoint() {
	limit := db.opts.CheckpointWALBytes
	if limit < 0 || db.log == nil {
		return
	}
	// Transaction ids advance without WAL (read-only transactions take one
	// too): a checkpoint every xidCheckpointInterval ids keeps the WAL's
	// jumps within what recovery accepts (maxReplayXIDAdvance).
	if int64(db.log.InsertLSN())-int64(db.lastRedo.Load()) < limit &&
		uint64(db.txns.NextXID())-db.lastCkptXID.Load() < xidCheckpointInterval {
		return
	}
	select {
	case db.ckptReq <- struct{}{}:
	default:
	}
}

// checkpointer runs requested checkpoints until Close. It also looks at
// the WAL twice a second, so work that commits nothing for a long time (a
// vacuum, a huge transaction) still gets its checkpoints.
func (db *DB) checkpointer() {
	defer db.bg.Done()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-tick.C:
			db.maybeCheckpoint()
		case <-db.ckptReq:
			if err := db.checkpointSpread(); err != nil && !errors.Is(err, ErrClosed) {
				db.opts.Logf("automatic checkpoint failed: %v", err)
				db.bgErr.Store(&err)
			}
		}
	}
}

// writable returns ErrNeedsRecovery (wrapping the failure) once an fsync of
// relation files has failed, or a replace of the catalog, control file or
// commit log may or may not have reached the disk (see fail): a failed
// fsync is never retried as if the data were safe (the kernel may have
// dropped the dirty pages), so nothing more is acknowledged until the
// directory is reopened.
func (db *DB) writable() error {
	if db.opts.Standby {
		return ErrReadOnly
	}
	if p := db.failed.Load(); p != nil {
		return fmt.Errorf("%w: %w", ErrNeedsRecovery, *p)
	}
	return nil
}
