package runner

import (
	"context"

	"github.com/vacuumops/vacuum-operator/internal/cliflag"
	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

func cmdVacuum(ctx context.Context, args []string, env Env) error {
	return vacuumCLI(ctx, "vacuum", runnerwire.ModeLazy, args, env)
}

func cmdFull(ctx context.Context, args []string, env Env) error {
	return vacuumCLI(ctx, "full", runnerwire.ModeFull, args, env)
}

// vacuumCLI is `vacuum` and `full`: resolve the flags, check memory, open, vacuum, report.
func vacuumCLI(ctx context.Context, name string, mode runnerwire.Mode, args []string, env Env) (err error) {
	fs := cliflag.NewSet(name)
	vf := addVacuumFlags(fs, false)
	lockTimeout := fs.Duration("lock-timeout", 0, "how long to wait for a busy data directory")
	sf := addServerFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	spec := runnerwire.RunSpec{Mode: mode}
	vf.overlay(&spec)
	if fs.Changed("server") {
		return onlineCLI(ctx, spec, vf, sf, env)
	}
	r, err := resolveSpec(spec, true)
	if err != nil {
		return &UsageError{Msg: err.Error()}
	}
	if err := checkMemory(r); err != nil {
		return err
	}
	db, err := openDB(ctx, r.DataDir, recoveryGate(engine.Options{BufferPoolBytes: r.BufferPoolSize, Logf: engineLog(env.Stderr)},
		"", r.AllowCrashRecovery), *lockTimeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	tables, err := selectTables(db, r.Tables)
	if err != nil {
		return err
	}
	if err := makeSortDir(r); err != nil {
		return err
	}
	run, err := vacuum.NewBatch(optionsFrom(r))
	if err != nil {
		return &UsageError{Msg: err.Error()}
	}
	stop := func() {}
	if env.Terminal && !vf.json {
		stop = progressBar(env.Stderr, func() runnerwire.Progress { return progressFrom(run.Progress()) })
	}
	rep, verr := vacuumWindowed(ctx, db, run, r, tables, env.Stderr)
	stop()
	if vf.json {
		if err := writeJSON(env.Stdout, rep); err != nil {
			return err
		}
	} else if err := writeVerbose(env.Stdout, rep); err != nil {
		return err
	}
	return verr
}

// selectTables returns the tables to vacuum: the named ones (each must exist), or all.
func selectTables(db *engine.DB, names []string) ([]string, error) {
	all, err := db.Tables()
	if err != nil {
		return nil, err
	}
	exists := map[string]bool{}
	var every []string
	for _, t := range all {
		exists[t.Name] = true
		every = append(every, t.Name)
	}
	if len(names) == 0 {
		return every, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if !exists[n] {
			return nil, usagef("unknown table %q (the data directory has %d tables: %v)", n, len(every), every)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}
