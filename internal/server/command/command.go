// Package command is engine-server's command line: `init` creates a data directory, `serve`
// serves one over the PostgreSQL protocol (holding its lock, as a runner does), with the
// flags shared with the runner and the online-runs design (--data, --buffer-pool, --listen, --metrics-listen, --users-file,
// --auth, --database-name, --max-connections, --tls-cert, --tls-key) and its own (--direct-io,
// --checkpoint-wal-size, ...). SIGTERM or SIGINT
// shuts down gracefully: running statements finish, open transactions roll back, and the
// engine's Close takes the final checkpoint.
//
// Exit codes follow the runner's: 0 ok, 1 internal error, 2 bad input, 3 busy (the data
// directory is locked by another process).
package command

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vacuumops/vacuum-operator/internal/cliflag"
	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/osthread"
	"github.com/vacuumops/vacuum-operator/internal/replication"
	"github.com/vacuumops/vacuum-operator/internal/server/auth"
	"github.com/vacuumops/vacuum-operator/internal/server/sql"
	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitInternal = 1
	ExitUsage    = 2
	ExitBusy     = 3
)

// ShutdownGrace is how long a graceful shutdown lets running statements finish before it
// cancels them.
const ShutdownGrace = 30 * time.Second

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// Main runs engine-server with args (without the program name) until ctx ends (a signal),
// and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := run(ctx, args, stdout, stderr)
	var ue *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "engine-server: %v\n", err)
		return ExitUsage
	case errors.Is(err, engine.ErrInUse):
		fmt.Fprintf(stderr, "engine-server: %v\n", err)
		return ExitBusy
	}
	fmt.Fprintf(stderr, "engine-server: %v\n", err)
	return ExitInternal
}

const usage = `usage: engine-server <command> [flags]

commands:
  init    create an empty data directory (--data)
  serve   serve a data directory over the PostgreSQL protocol (--init creates it first)
  basebackup  copy a running primary's data directory (--from HOST:PORT --data DIR)

Run engine-server <command> --help for its flags.`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("%s", usage)
	}
	switch args[0] {
	case "init":
		return runInit(args[1:], stdout)
	case "serve":
		return runServe(ctx, args[1:], stderr)
	case "basebackup":
		return runBaseBackup(ctx, args[1:], stdout)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return usagef("unknown command %q\n%s", args[0], usage)
}

func parse(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return usagef("usage: engine-server %s [flags]\n%s", fs.Name(), fs.FlagUsages())
		}
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	return nil
}

func runInit(args []string, stdout io.Writer) error {
	fs := cliflag.NewSet("init")
	data := fs.String("data", "", "data directory to create")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *data == "" {
		return usagef("init: --data is required")
	}
	if err := engine.Init(*data, engine.Options{}); err != nil {
		if errors.Is(err, engine.ErrAlreadyInitialised) {
			return usagef("%v", err)
		}
		return err
	}
	fmt.Fprintf(stdout, "initialized %s\n", *data)
	return nil
}

// serveFlags are serve's flags.
type serveFlags struct {
	data, listen, metricsListen, pprofListen, usersFile, authMethod, database, tlsCert, tlsKey, vacuumSched string
	bufferPool, checkpointWAL                                                                               cliflag.Quantity
	maxConnections, gomaxprocs, vacuumNice                                                                  int
	init, upgrade, directIO, logAdaptive                                                                    bool
	maxSlotWALKeep                                                                                          string
	standby                                                                                                 standbyFlags
	synchronousStandby                                                                                      string
}

// defaultVacuumNice is --vacuum-nice's default (docs/benchmarks/online-cost.md).
const defaultVacuumNice = 5

// The values of --vacuum-sched: the Linux scheduling policy of a VACUUM's worker threads.
const (
	vacuumSchedNormal = "normal"
	vacuumSchedIdle   = "idle"
)

// defaultVacuumSched is --vacuum-sched's default (docs/benchmarks/online-cost.md).
const defaultVacuumSched = vacuumSchedNormal

// checkpointWALDefault is --checkpoint-wal-size's default, the engine's own
// (engine.DefaultCheckpointWALBytes).
const checkpointWALDefault = "64Mi"

func runServe(ctx context.Context, args []string, stderr io.Writer) error {
	f := serveFlags{}
	fs := cliflag.NewSet("serve")
	fs.StringVar(&f.data, "data", "", "data directory")
	fs.BoolVar(&f.init, "init", false, "initialize the data directory first if it is empty or missing")
	fs.BoolVar(&f.upgrade, "upgrade", false,
		"bring a data directory of an older format version to this build's first (as vacuum-runner upgrade; nothing on a current one)")
	f.bufferPool.Value = resource.MustParse("128Mi")
	fs.Var(&f.bufferPool, "buffer-pool", "buffer pool size")
	f.checkpointWAL.Value = resource.MustParse(checkpointWALDefault)
	fs.Var(&f.checkpointWAL, "checkpoint-wal-size",
		"WAL written since the last checkpoint began that starts the next one (PostgreSQL's default max_wal_size of 1GB starts one at about 539Mi)")
	fs.BoolVar(&f.directIO, "direct-io", false,
		"read and write relation files with O_DIRECT, so the buffer pool is their only cache (buffered I/O, with a warning, where the file system refuses it)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:5432", "PostgreSQL protocol address")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "HTTP address of /metrics (empty = none)")
	fs.StringVar(&f.pprofListen, "pprof", "",
		"loopback HTTP address of Go's profiler (/debug/pprof/), for profiling the server under load (empty = none)")
	fs.StringVar(&f.usersFile, "users-file", "", "users file: user:password or user:SCRAM-SHA-256$... lines")
	fs.StringVar(&f.authMethod, "auth", wire.AuthSCRAM, "scram or trust (trust only on a loopback --listen)")
	fs.StringVar(&f.database, "database-name", "postgres", "the database name clients connect to")
	fs.IntVar(&f.maxConnections, "max-connections", 100, "concurrent sessions (53300 beyond)")
	fs.IntVar(&f.gomaxprocs, "gomaxprocs", 0,
		"Go processors the server runs on (0 = at least 8, or Go's own choice under a GOMAXPROCS variable or a container's CPU limit)")
	fs.IntVar(&f.vacuumNice, "vacuum-nice", defaultVacuumNice,
		"nice steps a VACUUM's worker threads run below the foreground's, with the lowest best-effort I/O priority (Linux only; 0 = same priority; moot with --vacuum-sched idle)")
	fs.StringVar(&f.vacuumSched, "vacuum-sched", defaultVacuumSched,
		"scheduling policy of a VACUUM's worker threads: normal (at --vacuum-nice) or idle (SCHED_IDLE: they run only on a core no other thread wants; Linux only)")
	fs.BoolVar(&f.logAdaptive, "log-adaptive", false,
		"log each change of an adaptive throttle's decision (budget, binding, HardStop's pause) with what its judgement read: a line per change")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM); with --tls-key, SSLRequest is accepted")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS private key (PEM)")
	fs.StringVar(&f.maxSlotWALKeep, "max-slot-wal-keep-size", "-1",
		"WAL a replication slot may hold (a quantity such as 1Gi) before it is invalidated; -1 = no limit")
	fs.StringVar(&f.synchronousStandby, "synchronous-standby", "",
		"a commit returns only once the standby of this --name has flushed it (synchronous replication)")
	f.standby.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if f.gomaxprocs < 0 {
		return usagef("serve: --gomaxprocs must be 0 or more, got %d", f.gomaxprocs)
	}
	if f.vacuumNice < 0 || f.vacuumNice > osthread.MaxNice {
		return usagef("serve: --vacuum-nice must be between 0 and %d, got %d", osthread.MaxNice, f.vacuumNice)
	}
	if f.vacuumSched != vacuumSchedNormal && f.vacuumSched != vacuumSchedIdle {
		return usagef("serve: --vacuum-sched must be %s or %s, got %q", vacuumSchedNormal, vacuumSchedIdle, f.vacuumSched)
	}
	defer setServeProcs(f.gomaxprocs, func(format string, a ...any) {
		fmt.Fprintf(stderr, "engine-server: "+format+"\n", a...)
	})()
	if f.standby.primary.from != "" {
		return runStandby(ctx, &f, stderr)
	}
	keep, err := parseKeepSize(f.maxSlotWALKeep)
	if err != nil {
		return err
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "engine-server: "+format+"\n", a...) }
	if f.init {
		if err := engine.Init(f.data, engine.Options{}); err != nil && !errors.Is(err, engine.ErrAlreadyInitialised) {
			return err
		}
	}
	ckpt := f.checkpointWAL.Value.Value()
	if ckpt <= 0 {
		return usagef("--checkpoint-wal-size must be positive, got %s", f.checkpointWAL.Value.String())
	}
	if err := f.upgradeData(logf); err != nil {
		return err
	}
	db, err := engine.Open(f.data, engine.Options{BufferPoolBytes: f.bufferPool.Value.Value(), CheckpointWALBytes: ckpt, Direct: f.directIO, LogCheckpoints: true, Logf: func(format string, a ...any) {
		logf("engine: "+format, a...)
	}})
	if err != nil {
		if errors.Is(err, engine.ErrNotDataDir) {
			return usagef("%s is not a data directory (create it with engine-server init, or serve --init): %v", f.data, err)
		}
		return err
	}
	cfg.DB, cfg.Logf = db, logf
	cfg.VacuumPriority = osthread.Priority{Nice: f.vacuumNice, Idle: f.vacuumSched == vacuumSchedIdle}
	cfg.LogAdaptive = f.logAdaptive
	primary, err := replication.NewPrimary(replication.PrimaryConfig{DB: db, MaxSlotWALKeepSize: keep,
		SynchronousStandby: f.synchronousStandby, Logf: logf})
	if err != nil {
		return errors.Join(err, db.Close())
	}
	defer primary.Close()
	cfg.Replication, cfg.Views = primary, primary.Views()
	cfg.ReplicationLag = func() sql.ReplicationLag { return furthestBehind(primary.Standbys()) }
	cfg.StandbyReplay = primary.SlowestReplay
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return errors.Join(fmt.Errorf("listen on %s: %w", f.listen, err), db.Close())
	}
	srv := wire.New(cfg)
	var metrics *http.Server
	if f.metricsListen != "" {
		mln, err := net.Listen("tcp", f.metricsListen)
		if err != nil {
			return errors.Join(fmt.Errorf("listen on %s: %w", f.metricsListen, err), ln.Close(), db.Close())
		}
		metrics = metricsServer(srv, primary.Collector())
		go func() { _ = metrics.Serve(mln) }()
		logf("metrics on http://%s/metrics", mln.Addr())
	}
	if f.pprofListen != "" {
		pln, err := net.Listen("tcp", f.pprofListen)
		if err != nil {
			return errors.Join(fmt.Errorf("listen on %s: %w", f.pprofListen, err), ln.Close(), db.Close())
		}
		prof := pprofServer()
		defer func() { _ = prof.Close() }()
		go func() { _ = prof.Serve(pln) }()
		logf("profiler on http://%s/debug/pprof/", pln.Addr())
	}
	logf("listening on %s (database %q, auth %s, data %s)", ln.Addr(), cfg.Database, cfg.Auth, f.data)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	var runErr error
	select {
	case <-ctx.Done():
		logf("shutting down: running statements finish, open transactions roll back")
	case err := <-serveErr:
		runErr = err
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logf("shutdown: statements still running after %v were canceled", ShutdownGrace)
	}
	if metrics != nil {
		_ = metrics.Close()
	}
	primary.Close()
	if err := db.Close(); err != nil {
		return errors.Join(runErr, fmt.Errorf("final checkpoint: %w", err))
	}
	logf("shut down cleanly (final checkpoint taken)")
	if errors.Is(runErr, wire.ErrServerClosed) {
		return nil
	}
	return runErr
}

// upgradeData runs engine.Upgrade on --data when --upgrade is given: an image
// update of a StatefulSet then needs no separate step for a directory an older
// build wrote. Upgrade is idempotent and crash-safe; a missing directory is left
// to Open (or --init) to report.
func (f *serveFlags) upgradeData(logf func(string, ...any)) error {
	if !f.upgrade {
		return nil
	}
	res, err := engine.Upgrade(f.data, engine.Options{})
	switch {
	case errors.Is(err, engine.ErrNotDataDir):
		return nil
	case err != nil:
		return err
	case res.Upgraded:
		logf("upgraded %s from format version %d to %d", f.data, res.From, res.To)
	}
	return nil
}

// config validates the flags into a wire configuration.
func (f *serveFlags) config() (wire.Config, error) {
	cfg := wire.Config{Auth: f.authMethod, Database: f.database, MaxConnections: f.maxConnections}
	if f.data == "" {
		return cfg, usagef("serve: --data is required")
	}
	if f.maxConnections < 1 {
		return cfg, usagef("serve: --max-connections must be at least 1")
	}
	if f.database == "" {
		return cfg, usagef("serve: --database-name must not be empty")
	}
	switch f.authMethod {
	case wire.AuthTrust:
		if !loopback(f.listen) {
			return cfg, usagef("serve: --auth trust is allowed only on a loopback --listen address, not %q", f.listen)
		}
	case wire.AuthSCRAM:
		if f.usersFile == "" {
			return cfg, usagef("serve: --auth scram needs --users-file")
		}
	default:
		return cfg, usagef("serve: --auth must be scram or trust, not %q", f.authMethod)
	}
	if f.usersFile != "" {
		users, err := auth.LoadFile(f.usersFile)
		if err != nil {
			return cfg, usagef("serve: %v", err)
		}
		cfg.Users = users
	}
	if f.pprofListen != "" && !loopback(f.pprofListen) {
		return cfg, usagef("serve: --pprof is allowed only on a loopback address, not %q", f.pprofListen)
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return cfg, usagef("serve: --tls-cert and --tls-key go together")
	}
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return cfg, usagef("serve: TLS key pair: %v", err)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	return cfg, nil
}

// loopback reports whether a listen address is on a loopback interface only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseKeepSize reads --max-slot-wal-keep-size: -1, or a quantity of bytes.
func parseKeepSize(s string) (int64, error) {
	if s == "-1" {
		return -1, nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return 0, usagef("serve: --max-slot-wal-keep-size must be -1 or a quantity such as 1Gi, not %q", s)
	}
	return q.Value(), nil
}

func metricsServer(srv *wire.Server, more ...prometheus.Collector) *http.Server {
	reg := prometheus.NewRegistry()
	reg.MustRegister(more...)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "engine_server_sessions", Help: "Client sessions past startup.",
	}, func() float64 { return float64(srv.Sessions()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "engine_server_vacuums_running", Help: "VACUUM statements running now.",
	}, func() float64 { return float64(srv.VacuumsRunning()) }))
	reg.MustRegister(srv.Latency().Collector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}

// pprofServer serves Go's profiler (net/http/pprof's handlers on their own mux, not
// http.DefaultServeMux, so nothing else is exposed with them).
func pprofServer() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}

// Stdout and Stderr are the process's, for cmd/engine-server.
var (
	Stdout io.Writer = os.Stdout
	Stderr io.Writer = os.Stderr
)

// furthestBehind is the adaptive throttle's lag signal: the most replay bytes and the
// longest replay delay over the connected standbys (a delay not known yet is -1).
func furthestBehind(ss []replication.Standby) sql.ReplicationLag {
	lag := sql.ReplicationLag{Delay: -1, Standbys: len(ss)}
	for _, s := range ss {
		lag.Bytes = max(lag.Bytes, s.ReplayBytes)
		lag.Delay = max(lag.Delay, s.ReplayLag)
	}
	return lag
}
