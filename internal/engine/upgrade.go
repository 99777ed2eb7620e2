package engine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// UpgradeResult says what Upgrade did.
type UpgradeResult struct {
	From, To uint32 // format versions before and after
	// Upgraded is false when the directory already had this build's
	// version (Upgrade is idempotent).
	Upgraded bool
}

// Upgrade brings the data directory at dir from an older format version
// to DataVersion, in place. It rewrites the catalog in this version, then
// the control file's version. From version 1 the types take their new
// names (int64 becomes int8, bytes becomes bytea: catalog.DecodeV1); from
// version 1 or 2 an index's one key column becomes its list of key
// columns (catalog.DecodeV2); from version 3 only the control file's
// version changes (the catalog keeps its version 3; the WAL of version 3
// has no relation file records, and replay of it does without them, as
// before). Rows, WAL and index pages stay as they are:
// a row without NULLs is the same bytes in every version (package row),
// and B-tree pages of layout 1 (every index made before version 3) keep
// working beside the layout-2 pages of new indexes (package btree;
// VACUUM FULL rebuilds an index in layout 2). A directory that was not
// shut down cleanly is recovered by the next Open as usual. WAL segments
// named in the older format (16 hex digits of the start LSN) are renamed
// as PostgreSQL names them (wal.RenameOldSegments) first, whatever the
// version.
//
// Each of the two steps replaces one file atomically (vfs.WriteFileAtomic),
// catalog first: a crash between them leaves a new catalog under an old
// control file, which Open still refuses and which a second Upgrade
// finishes. Upgrade of a directory already at DataVersion does
// nothing. It takes the directory's lock (ErrInUse after
// opts.LockTimeout), like Open.
func Upgrade(dir string, opts Options) (UpgradeResult, error) {
	opts = opts.withDefaults()
	fsys := opts.FS
	if _, err := fsys.Stat(filepath.Join(dir, wal.ControlFileName)); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return UpgradeResult{}, fmt.Errorf("upgrade %s: no control file: %w", dir, ErrNotDataDir)
		}
		return UpgradeResult{}, fmt.Errorf("upgrade %s: %w", dir, err)
	}
	lk, err := takeLock(fsys, dir, opts.LockTimeout)
	if err != nil {
		return UpgradeResult{}, err
	}
	defer func() { _ = lk.Close() }() // releasing the lock cannot lose data
	res, err := upgrade(opts, dir)
	if err != nil {
		return res, fmt.Errorf("upgrade %s: %w", dir, err)
	}
	return res, nil
}

func upgrade(opts Options, dir string) (UpgradeResult, error) {
	fsys := opts.FS
	ctl, err := wal.ReadControl(fsys, dir)
	if err != nil {
		if errors.Is(err, wal.ErrUnsupportedVersion) {
			return UpgradeResult{}, fmt.Errorf("%v: %w", err, ErrUnsupportedVersion)
		}
		return UpgradeResult{}, damaged(err)
	}
	res := UpgradeResult{From: ctl.Version, To: DataVersion}
	if ctl.Version <= DataVersion {
		size := opts.WALSegmentSize
		if size == 0 {
			size = wal.DefaultSegmentSize
		}
		n, err := wal.RenameOldSegments(fsys, dir, size)
		if err != nil {
			return res, err
		}
		if n > 0 {
			res.Upgraded = true
			opts.Logf("upgrade %s: %d WAL segments renamed as PostgreSQL names them", dir, n)
		}
	}
	switch {
	case ctl.Version == DataVersion:
		if _, err := catalog.Load(fsys, dir); err != nil {
			return res, damaged(err)
		}
		return res, nil
	case ctl.Version > DataVersion || ctl.Version < 1:
		return res, versionError(ctl.Version)
	}
	b, err := readFile(opts, filepath.Join(dir, catalog.FileName))
	if err != nil {
		return res, damaged(err)
	}
	cv, err := catalog.VersionOf(b)
	if err != nil {
		return res, damaged(err)
	}
	switch cv {
	case 1:
		cat, err := catalog.DecodeV1(b)
		if err != nil {
			return res, damaged(err)
		}
		if err := catalog.Save(fsys, dir, cat); err != nil {
			return res, err
		}
		opts.Logf("upgrade %s: catalog rewritten in version %d", dir, catalog.Version)
	case 2:
		cat, err := catalog.DecodeV2(b)
		if err != nil {
			return res, damaged(err)
		}
		if err := catalog.Save(fsys, dir, cat); err != nil {
			return res, err
		}
		opts.Logf("upgrade %s: catalog rewritten in version %d", dir, catalog.Version)
	case catalog.Version:
		// A version-3 directory (its catalog is already of this version), or
		// an earlier Upgrade rewrote the catalog and stopped before the
		// control file.
		if _, err := catalog.Decode(b); err != nil {
			return res, damaged(err)
		}
	default:
		return res, fmt.Errorf("catalog version %d under a version-%d control file: %w", cv, ctl.Version, ErrCorrupt)
	}
	ctl.Version = DataVersion
	if err := wal.WriteControl(fsys, dir, ctl); err != nil {
		return res, err
	}
	res.Upgraded = true
	opts.Logf("upgrade %s: data directory version %d -> %d", dir, res.From, res.To)
	return res, nil
}

const maxSmallFile = 128 << 20

// readFile reads a whole (small) file through opts.FS.
func readFile(opts Options, path string) ([]byte, error) {
	f, err := opts.FS.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > maxSmallFile {
		return nil, fmt.Errorf("%s is %d bytes, more than a catalog can be", path, size)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}
