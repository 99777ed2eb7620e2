package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/redo"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// RecoveryInfo says what Open found and did.
type RecoveryInfo struct {
	// CleanShutdown: the control file said the last Close completed.
	CleanShutdown bool
	// StartLSN is where replay began (the last checkpoint's redo pointer).
	StartLSN wal.LSN
	// Replayed is the number of WAL records replayed (checkpoint records
	// not counted).
	Replayed int
	// EndLSN is where valid WAL ended; the log continues there.
	EndLSN wal.LSN
	// TornTail is the damaged or torn record that ended replay, nil when
	// the WAL ended cleanly.
	TornTail *wal.CorruptRecordError
	// OrphansRemoved are relation files no catalog entry referenced,
	// removed because the directory was consistent.
	OrphansRemoved []storage.RelFileNode
	// OrphansQuarantined are relation files no catalog entry referenced,
	// moved into the quarantine directory (QuarantineDirName) because
	// something looked inconsistent; QuarantineReason says what.
	OrphansQuarantined []storage.RelFileNode
	QuarantineReason   string
	// Duration is the time replay took.
	Duration time.Duration
	// LastOpener is the opener the control file named before this Open
	// (Options.Opener of the last one; "" if none was recorded).
	LastOpener string
}

// RecoveryInfo returns what the last Open found and did.
func (db *DB) RecoveryInfo() RecoveryInfo { return db.recovery }

// start opens every component, replays the WAL, cleans up orphans and
// takes the first checkpoint.
func (db *DB) start() error {
	var info RecoveryInfo
	ctl, err := wal.ReadControl(db.fs, db.dir)
	if err != nil {
		if errors.Is(err, wal.ErrUnsupportedVersion) {
			return fmt.Errorf("%v: %w", err, ErrUnsupportedVersion)
		}
		return damaged(err)
	}
	if ctl.Version != DataVersion {
		return versionError(ctl.Version)
	}
	if ctl.State != wal.StateShutdown && db.opts.AllowRecovery != nil && !db.opts.AllowRecovery(ctl.Opener) {
		last := ctl.Opener
		if last == "" {
			last = "not recorded"
		}
		return fmt.Errorf("%w (last opener: %s)", ErrRecoveryRefused, last)
	}
	db.sysID = ctl.SystemID
	if db.sysID == 0 {
		db.sysID = newSystemID()
		db.opts.Logf("the control file has no system identifier (written by an older build): assigned %d", db.sysID)
	}
	info.LastOpener = ctl.Opener
	cat, err := catalog.Load(db.fs, db.dir)
	if err != nil {
		if errors.Is(err, catalog.ErrUnsupportedVersion) {
			return fmt.Errorf("%v: %w", err, ErrUnsupportedVersion)
		}
		return damaged(err)
	}
	cat.NextOID = max(cat.NextOID, ctl.NextOID)
	db.setCatalog(cat)

	db.st, err = storage.Open(db.fs, db.dir, storage.Options{SegmentSize: db.opts.SegmentSize, Direct: db.opts.Direct, Logf: db.opts.Logf})
	if err != nil {
		return err
	}
	db.gate = &walGate{}
	if db.opts.Standby {
		db.gate.standby.Store(true)
	}
	db.pool, err = buffer.New(db.st, db.gate, buffer.Options{Frames: db.opts.frames(), Direct: db.opts.Direct})
	if err != nil {
		return err
	}
	db.txns, err = txn.NewManager(db.fs, db.dir, nil, txn.XID(ctl.NextXID))
	if err != nil {
		return damaged(err)
	}

	if db.opts.Standby {
		db.txns.SetStandby(true)
		db.lastRedo.Store(uint64(ctl.RedoLSN))
		db.lastCkptLSN.Store(uint64(ctl.CheckpointLSN))
	}
	t0 := time.Now()
	info.CleanShutdown, info.StartLSN = ctl.State == wal.StateShutdown, ctl.RedoLSN
	lastStart, err := db.replay(ctl.RedoLSN, &info)
	if err != nil {
		return err
	}
	// The control file is written after its checkpoint record was flushed:
	// a WAL that ends before that record lost segments (or was damaged)
	// where it was durable, and committed work with it.
	if info.EndLSN <= ctl.CheckpointLSN {
		reason := "ends"
		if info.TornTail != nil {
			reason = "is damaged at " + info.TornTail.Error() + " and ends"
		}
		return fmt.Errorf("%w: the WAL %s at LSN %X, before the last checkpoint record at LSN %X (missing or damaged WAL segment)",
			ErrCorrupt, reason, uint64(info.EndLSN), uint64(ctl.CheckpointLSN))
	}
	info.Duration = time.Since(t0)
	if info.TornTail != nil {
		db.opts.Logf("recovery: WAL ends at a damaged record: %v; replayed %d records up to LSN %X",
			info.TornTail, info.Replayed, uint64(info.EndLSN))
	} else if !info.CleanShutdown {
		db.opts.Logf("recovery: replayed %d records from LSN %X to %X in %v",
			info.Replayed, uint64(info.StartLSN), uint64(info.EndLSN), info.Duration)
	}

	if db.opts.Standby {
		return db.startStandby(&info)
	}
	wopts := db.walOptions()
	// After a clean shutdown whose checkpoint record is the last one, the
	// segments after the end are spares (zero or recycled) and are kept,
	// so the next writes reuse them instead of creating new ones.
	wopts.KeepSpares = info.CleanShutdown && info.TornTail == nil && lastStart == ctl.CheckpointLSN
	if info.TornTail != nil {
		// The bytes after the end are discarded: keep them for forensics.
		if wopts.TailAside, err = db.makeQuarantineDir(fmt.Sprintf("wal-%016X", uint64(info.EndLSN))); err != nil {
			return err
		}
		db.opts.Logf("recovery: the discarded WAL after LSN %X is kept in %s", uint64(info.EndLSN), wopts.TailAside)
	}
	db.log, err = wal.Open(db.fs, db.dir, info.EndLSN, wopts)
	if err != nil {
		return err
	}
	db.gate.log.Store(db.log)
	db.txns.SetLog(db.log)

	if err := db.resolveTruncations(); err != nil {
		return err
	}
	// Every relation the catalog names must exist before anything else
	// is touched: orphans are deleted only from a consistent directory.
	missing, err := db.missingRelations()
	if err != nil {
		return err
	}
	if err := db.sweepOrphans(missing, &info); err != nil {
		return err
	}
	if len(missing) > 0 {
		msg := fmt.Sprintf("%v: missing relation file %s", ErrCorrupt, strings.Join(missing, ", "))
		if len(info.OrphansQuarantined) > 0 {
			msg += fmt.Sprintf("; relation files %v the catalog does not name were moved to %s",
				info.OrphansQuarantined, filepath.Join(db.dir, QuarantineDirName))
		}
		return &corruptError{msg: msg}
	}
	db.sweepPositions()
	db.recovery = info
	db.replayEnd.Store(uint64(info.EndLSN))
	// A crash between a catalog switch's rename and its record lost the
	// record: log the catalog at every Open so standbys get it all the same.
	if err := db.logCatalog(db.cat); err != nil {
		return err
	}
	// Nothing created before this point is still being built: a standby may
	// sweep what its catalog does not name (sweepStandbyOrphans).
	if err := db.logEndOfRecovery(); err != nil {
		return err
	}
	return db.checkpoint(false, db.cat.NextOID)
}

// replay applies the WAL from start to its end and returns the start LSN
// of the last record it read (0 if none).
func (db *DB) replay(start wal.LSN, info *RecoveryInfo) (wal.LSN, error) {
	var lastStart wal.LSN
	rd, err := wal.NewReader(db.fs, db.dir, start, wal.Options{SegmentSize: db.opts.WALSegmentSize, Logf: db.opts.Logf})
	if err != nil {
		return 0, fmt.Errorf("recovery: %w", err)
	}
	defer func() { _ = rd.Close() }() // read-only: nothing to lose
	skip := newReplaySkip(db.cat, db.st)
	db.skip = skip // a standby's Follow goes on with what this replay learnt
	xidLimit := replayXIDLimit(db.txns.NextXID())
	env := &redo.Env{Pool: db.pool, Storage: db.st, Skip: skip.skip}
	info.EndLSN = start
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var cre *wal.CorruptRecordError
		if errors.As(err, &cre) {
			info.TornTail = cre
			break
		}
		if err != nil {
			return 0, fmt.Errorf("recovery: read WAL after LSN %X: %w", uint64(info.EndLSN), err)
		}
		if rec.XID != 0 {
			if err := checkReplayXID(rec.XID, xidLimit, rec.StartLSN); err != nil {
				return 0, err
			}
			db.txns.AdvanceNextXID(txn.XID(rec.XID) + 1)
			if rec.Rmgr != wal.RmgrXact {
				db.txns.NoteReplayXID(txn.XID(rec.XID))
			}
		}
		counted, err := db.redoRecord(env, skip, rec, xidLimit)
		if err != nil {
			return 0, fmt.Errorf("recovery: %w", err)
		}
		if counted {
			info.Replayed++
		}
		info.EndLSN, lastStart = rec.EndLSN, rec.StartLSN
	}
	if e := rd.EndLSN(); e > info.EndLSN {
		info.EndLSN = e
	}
	// A bad record (or a zeroed stretch) followed by valid records of the
	// same log is damage in the middle of the WAL, not its end: treating it
	// as the end would drop every later committed transaction.
	resume, err := rd.ResumeAfterEnd()
	if err != nil {
		return 0, fmt.Errorf("recovery: look past the end of the WAL at LSN %X: %w", uint64(info.EndLSN), err)
	}
	if resume != 0 {
		what := "ends"
		if info.TornTail != nil {
			what = "is damaged (" + info.TornTail.Error() + ")"
		}
		return 0, &corruptError{msg: fmt.Sprintf("%v: the WAL %s at LSN %X, but a valid record follows at LSN %X: damage in the middle of the log, not a torn end",
			ErrCorrupt, what, uint64(info.EndLSN), uint64(resume))}
	}
	return lastStart, nil
}

// redoRecord dispatches one record to its resource manager. It reports
// whether the record counts as replayed work (checkpoint records do not).
func (db *DB) redoRecord(env *redo.Env, skip *replaySkip, rec *wal.Record, xidLimit uint64) (bool, error) {
	switch rec.Rmgr {
	case wal.RmgrXLOG:
		if rec.Info == xlogCatalog {
			return true, db.redoCatalog(rec, skip)
		}
		if rec.Info == xlogEndOfRecovery {
			if len(rec.Main) != 0 || len(rec.Blocks) != 0 {
				return false, fmt.Errorf("end-of-recovery record at LSN %X carries %d bytes and %d blocks, want none",
					uint64(rec.StartLSN), len(rec.Main), len(rec.Blocks))
			}
			skip.endOfRecovery = rec.StartLSN
			return false, nil
		}
		if rec.Info == xlogCheckpoint {
			ck, err := decodeCheckpoint(rec.Main)
			if err != nil {
				return false, fmt.Errorf("record at LSN %X: %w", uint64(rec.StartLSN), err)
			}
			if ck.NextXID > 0 {
				if err := checkReplayXID(ck.NextXID-1, xidLimit, rec.StartLSN); err != nil {
					return false, err
				}
			}
			db.txns.AdvanceNextXID(txn.XID(ck.NextXID))
			return false, nil
		}
		return true, redoImages(env, rec)
	case wal.RmgrXact:
		return true, db.txns.Redo(rec)
	case wal.RmgrStorage:
		return true, db.redoStorage(rec, skip)
	}
	fn, ok := rmgrRedo[rec.Rmgr]
	if !ok {
		return false, fmt.Errorf("record at LSN %X has unknown resource manager %d", uint64(rec.StartLSN), rec.Rmgr)
	}
	return true, fn(env, rec)
}

// redoImages restores every full-page image of a record that carries
// nothing else (RmgrXLOG: the FPI written for a hint-bit change).
func redoImages(env *redo.Env, rec *wal.Record) error {
	for i := range rec.Blocks {
		b, act, err := redo.ReadBlock(env, rec, i)
		if err != nil {
			return err
		}
		switch act {
		case redo.Apply:
			// No image (should not happen for these records): nothing to apply.
			redo.Release(b)
		case redo.Done:
			redo.Release(b)
		}
	}
	return nil
}

// damaged marks a failure to read one of the files every data directory
// needs as ErrCorrupt when the file is missing or its content is invalid
// (not for I/O errors, which may be transient).
func damaged(err error) error {
	var clog *txn.CorruptClogError
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, wal.ErrCorruptControl) || errors.Is(err, catalog.ErrCorrupt) ||
		errors.Is(err, txn.ErrClogMissing) || errors.As(err, &clog) {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return err
}

// corruptError is ErrCorrupt with a message of its own.
type corruptError struct{ msg string }

func (e *corruptError) Error() string { return e.msg }

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *corruptError) Unwrap() error { return ErrCorrupt }

// maxReplayXIDAdvance bounds how far replay may move the next transaction
// id past the one recovery started with. The checkpointer takes a
// checkpoint whenever ids advance by xidCheckpointInterval, so the WAL of
// a real directory never holds a larger jump; a record beyond it is damage
// or forgery, and honouring it would grow the commit log (two bits per
// id, all in memory) by up to a gigabyte.
const maxReplayXIDAdvance = 1 << 24

// replayXIDLimit is the largest transaction id replay accepts.
func replayXIDLimit(start txn.XID) uint64 {
	return min(uint64(start)+maxReplayXIDAdvance, uint64(txn.MaxXID)-1)
}

// checkReplayXID refuses a transaction id beyond limit as corruption.
func checkReplayXID(xid, limit uint64, at wal.LSN) error {
	if xid > limit {
		return &corruptError{msg: fmt.Sprintf("%v: WAL record at LSN %X names transaction id %d, beyond the %d this directory can have reached",
			ErrCorrupt, uint64(at), xid, limit)}
	}
	return nil
}
