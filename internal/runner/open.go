package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// lockPoll is how often a runner waiting for a busy data directory retries.
const lockPoll = 100 * time.Millisecond

// openDB opens dir, waiting up to lockTimeout for another holder of its lock to let go, and
// giving up at once when ctx is cancelled (the engine's own wait cannot be cancelled, so
// the runner polls with a zero engine timeout).
func openDB(ctx context.Context, dir string, opts engine.Options, lockTimeout time.Duration) (*engine.DB, error) {
	opts.LockTimeout = 0
	deadline := time.Now().Add(lockTimeout)
	for {
		db, err := engine.Open(dir, opts)
		if err == nil {
			return db, nil
		}
		if errors.Is(err, engine.ErrNotDataDir) {
			return nil, fmt.Errorf("%s is not a data directory (create one with vacuum-runner init): %w", dir, err)
		}
		if !errors.Is(err, engine.ErrInUse) {
			return nil, err
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("data directory %s is busy: still locked by another process after waiting %v: %w",
				dir, lockTimeout, engine.ErrInUse)
		}
		t := time.NewTimer(min(lockPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("waiting for data directory %s: %w", dir, ctx.Err())
		case <-t.C:
		}
	}
}

// recoveryGate returns the engine's Opener and AllowRecovery for a runner: the opener names
// the run (runID, the VacuumRun's UID; empty outside a run, for the CLI commands), and
// crash recovery is allowed when allow is set or the last opener was an earlier attempt of
// the same run. Otherwise the app's own engine should recover its directory: Open fails
// with engine.ErrRecoveryRefused (exit 7) and changes nothing.
func recoveryGate(opts engine.Options, runID string, allow bool) engine.Options {
	opts.Opener = "vacuum-runner"
	if runID != "" {
		opts.Opener = "vacuum-runner run " + runID
	}
	opts.AllowRecovery = func(last string) bool {
		return allow || (runID != "" && last == opts.Opener)
	}
	return opts
}

// closeDB closes db and joins its error to err. After a recovered panic it does not: the
// panic may have left a lock or a page half changed, and Close's checkpoint could wait on it
// forever or write it out. The process exits instead (the lock goes with it) and the next
// attempt of the run recovers the directory from the WAL.
func closeDB(db *engine.DB, err *error) {
	if isPanic(*err) {
		return
	}
	if cerr := db.Close(); cerr != nil && *err == nil {
		*err = fmt.Errorf("close data directory: %w", cerr)
	}
}

// engineLog returns an engine Logf writing to w with a prefix.
func engineLog(w io.Writer) func(string, ...any) {
	return func(format string, args ...any) {
		_, _ = fmt.Fprintf(w, "vacuum-runner: engine: "+format+"\n", args...)
	}
}

// readLimited reads at most limit+1 bytes of r (the caller rejects more than limit).
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	return io.ReadAll(io.LimitReader(r, limit+1))
}
