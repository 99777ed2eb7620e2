package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// This file is the online face of `vacuum`, `full` and `run`: a server target instead of a
// data directory (package online does the work).

// serverFlags are the connection flags of `vacuum --server` and `full --server` (libpq's
// conventions). `run` has none: in a pod everything comes from the RunSpec.
type serverFlags struct {
	server, database, user, passwordFile, sslmode, sslrootcert string
}

func addServerFlags(fs *pflag.FlagSet) *serverFlags {
	f := &serverFlags{}
	fs.StringVar(&f.server, "server", "", "HOST:PORT of a running PostgreSQL or engine server to vacuum online (instead of --data)")
	fs.StringVar(&f.database, "database", "", "database to vacuum (with --server)")
	fs.StringVar(&f.user, "user", "", "role to connect as (default $PGUSER, else the OS user)")
	fs.StringVar(&f.passwordFile, "password-file", "", "file holding the password (default $PGPASSWORD, else ~/.pgpass)")
	fs.StringVar(&f.sslmode, "sslmode", online.DefaultSSLMode, "disable, require, verify-ca or verify-full")
	fs.StringVar(&f.sslrootcert, "sslrootcert", "", "CA bundle that verify-ca and verify-full check the server against")
	return f
}

// flagOfOnlineField names the flag of a connection field of package online.
var flagOfOnlineField = map[string]string{
	"server": "--server", "database": "--database", "user": "--user", "passwordFile": "--password-file",
	"sslmode": "--sslmode", "sslrootcert": "--sslrootcert",
}

// specOfOnlineField names the RunSpec field of a connection field of package online.
var specOfOnlineField = map[string]string{
	"server": "server.address", "database": "server.database", "user": "server.user",
	"passwordFile": "server.passwordFile", "userFile": "server.userFile", "sslmode": "server.sslMode", "sslrootcert": "server.sslRootCertFile",
}

// onlineCLI is `vacuum --server` and `full --server`: a vacuumdb with a rate throttle,
// progress and the VERBOSE report.
func onlineCLI(ctx context.Context, spec runnerwire.RunSpec, vf *vacuumFlags, sf *serverFlags, env Env) error {
	if vf.fs.Changed("data") {
		return usagef("give --data (a data directory) or --server (a running server), not both")
	}
	if vf.fs.Changed("lock-timeout") {
		return usagef("--lock-timeout is for a data directory; a server target has none")
	}
	spec.Server = &runnerwire.ServerTarget{Address: sf.server, Database: sf.database, User: sf.user,
		PasswordFile: sf.passwordFile, SSLMode: sf.sslmode, SSLRootCertFile: sf.sslrootcert}
	r, err := resolveSpec(spec, true)
	if err != nil {
		return err
	}
	t := onlineTarget(*spec.Server)
	t.NoEnvironment = false // the laptop face reads PGUSER, PGPASSWORD and ~/.pgpass
	run, err := startOnline(ctx, spec, r, true, t)
	if err != nil {
		return err
	}
	defer func() { _ = run.Close() }() // the control session; the report is what matters
	stop := func() {}
	if env.Terminal && !vf.json {
		stop = progressBar(env.Stderr, run.Progress)
	}
	rep, verr := vacuumOnlineWindowed(ctx, run, r, env.Stderr)
	stop()
	if vf.json {
		if err := writeJSON(env.Stdout, rep); err != nil {
			return err
		}
	} else {
		if _, err := fmt.Fprintf(env.Stdout, "server: %s\n\n", run.Server()); err != nil {
			return err
		}
		if err := writeVerbose(env.Stdout, rep); err != nil {
			return err
		}
	}
	return verr
}

// vacuumServer is `run` with a server target: the run is published to the HTTP endpoints
// (a PUT /throttle before it started applies from its first table) and the server's notices
// go to the log, since the Summary leaves them out.
func vacuumServer(ctx context.Context, spec runnerwire.RunSpec, r runnerwire.Resolved, fromFlags bool,
	t online.Target, state *runState) (runnerwire.Report, error) {
	if p := state.takePending(); p != nil {
		r.Throttle = *p
	}
	if a := state.takePendingAdaptive(); a != nil {
		r.Adaptive = *a
	}
	run, err := startOnline(ctx, spec, r, fromFlags, t)
	if err != nil {
		return reportFrom(nil), err
	}
	defer func() { _ = run.Close() }() // the control session; the report is what matters
	state.logf("vacuuming %d tables of database %q on %s (%s)", len(run.Tables()), t.Database, run.Server(), t.Address)
	state.setActive(run)
	rep, err := vacuumOnlineWindowed(ctx, run, r, state.stderr())
	for _, tr := range rep.Tables {
		for _, n := range tr.Notices {
			state.logf("%s: %s", tr.Table, strings.ReplaceAll(n, "\n", "; "))
		}
	}
	return rep, err
}

// vacuumOnlineWindowed runs an online vacuum within r's window: at StopAt the server's
// VACUUMs are cancelled (the engine server records each table's position then) and the run
// ends without error, StopReason WindowClosed. A PostgreSQL server cannot resume: with
// Resume its tables start at block 0 and the report says so.
func vacuumOnlineWindowed(ctx context.Context, run *online.Run, r runnerwire.Resolved, stderr io.Writer) (runnerwire.Report, error) {
	wctx, cancel := windowContext(ctx, r.StopAt)
	defer cancel()
	rep, err := run.Vacuum(wctx)
	if r.Resume && run.Server().Kind == online.KindPostgreSQL {
		rep.ResumeNote = fmt.Sprintf("%s cannot resume a vacuum: every table started at block 0", run.Server())
		_, _ = fmt.Fprintf(stderr, "vacuum-runner: %s\n", rep.ResumeNote)
	}
	if err != nil && windowClosed(ctx, wctx) {
		rep.StopReason, err = runnerwire.StopReasonWindowClosed, nil
	}
	return rep, err
}

// onlineTarget is the connection of a RunSpec's server target, as a pod makes it: nothing
// from the environment.
func onlineTarget(s runnerwire.ServerTarget) online.Target {
	return online.Target{Address: s.Address, Database: s.Database, User: s.User, UserFile: s.UserFile,
		PasswordFile: s.PasswordFile, SSLMode: s.SSLMode, SSLRootCert: s.SSLRootCertFile, NoEnvironment: true}
}

// identifyServer is `run` with identify set: connect, read the server's version and system
// identifier, vacuum nothing. The report carries them to the summary.
func identifyServer(ctx context.Context, t online.Target) (runnerwire.Report, error) {
	rep := reportFrom(nil)
	id, err := online.Identify(ctx, t)
	if err != nil {
		return rep, fieldsNamed(err, false)
	}
	rep.Server = &runnerwire.ServerIdentity{Kind: string(id.Server.Kind), Version: id.Server.Version,
		SystemIdentifier: id.SystemIdentifier}
	return rep, nil
}

// startOnline connects, detects the server, checks the fields written against it and
// picks the tables. Errors naming a field name the flag (fromFlags) or the RunSpec field.
func startOnline(ctx context.Context, spec runnerwire.RunSpec, r runnerwire.Resolved, fromFlags bool, t online.Target) (*online.Run, error) {
	run, err := online.New(ctx, t, onlineOptions(spec, r))
	if err != nil {
		return nil, fieldsNamed(err, fromFlags)
	}
	return run, nil
}

// onlineOptions turns a resolved RunSpec into online options: the cost throttle always
// (with its defaults, as the engine's vacuum), the other settings only when written.
func onlineOptions(spec runnerwire.RunSpec, r runnerwire.Resolved) online.Options {
	o := online.Options{
		Full: r.Mode == runnerwire.ModeFull, Tables: r.Tables, Throttle: r.Throttle,
		TableThrottles: r.TableThrottles, Adaptive: r.Adaptive, TableAdaptive: r.TableAdaptive,
		Parallelism: r.Parallelism, Truncate: spec.Truncate,
		MinDeadTuplePercent: r.MinDeadTuplePercent, Resume: r.Resume,
	}
	if spec.Server != nil {
		o.SystemIdentifier = spec.Server.SystemIdentifier
	}
	if spec.IndexWorkers != nil {
		n := r.IndexWorkers
		o.IndexWorkers = &n
	}
	if spec.MaintenanceWorkMem != nil {
		m := r.MaintenanceWorkMem
		o.MaintenanceWorkMem = &m
	}
	if spec.RingSize != nil {
		rs := r.RingSize
		o.RingSize = &rs
	}
	return o
}

// fieldsNamed turns the *online.FieldErrors in err into one *UsageError naming flags or
// RunSpec fields; other errors pass unchanged.
func fieldsNamed(err error, fromFlags bool) error {
	var msgs []string
	for _, e := range flatten(err) {
		var fe *online.FieldError
		if !errors.As(e, &fe) {
			if len(msgs) == 0 {
				return err
			}
			msgs = append(msgs, e.Error())
			continue
		}
		name := fe.Field
		switch {
		case fromFlags && flagOfOnlineField[name] != "":
			name = flagOfOnlineField[name]
		case fromFlags && flagOfField[name] != "":
			name = flagOfField[name]
		case fromFlags && strings.HasPrefix(name, "tables["):
			name = "--table"
		case !fromFlags && specOfOnlineField[name] != "":
			name = specOfOnlineField[name]
		}
		msgs = append(msgs, name+": "+fe.Message)
	}
	return &UsageError{Msg: strings.Join(msgs, "; ")}
}
