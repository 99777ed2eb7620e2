package bulkdata

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// ColdRun is one timed VACUUM of Table on a fresh copy (VacuumCold).
type ColdRun struct {
	Seconds     float64 // the VACUUM alone, wall clock
	CPUSeconds  float64 // process CPU (user + system) during it
	Cold        bool    // the OS page cache was dropped before it
	Direct      bool    // every relation file was opened with O_DIRECT
	Checkpoints int64   // checkpoints during it
	Report      *vacuum.Report
}

// VacuumCold copies the data directory src to dir, drops the OS page cache
// when it may (Cold says whether it did), opens the copy with opts and
// times one VACUUM of Table with vopts. The copy is closed, not removed.
// Process CPU counts every goroutine of the process: run nothing else in
// it meanwhile.
func VacuumCold(ctx context.Context, src, dir string, opts engine.Options, vopts vacuum.Options) (ColdRun, error) {
	var r ColdRun
	if err := engine.CopyDataDir(src, dir); err != nil {
		return r, fmt.Errorf("bulkdata: %w", err)
	}
	switch err := DropCaches(); {
	case err == nil:
		r.Cold = true
	case !errors.Is(err, ErrCannotDropCaches):
		return r, err
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		return r, fmt.Errorf("bulkdata: %w", err)
	}
	r.Direct = db.RuntimeStats().Direct
	ckpt0 := db.RuntimeStats().Checkpoints
	c0, t0 := CPUTime(), time.Now()
	rep, err := db.Vacuum(ctx, Table, vopts)
	r.Seconds = time.Since(t0).Seconds()
	r.CPUSeconds = (CPUTime() - c0).Seconds()
	r.Checkpoints = db.RuntimeStats().Checkpoints - ckpt0
	r.Report = rep
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err == nil && rep.TuplesRemoved == 0 {
		err = fmt.Errorf("bulkdata: the vacuum removed no tuples: %+v", rep)
	}
	return r, err
}

// CPUTime is the process's CPU time so far (user + system).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
