package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces dir/name with data so that a crash or power loss at any moment
// leaves either the old file or the new one, complete: it writes dir/tmpName, fsyncs it,
// renames it over dir/name and fsyncs dir. A stale dir/tmpName from an earlier crash is
// truncated and reused. The caller picks tmpName so readers can ignore (or remove) it.
func WriteFileAtomic(fsys FS, dir, name, tmpName string, data []byte) error {
	tmp := filepath.Join(dir, tmpName)
	path := filepath.Join(dir, name)
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("write %s: %w", tmp, errors.Join(err, f.Close()))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, errors.Join(err, f.Close()))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}
