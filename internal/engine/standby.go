package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/redo"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// A hot standby (OpenStandby) is a data directory in continuous recovery: Open replays
// what WAL it has, then Follow applies the WAL a receiver writes into wal/ as it becomes
// durable, with the same redo as crash recovery, while transactions read:
//
//   - Pages: each redo step locks its buffer exclusively (redo.ReadBlock), readers share
//     it, so a reader sees a page before or after a record, never half of one.
//   - Visibility: the standby assigns no xids; a reader's snapshot counts every xid replay
//     has seen a record of, and not yet its commit or abort record, as running (package
//     txn, standby.go), and their clog status stays "in progress" (no hint bit is set from
//     a guess). A transaction becomes visible when its commit record is replayed, so
//     transactions become visible in WAL order and never half.
//   - Hint bits set by readers are kept in memory only (the pool never makes a page dirty
//     for a hint without a full-page image, and a standby logs none), as PostgreSQL does
//     in recovery.
//   - Conflicts: a prune or vacuum record removes tuples whose deleting xid a reader's
//     snapshot may not see yet; replay waits for those readers up to
//     MaxStandbyStreamingDelay, then cancels them (ErrStandbyConflict, 40001) and applies
//     the record. A catalog record that retires relation files (VACUUM FULL, TRUNCATE,
//     DROP) does the same for every open reader.
//   - Restartpoints: at each replayed checkpoint record, the replayed pages are written
//     and fsynced, the clog written and the control file pointed at that checkpoint's redo
//     LSN, so a restart of the standby replays from there.

// defaultMaxStandbyStreamingDelay is MaxStandbyStreamingDelay's default (PostgreSQL's).
const defaultMaxStandbyStreamingDelay = 30 * time.Second

// OpenStandby opens dir (a base backup of a primary) as a hot standby: Open's recovery
// replays the WAL it has, and then the DB serves read-only transactions while Follow
// applies more. Writes, DDL, vacuums and checkpoints return ErrReadOnly.
func OpenStandby(dir string, opts Options) (*DB, error) {
	opts.Standby = true
	return Open(dir, opts)
}

// InRecovery reports whether the DB is a hot standby (pg_is_in_recovery()).
func (db *DB) InRecovery() bool { return db.opts.Standby }

// ReplayedLSN is the end of the last record a standby replayed (the crash recovery's end
// on a primary).
func (db *DB) ReplayedLSN() wal.LSN { return wal.LSN(db.replayEnd.Load()) }

// ReceivedLSN is the end of the WAL a standby's receiver has made durable, as Follow last
// read it (pg_last_wal_receive_lsn()); never behind ReplayedLSN.
func (db *DB) ReceivedLSN() wal.LSN {
	return max(wal.LSN(db.receivedEnd.Load()), db.ReplayedLSN())
}

// CurrentLSN is the end of the WAL a primary has made durable (pg_current_wal_lsn()): what a
// standby can be sent, so a caught-up standby's lag against it is 0.
func (db *DB) CurrentLSN() wal.LSN {
	if db.log == nil {
		return db.ReplayedLSN()
	}
	return db.log.FlushedLSN()
}

// LastReplayTime is when a standby last replayed a record (zero before the first).
func (db *DB) LastReplayTime() time.Time {
	if p := db.replayAt.Load(); p != nil {
		return *p
	}
	return time.Time{}
}

// StandbyCancels is the number of standby transactions replay cancelled (conflicts).
func (db *DB) StandbyCancels() int64 { return db.standbyCancels.Load() }

// startStandby ends a standby's Open: no writable log and no checkpoint. Its orphan
// sweep is narrower than a primary's: the files of a table whose catalog record has not
// arrived yet look like orphans, so only those whose creation precedes the last
// end-of-recovery record replay saw go (sweepStandbyOrphans), once replay has passed
// everything the directory's files reflect.
func (db *DB) startStandby(info *RecoveryInfo) error {
	missing, err := db.missingRelations()
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &corruptError{msg: fmt.Sprintf("%v: missing relation file %v", ErrCorrupt, missing)}
	}
	if at := db.skip.endOfRecovery; at != 0 || len(db.skip.retiredSeen) > 0 {
		if err := db.sweepStandbyOrphans(at, true, info); err != nil {
			return err
		}
	}
	// As a primary's Open does: the orphans of an uncertain switch were dealt with.
	if err := db.removeMarker(filepath.Join(db.dir, uncertainSwitchName), true); err != nil {
		return err
	}
	db.recovery = *info
	db.replayEnd.Store(uint64(info.EndLSN))
	return nil
}

// Follow applies, in order, every record of the WAL directory up to flushed() (what the
// receiver has made durable) until ctx ends or the DB closes, polling every poll (0 =
// 20 ms) once it has caught up, or at once when WakeFollow says more WAL is durable. Only
// a standby may follow. A record it cannot apply stops it with the error (the standby must
// then be reopened).
func (db *DB) Follow(ctx context.Context, flushed func() wal.LSN, poll time.Duration) error {
	if !db.opts.Standby {
		return errors.New("follow the WAL: not a standby")
	}
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	skip := db.skip
	env := &redo.Env{Pool: db.pool, Storage: db.st, Skip: skip.skip}
	for {
		if db.closed.Load() {
			return ErrClosed
		}
		limit := flushed()
		db.receivedEnd.Store(uint64(limit))
		n, err := db.followOnce(ctx, env, skip, limit)
		if err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-db.stop:
			return ErrClosed
		case <-db.followWake:
		case <-time.After(poll):
		}
	}
}

// WakeFollow tells Follow that the receiver made more WAL durable, so it replays it now
// rather than at its next poll: a standby's replay, and the replay position its receiver
// reports, then trail a flush by the replay's own time, not by up to a poll (at 20 ms, 0.4 MB
// of a WAL-limited VACUUM FULL at 22 MB/s in experiment 5). It never blocks.
func (db *DB) WakeFollow() {
	select {
	case db.followWake <- struct{}{}:
	default:
	}
}

func (db *DB) catalogNow() *catalog.Catalog {
	db.mu.RLock()
	defer db.mu.RUnlock()
	return db.cat
}

// followOnce applies the whole records from the replay position up to limit and returns
// how many it applied.
func (db *DB) followOnce(ctx context.Context, env *redo.Env, skip *replaySkip, limit wal.LSN) (int, error) {
	at := wal.LSN(db.replayEnd.Load())
	if limit <= at {
		return 0, nil
	}
	rd, err := wal.NewReader(db.fs, db.dir, at, wal.Options{SegmentSize: db.opts.WALSegmentSize, Logf: db.opts.Logf})
	if err != nil {
		return 0, fmt.Errorf("standby replay at LSN %X: %w", uint64(at), err)
	}
	defer func() { _ = rd.Close() }() // read-only: nothing to lose
	xidLimit := replayXIDLimit(db.txns.NextXID())
	n := 0
	for ctx.Err() == nil && !db.closed.Load() {
		rec, err := rd.Next()
		var cre *wal.CorruptRecordError
		if errors.Is(err, io.EOF) || errors.As(err, &cre) {
			// The end of what was received (a record still arriving reads as torn).
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("standby replay after LSN %X: %w", uint64(at), err)
		}
		if rec.EndLSN > limit {
			return n, nil
		}
		if err := db.applyStandby(ctx, env, skip, rec, xidLimit); err != nil {
			return n, fmt.Errorf("standby replay of the record at LSN %X: %w", uint64(rec.StartLSN), err)
		}
		at = rec.EndLSN
		now := time.Now()
		db.replayAt.Store(&now)
		db.replayEnd.Store(uint64(at))
		n++
	}
	return n, nil
}

// applyStandby replays one record beside the standby's readers.
func (db *DB) applyStandby(ctx context.Context, env *redo.Env, skip *replaySkip, rec *wal.Record, xidLimit uint64) error {
	if rec.XID != 0 {
		if err := checkReplayXID(rec.XID, xidLimit, rec.StartLSN); err != nil {
			return err
		}
		db.txns.AdvanceNextXID(txn.XID(rec.XID) + 1)
		if rec.Rmgr != wal.RmgrXact {
			db.txns.NoteReplayXID(txn.XID(rec.XID))
		}
	}
	if rec.Rmgr == wal.RmgrXLOG && rec.Info == xlogCatalog {
		// Takes db.mu exclusively itself.
		_, err := db.redoRecord(env, skip, rec, xidLimit)
		return err
	}
	if rec.Rmgr == wal.RmgrXLOG && rec.Info == xlogEndOfRecovery {
		if _, err := db.redoRecord(env, skip, rec, xidLimit); err != nil {
			return err
		}
		db.mu.Lock()
		defer db.mu.Unlock()
		var info RecoveryInfo
		return db.sweepStandbyOrphans(rec.StartLSN, true, &info)
	}
	if rec.Rmgr == wal.RmgrHeap {
		db.resolvePruneConflict(rec, env)
	}
	db.mu.RLock()
	_, err := db.redoRecord(env, skip, rec, xidLimit)
	db.mu.RUnlock()
	if err != nil {
		return err
	}
	if rec.Rmgr == wal.RmgrXLOG && rec.Info == xlogCheckpoint {
		ck, err := decodeCheckpoint(rec.Main)
		if err != nil {
			return err
		}
		return db.restartpoint(ck, rec.StartLSN, db.catalogNow().NextOID)
	}
	_ = ctx
	return nil
}

// resolvePruneConflict waits for, then cancels, the readers a prune or vacuum record
// would remove visible rows from under.
func (db *DB) resolvePruneConflict(rec *wal.Record, env *redo.Env) {
	var horizon txn.XID
	found := false
	for i := range rec.Blocks {
		br := &rec.Blocks[i]
		if env.Skip(br.Rel) {
			continue
		}
		n, err := db.st.NBlocks(br.Rel, br.Fork)
		if err != nil || br.Block >= n {
			continue
		}
		b, err := db.pool.Read(buffer.Tag{Rel: br.Rel, Fork: br.Fork, Block: br.Block}, nil)
		if err != nil {
			continue // redo reports it
		}
		b.RLock()
		h, ok := heap.RemovedXmax(rec, i, b.Page())
		b.RUnlock()
		b.Release()
		if ok && h != txn.InvalidXID {
			horizon, found = max(horizon, h), true
		}
	}
	if found {
		db.resolveConflicts(horizon, false, fmt.Sprintf("a prune of rows deleted by transaction %d on the primary", horizon))
	}
}

// resolveConflicts waits up to MaxStandbyStreamingDelay for the standby transactions
// whose snapshot Xmin is at or below horizon (all open ones when all is set) to end, and
// cancels those still open.
func (db *DB) resolveConflicts(horizon txn.XID, all bool, why string) {
	ts := db.txns.StandbyConflicts(horizon, all)
	if len(ts) == 0 {
		return
	}
	delay := db.opts.MaxStandbyStreamingDelay
	if delay == 0 {
		delay = defaultMaxStandbyStreamingDelay
	}
	var deadline <-chan time.Time
	if delay > 0 {
		tm := time.NewTimer(delay)
		defer tm.Stop()
		deadline = tm.C
	}
	for i, t := range ts {
		select {
		case <-t.Ended():
			continue
		case <-deadline:
		case <-db.stop:
			return
		}
		for _, t := range ts[i:] {
			select {
			case <-t.Ended():
			default:
				t.Cancel(fmt.Errorf("%w (%s, after waiting %v)", ErrStandbyConflict, why, delay))
				db.standbyCancels.Add(1)
			}
		}
		db.opts.Logf("standby: cancelled transactions that conflict with recovery: %s", why)
		return
	}
}

// restartpoint makes a standby restart replay from ck's redo LSN: every replayed page is
// written and fsynced, the clog written, then the control file names the checkpoint.
func (db *DB) restartpoint(ck checkpointRecord, at wal.LSN, nextOID uint32) error {
	db.ckptMu.Lock()
	defer db.ckptMu.Unlock()
	return db.restartpointLocked(ck, at, nextOID)
}

// restartpointLocked is restartpoint by a caller that holds db.ckptMu (Close).
func (db *DB) restartpointLocked(ck checkpointRecord, at wal.LSN, nextOID uint32) error {
	if err := db.pool.FlushAll(); err != nil {
		return fmt.Errorf("restartpoint: %w", err)
	}
	if err := db.st.SyncAll(); err != nil {
		return fmt.Errorf("restartpoint: %w", err)
	}
	if err := db.txns.WriteClog(); err != nil {
		return fmt.Errorf("restartpoint: %w", err)
	}
	c := &wal.Control{Version: DataVersion, State: wal.StateInProduction, CheckpointLSN: at, RedoLSN: ck.Redo,
		NextXID: uint64(db.txns.NextXID()), NextOID: max(ck.NextOID, nextOID), SystemID: db.sysID, Opener: db.opts.Opener}
	if err := wal.WriteControl(db.fs, db.dir, c); err != nil {
		return fmt.Errorf("restartpoint: %w", err)
	}
	db.lastRedo.Store(uint64(ck.Redo))
	db.lastCkptLSN.Store(uint64(at))
	db.ckpts.Add(1)
	return nil
}
