package engine

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// catalogSwitch is one change of the catalog that adds and retires
// relation files: CREATE TABLE (created: the new heap), CREATE INDEX
// (created: the built index), VACUUM FULL's swap (created: the rewritten
// heap and indexes; retired: the old ones), DROP TABLE (retired: the
// table's files) and TRUNCATE (created: the empty files; retired: the old
// ones). The created files must already be durable (fsynced with their
// directory entries, or WAL-logged and flushed) when it is applied.
type catalogSwitch struct {
	what    string           // for messages: `create table "t"`, `swap "t"`, ...
	next    *catalog.Catalog // the catalog after the change
	created []storage.RelFileNode
	retired []storage.RelFileNode
}

// switchCatalog applies sw: it is the only way a change of the catalog
// that adds or retires relation files reaches the disk. The caller holds
// db.mu exclusively. It replaces the catalog file atomically
// (catalog.Save) and then has exactly one of three outcomes:
//
//   - switched (nil error): memory takes sw.next and the retired files are
//     removed (best effort: one left behind is an orphan the next Open
//     handles).
//   - not switched (the save failed before its rename, so the file on disk
//     is the old catalog, even after a crash): memory keeps the old
//     catalog, the created files are removed, and the error is returned;
//     the DB carries on.
//   - maybe switched (the rename itself or the directory fsync after it
//     failed): the directory may name either catalog, and a power loss may
//     still revert a rename that is visible now. Nothing is removed, since
//     either file set may be the table's only copy. Memory takes whichever
//     catalog the file holds now, and the DB fails sticky, as PostgreSQL
//     PANICs on a failed fsync: every later write, commit and checkpoint
//     returns ErrNeedsRecovery, so the directory is reopened, and that
//     Open reads the catalog that survived and quarantines the other set
//     (a marker file tells it to; see sweepOrphans).
//
// Deleting files the disk's catalog may name is what lost a whole table
// to one EIO on a directory fsync (the security review's E1), so no error
// path after the rename may ever remove one.
func (db *DB) switchCatalog(sw catalogSwitch) error {
	if err := db.writable(); err != nil {
		db.abandonRels(sw.what, sw.created)
		return fmt.Errorf("%s: %w", sw.what, err)
	}
	sw.next.Seq = db.cat.Seq + 1
	err := catalog.Save(db.fs, db.dir, sw.next)
	if err == nil {
		db.setCatalog(sw.next)
		db.dropRels(sw.what, sw.retired)
		// The switch is durable: log it for standbys. Without its record a
		// standby would never name the new files, so a failure here fails the
		// DB sticky, and the reopen logs the catalog again (start).
		if err := db.logCatalog(sw.next); err != nil {
			db.fail(err)
			return fmt.Errorf("%s: switched, but not logged for standbys: %w: %w", sw.what, ErrNeedsRecovery, err)
		}
		return nil
	}
	if !vfs.MaybeReplaced(err) {
		db.abandonRels(sw.what, sw.created)
		return fmt.Errorf("%s: %w", sw.what, err)
	}
	if db.catalogOnDiskIs(sw.next) {
		db.setCatalog(sw.next)
	}
	db.fail(err)
	db.markSwitchUncertain(sw.what, err)
	return fmt.Errorf("%s: catalog switch may or may not be durable, no file removed: %w: %w", sw.what, ErrNeedsRecovery, err)
}

// catalogOnDiskIs reports whether the catalog file now holds exactly c
// (after a save whose outcome is unknown).
func (db *DB) catalogOnDiskIs(c *catalog.Catalog) bool {
	onDisk, err := catalog.Load(db.fs, db.dir)
	if err != nil {
		db.opts.Logf("catalog switch: cannot read back the catalog: %v", err)
		return false
	}
	a, err1 := catalog.Encode(onDisk)
	b, err2 := catalog.Encode(c)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}

// dropRels forgets and removes relation files no catalog on disk names
// (best effort: a file left behind is an orphan the next Open handles).
func (db *DB) dropRels(what string, rels []storage.RelFileNode) {
	var errs []error
	for _, r := range rels {
		db.forgetHandle(r)
		db.pool.DropRel(r)
		if err := db.st.Drop(r); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		db.opts.Logf("%s: files left for the next Open: %v", what, err)
	}
}

// fail makes the DB refuse every later write, commit and checkpoint with
// ErrNeedsRecovery wrapping err (the first failure is kept): err is a
// failed fsync, or a catalog, control file or commit log replace whose
// outcome is unknown. Only a reopen, which recovers from what is on disk,
// clears it.
func (db *DB) fail(err error) {
	db.failed.CompareAndSwap(nil, &err)
}

// failIfSyncFailed fails the DB sticky when err is the storage manager's
// sticky fsync failure, and returns err.
func (db *DB) failIfSyncFailed(err error) error {
	var sf *storage.SyncFailedError
	if errors.As(err, &sf) {
		db.fail(err)
	}
	return err
}

// failIfMaybeReplaced fails the DB sticky when err is an atomic replace
// (control file, commit log) that may have taken effect, and returns err.
func (db *DB) failIfMaybeReplaced(err error) error {
	if vfs.MaybeReplaced(err) {
		db.fail(err)
	}
	return err
}
