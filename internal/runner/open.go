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
// giving up at once when ctx is canceled (the engine's own wait cannot be canceled, so
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

// closeDB closes db and joins its error to err.
func closeDB(db *engine.DB, err *error) {
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
