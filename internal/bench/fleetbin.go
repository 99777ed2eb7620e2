package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/vacuumops/vacuum-operator/internal/devcluster"
)

// fleetBinCache is where experiment 12 builds its commands, under the repository: go build
// skips the link of a binary there that is already up to date, which a fresh directory
// never is (the manager's link alone took 7-9 s of every run on the project's machine,
// against about 1 s to find both binaries current). The repository's /bin/ is ignored by
// git and emptied by make clean.
const fleetBinCache = "bin/vacbench-fleet"

// fleetBinaries builds names (./cmd/NAME) into fleetBinCache of repo and links or copies
// them into dir, whose files are then this run's own: a later build that replaces the
// cached ones (go build removes a stale target before writing it, or renames over it)
// leaves them as they were. A lock file beside the cache serialises the builds and links of
// runs that share the repository (a vacbench run beside the quick test). Should the cache
// be unusable (a read-only checkout), it builds straight into dir, as before.
func fleetBinaries(ctx context.Context, repo, dir string, names ...string) error {
	cache := filepath.Join(repo, fleetBinCache)
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return devcluster.Build(ctx, repo, dir, names...)
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return devcluster.Build(ctx, repo, dir, names...)
	}
	defer func() { _ = lock.Close() }() // closing it releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if err := devcluster.Build(ctx, repo, cache, names...); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, n := range names {
		if err := linkOrCopy(filepath.Join(cache, n), filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

// linkOrCopy makes dst a hard link to the executable src, or a copy of it where src is on
// another file system; a dst already there (a work directory used again) is replaced.
func linkOrCopy(src, dst string) error {
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	err := os.Link(src, dst)
	if err == nil || !errors.Is(err, syscall.EXDEV) {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}
