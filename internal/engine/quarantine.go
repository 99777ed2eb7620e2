package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// QuarantineDirName is the directory of a data directory where Open moves
// the relation files no catalog entry names when the directory looks
// inconsistent, instead of deleting them, and the WAL tail recovery
// discards after a damaged record: one subdirectory each, named for its
// time (UTC) and content. Nothing in it is read by the engine; `vacuum-runner stats` reports its size and
// `vacuum-runner check --purge-quarantine` empties it.
const QuarantineDirName = "quarantine"

// uncertainSwitchName is a marker file in the data directory: a catalog
// switch of the session that wrote it may or may not have reached the
// disk (switchCatalog), so the relation files the surviving catalog does
// not name may be the other complete copy of a table. The next Open
// quarantines its orphans instead of deleting them, then removes the
// marker.
const uncertainSwitchName = "CATALOG_SWITCH_UNCERTAIN"

// QuarantineInfo is what the quarantine directory holds.
type QuarantineInfo struct {
	Dir   string // the quarantine directory
	Files int    // regular files in it, at any depth
	Bytes int64  // their total size
}

// Quarantine reports what the quarantine directory holds (zero values when
// it does not exist).
func (db *DB) Quarantine() (QuarantineInfo, error) {
	if db.closed.Load() {
		return QuarantineInfo{}, ErrClosed
	}
	return quarantineInfo(db.fs, db.dir)
}

func quarantineInfo(fsys vfs.FS, dir string) (QuarantineInfo, error) {
	qi := QuarantineInfo{Dir: filepath.Join(dir, QuarantineDirName)}
	err := walkFiles(fsys, qi.Dir, func(path string, size int64) error {
		qi.Files++
		qi.Bytes += size
		return nil
	})
	return qi, err
}

// PurgeQuarantine removes everything in the quarantine directory and
// returns what it held. The data directory's lock (held by the DB) keeps
// any other process from using the files meanwhile.
func (db *DB) PurgeQuarantine() (QuarantineInfo, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return QuarantineInfo{}, ErrClosed
	}
	qi, err := quarantineInfo(db.fs, db.dir)
	if err != nil {
		return qi, err
	}
	if err := removeTree(db.fs, qi.Dir); err != nil {
		return qi, fmt.Errorf("purge quarantine: %w", err)
	}
	if err := db.fs.SyncDir(db.dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return qi, fmt.Errorf("purge quarantine: fsync directory %s: %w", db.dir, err)
	}
	db.opts.Logf("purged the quarantine: %d files, %d bytes", qi.Files, qi.Bytes)
	return qi, nil
}

// walkFiles calls fn for every regular file under dir (none if dir does not exist).
func walkFiles(fsys vfs.FS, dir string, fn func(path string, size int64) error) error {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			if err := walkFiles(fsys, p, fn); err != nil {
				return err
			}
			continue
		}
		info, err := fsys.Stat(p)
		if err != nil {
			return fmt.Errorf("stat %s: %w", p, err)
		}
		if err := fn(p, info.Size()); err != nil {
			return err
		}
	}
	return nil
}

// removeTree removes dir and everything under it (nothing if it does not exist).
func removeTree(fsys vfs.FS, dir string) error {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			if err := removeTree(fsys, p); err != nil {
				return err
			}
			continue
		}
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	if err := fsys.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// sweepOrphans deals with the relation files no catalog entry names, after
// the catalog's own relations were checked (missing lists those whose main
// fork is absent). A consistent directory's orphans are the leftovers of
// work a crash interrupted (a CREATE or VACUUM FULL before its catalog
// switch, the old files after one) and are removed. When anything looks
// inconsistent (the catalog names a missing file, or the last session
// left a catalog switch of unknown outcome) they may be the only copy of
// a table, so they are moved into the quarantine directory instead.
// It reports what it removed or quarantined.
func (db *DB) sweepOrphans(missing []string, info *RecoveryInfo) error {
	rels := db.cat.Rels()
	list, err := db.st.List()
	if err != nil {
		return fmt.Errorf("list relation files: %w", err)
	}
	var orphans []storage.RelFileNode
	for _, r := range list {
		if !rels[r] {
			orphans = append(orphans, r)
			if uint32(r) >= db.cat.NextOID {
				db.cat.NextOID = uint32(r) + 1
			}
		}
	}
	var reasons []string
	if len(missing) > 0 {
		reasons = append(reasons, "the catalog names missing relation files ("+strings.Join(missing, ", ")+")")
	}
	marker := filepath.Join(db.dir, uncertainSwitchName)
	if b, err := readSmall(db.fs, marker); err == nil {
		reasons = append(reasons, "the last session's catalog switch may not have reached the disk ("+strings.TrimSpace(string(b))+")")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", marker, err)
	}
	if len(orphans) == 0 {
		return db.removeMarker(marker, len(missing) == 0)
	}
	if err := db.disposeOrphans("", orphans, reasons, info); err != nil {
		return err
	}
	return db.removeMarker(marker, len(missing) == 0)
}

// disposeOrphans removes the relation files orphans when reasons is empty (the
// directory is consistent) and moves them into a new quarantine subdirectory
// otherwise, recording which in info; what (may be empty) says when, for the log.
func (db *DB) disposeOrphans(what string, orphans []storage.RelFileNode, reasons []string, info *RecoveryInfo) error {
	if what != "" {
		what = " " + what
	}
	if len(reasons) == 0 {
		for _, r := range orphans {
			db.forgetHandle(r)
			db.pool.DropRel(r)
			if err := db.st.Drop(r); err != nil {
				return fmt.Errorf("remove orphan relation %d: %w", r, err)
			}
			info.OrphansRemoved = append(info.OrphansRemoved, r)
		}
		db.opts.Logf("removed orphan relation files %v%s", orphans, what)
		return nil
	}
	qdir, err := db.makeQuarantineDir("relations")
	if err != nil {
		return err
	}
	for _, r := range orphans {
		db.forgetHandle(r)
		db.pool.DropRel(r)
		if _, err := db.st.MoveOut(r, qdir); err != nil {
			return fmt.Errorf("quarantine orphan relation %d: %w", r, err)
		}
		info.OrphansQuarantined = append(info.OrphansQuarantined, r)
	}
	// The renames are durable once both directories are fsynced.
	for _, d := range []string{qdir, filepath.Join(db.dir, "base")} {
		if err := db.fs.SyncDir(d); err != nil {
			db.fail(err)
			return fmt.Errorf("quarantine: fsync directory %s: %w", d, err)
		}
	}
	info.QuarantineReason = strings.Join(reasons, "; ")
	db.opts.Logf("quarantined orphan relation files %v%s in %s, since %s; `vacuum-runner check --purge-quarantine` removes them",
		orphans, what, qdir, info.QuarantineReason)
	return nil
}

// makeQuarantineDir creates a new subdirectory of the quarantine, named
// for the time and what (and fsyncs its parents so it persists).
func (db *DB) makeQuarantineDir(what string) (string, error) {
	q := filepath.Join(db.dir, QuarantineDirName)
	d := filepath.Join(q, time.Now().UTC().Format("20060102T150405.000000000Z")+"-"+what)
	if err := db.fs.MkdirAll(d, 0o700); err != nil {
		return "", fmt.Errorf("create quarantine directory: %w", err)
	}
	for _, p := range []string{q, db.dir} {
		if err := db.fs.SyncDir(p); err != nil {
			return "", fmt.Errorf("create quarantine directory: fsync %s: %w", p, err)
		}
	}
	return d, nil
}

// removeMarker removes the uncertain-switch marker once its orphans are
// dealt with (when do is set).
func (db *DB) removeMarker(marker string, do bool) error {
	if !do {
		return nil
	}
	if err := db.fs.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", marker, err)
	}
	return nil
}

// markSwitchUncertain writes the uncertain-switch marker (best effort:
// the directory's fsync has just failed once, so it may not persist
// either; the DB is failed sticky regardless).
func (db *DB) markSwitchUncertain(what string, cause error) {
	msg := fmt.Sprintf("%s at %s: %v\n", what, time.Now().UTC().Format(time.RFC3339), cause)
	if err := vfs.WriteFileAtomic(db.fs, db.dir, uncertainSwitchName, uncertainSwitchName+".tmp", []byte(msg)); err != nil {
		db.opts.Logf("%s: cannot record the uncertain switch: %v", what, err)
	}
}

// readSmall reads a small file whole.
func readSmall(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, min(size, 4096))
	n, err := f.ReadAt(b, 0)
	if n == len(b) {
		err = nil
	}
	return b[:n], err
}
