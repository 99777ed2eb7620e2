package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// AtomicStep is one step of WriteFileAtomic, named in its errors.
type AtomicStep int

// The steps of WriteFileAtomic, in order.
const (
	StepCreate  AtomicStep = iota + 1 // create or truncate the temporary file
	StepWrite                         // write the data into it
	StepSync                          // fsync it
	StepClose                         // close it
	StepRename                        // rename it over the target
	StepSyncDir                       // fsync the directory
)

var stepNames = map[AtomicStep]string{StepCreate: "create", StepWrite: "write", StepSync: "fsync",
	StepClose: "close", StepRename: "rename", StepSyncDir: "fsync directory"}

// String names the step.
func (s AtomicStep) String() string {
	if n, ok := stepNames[s]; ok {
		return n
	}
	return fmt.Sprintf("step %d", int(s))
}

// AtomicWriteError is WriteFileAtomic's failure: which step failed, on
// which path. Before StepRename the target still holds the old contents,
// on disk and after any crash. From StepRename on the replace may have
// happened (a failed rename can still have reached the directory on some
// file systems; after a failed directory fsync the rename is visible but
// a power loss may revert it): the target holds the old or the new
// contents, and the caller cannot tell which one survives a crash.
type AtomicWriteError struct {
	Step AtomicStep
	Path string // the file or directory the step acted on
	Err  error
}

func (e *AtomicWriteError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Step, e.Path, e.Err)
}

// Unwrap returns the underlying error.
func (e *AtomicWriteError) Unwrap() error { return e.Err }

// MaybeReplaced reports whether the failed replace may have taken effect.
func (e *AtomicWriteError) MaybeReplaced() bool { return e.Step >= StepRename }

// MaybeReplaced reports whether err is (or wraps) a WriteFileAtomic failure
// after which the target may hold the new contents: the caller must treat
// the replace as possibly done (never undo what it depends on) and, since
// a crash may still revert it, stop acknowledging writes until the data
// directory is reopened.
func MaybeReplaced(err error) bool {
	var ae *AtomicWriteError
	return errors.As(err, &ae) && ae.MaybeReplaced()
}

// WriteFileAtomic replaces dir/name with data so that a crash or power loss at any moment
// leaves either the old file or the new one, complete: it writes dir/tmpName, fsyncs it,
// renames it over dir/name and fsyncs dir. A stale dir/tmpName from an earlier crash is
// truncated and reused. The caller picks tmpName so readers can ignore (or remove) it.
// A failure is an *AtomicWriteError naming the step; see MaybeReplaced.
func WriteFileAtomic(fsys FS, dir, name, tmpName string, data []byte) error {
	tmp := filepath.Join(dir, tmpName)
	path := filepath.Join(dir, name)
	fail := func(step AtomicStep, p string, err error) error {
		return &AtomicWriteError{Step: step, Path: p, Err: err}
	}
	f, err := fsys.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fail(StepCreate, tmp, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return fail(StepWrite, tmp, errors.Join(err, f.Close()))
	}
	if err := f.Sync(); err != nil {
		return fail(StepSync, tmp, errors.Join(err, f.Close()))
	}
	if err := f.Close(); err != nil {
		return fail(StepClose, tmp, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fail(StepRename, tmp+" to "+path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fail(StepSyncDir, dir, err)
	}
	return nil
}
