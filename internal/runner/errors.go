package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// UsageError is bad input the user can fix: a flag, a spec, a table name. Exit code 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// usagef returns a *UsageError with a formatted message.
func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// CorruptionError is corruption found by check (or by a vacuum reading a damaged page):
// each problem names a file and a block. Exit code 4.
type CorruptionError struct {
	Problems []engine.Problem
}

func (e *CorruptionError) Error() string {
	if len(e.Problems) == 0 {
		return "corruption found"
	}
	p := e.Problems[0]
	more := ""
	if n := len(e.Problems) - 1; n > 0 {
		more = fmt.Sprintf(" (and %d more problems)", n)
	}
	return fmt.Sprintf("corruption: %s block %d: %s%s", p.File, p.Block, p.Message, more)
}

// MemoryError says the run would not fit under the cgroup memory limit. Exit code 2.
type MemoryError struct {
	Need, Limit int64
	File        string
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("not enough memory: the run needs %s (buffer pool + parallelism x maintenance memory + 64Mi) "+
		"but the cgroup memory limit in %s is %s; lower --buffer-pool, --parallelism or --maintenance-work-mem",
		quantity(e.Need), e.File, quantity(e.Limit))
}

// exitCode is the one place that decides the exit code of an error; bySignal says whether
// a signal stopped the run.
func exitCode(err error, bySignal bool) int {
	var (
		usage   *UsageError
		mem     *MemoryError
		corrupt *CorruptionError
		cpe     *storage.CorruptPageError
		cse     *page.ChecksumError
		field   *online.FieldError
	)
	switch {
	case err == nil:
		return runnerwire.ExitOK
	case isPanic(err):
		return runnerwire.ExitInternal
	case errors.As(err, &usage), errors.As(err, &mem),
		errors.Is(err, engine.ErrNotDataDir), errors.Is(err, engine.ErrUnsupportedVersion),
		errors.Is(err, engine.ErrNoSuchTable), errors.Is(err, engine.ErrAlreadyInitialised),
		errors.As(err, &field), errors.Is(err, online.ErrAuth), errors.Is(err, online.ErrUnsupportedServer):
		return runnerwire.ExitBadInput
	case errors.Is(err, engine.ErrRecoveryRefused):
		return runnerwire.ExitNeedsRecovery
	case errors.Is(err, engine.ErrInUse), errors.Is(err, vacuum.ErrVacuumInProgress),
		errors.Is(err, online.ErrUnreachable), errors.Is(err, online.ErrOtherServer):
		return runnerwire.ExitBusy
	case errors.As(err, &corrupt), errors.As(err, &cpe), errors.As(err, &cse), errors.Is(err, engine.ErrCorrupt):
		return runnerwire.ExitCorruption
	case errors.Is(err, vacuum.ErrNoSpace), errors.Is(err, syscall.ENOSPC), errors.Is(err, online.ErrNoSpace):
		return runnerwire.ExitNoSpace
	case bySignal || errors.Is(err, context.Canceled):
		return runnerwire.ExitCancelled
	case errors.Is(err, engine.ErrNeedsRecovery):
		// A failed fsync or an uncertain catalog switch in the middle of the run: the
		// directory needs crash recovery, and its last opener is this run. Exit 1 is
		// retried, and the retry, a later attempt of the same run, passes the recovery gate
		// and recovers it, as PostgreSQL restarts and recovers after such a PANIC. It is not
		// exit 7, which is for a directory some other opener left needing recovery.
		return runnerwire.ExitInternal
	}
	return runnerwire.ExitInternal
}

// oneLine flattens an error message (errors.Join uses newlines) for stderr and summaries.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
