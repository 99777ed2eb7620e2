package runner

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"golang.org/x/net/netutil"

	"github.com/vacuumops/vacuum-operator/internal/cliflag"
	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// maxSpecBytes bounds a RunSpec (inline or file).
const maxSpecBytes = 1 << 20

// runFlags are the flags of `run` beyond the vacuum flags.
type runFlags struct {
	spec, specFile, listen, terminationLog, tokenFile string
	metricsListen, tlsCert, tlsKey                    string
	maxConnections                                    int
	lockTimeout                                       time.Duration
}

// DefaultMaxConnections is --max-connections' default: the manager holds one or two
// connections and a scraper one; more is a flood (security review S2).
const DefaultMaxConnections = 16

// cmdRun is pod mode: parse, serve, vacuum, write the Summary, exit with its code.
func cmdRun(ctx context.Context, args []string, env Env) error {
	fs := cliflag.NewSet("run")
	vf := addVacuumFlags(fs, true)
	var f runFlags
	fs.StringVar(&f.spec, "spec", "", "RunSpec as JSON")
	fs.StringVar(&f.specFile, "spec-file", "", "file holding the RunSpec as JSON")
	fs.StringVar(&f.listen, "listen", "", "address of the control server (/progress, /healthz, /throttle, /pause, and /metrics without --metrics-listen); IPv6 as [addr]:port")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "address of a separate plain-HTTP server for /metrics and /healthz (none = /metrics on --listen)")
	fs.StringVar(&f.tlsCert, "tls-cert-file", "", "PEM certificate of the control server; with --tls-key-file it serves HTTPS")
	fs.StringVar(&f.tlsKey, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.IntVar(&f.maxConnections, "max-connections", DefaultMaxConnections, "most connections each server holds open at once")
	fs.StringVar(&f.terminationLog, "termination-log", "", "file to write the Summary to on exit")
	fs.StringVar(&f.tokenFile, "control-token-file", "", "file holding the bearer token of PUT /throttle and PUT /pause (none = disabled)")
	fs.DurationVar(&f.lockTimeout, "lock-timeout", 5*time.Minute, "how long to wait for a busy data directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	start := time.Now()
	rr, err := runPod(ctx, vf, f, env, start)
	code := exitCode(err, ctx.Err() != nil)
	sum := summaryOfReport(ctx, rr, err, code)
	if f.terminationLog != "" {
		if werr := writeSummary(f.terminationLog, sum); werr != nil {
			_, _ = fmt.Fprintf(env.Stderr, "vacuum-runner run: write termination log: %v\n", werr)
			if code == runnerwire.ExitOK {
				code = runnerwire.ExitInternal
			}
		}
	}
	_, _ = fmt.Fprintf(env.Stderr, "vacuum-runner run: exit %d: %s\n", code, sum.Message)
	if vf.json {
		if err := writeJSON(env.Stdout, sum); err != nil && code == runnerwire.ExitOK {
			code = runnerwire.ExitInternal
		}
	}
	if code == runnerwire.ExitOK {
		return nil
	}
	return &codedError{code: code}
}

// runPod does the work of `run` and returns what was done (no tables when no vacuum started).
func runPod(ctx context.Context, vf *vacuumFlags, f runFlags, env Env, start time.Time) (runnerwire.Report, error) {
	none := reportFrom(nil)
	switch {
	case f.listen == "":
		return none, usagef("--listen is required")
	case f.terminationLog == "":
		return none, usagef("--termination-log is required")
	case f.spec != "" && f.specFile != "":
		return none, usagef("give --spec or --spec-file, not both")
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return none, usagef("give --tls-cert-file and --tls-key-file together")
	case f.maxConnections < 1:
		return none, usagef("--max-connections must be at least 1, got %d", f.maxConnections)
	}
	var tlsConfig *tls.Config
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return none, usagef("--tls-cert-file/--tls-key-file: %v", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	}
	var spec runnerwire.RunSpec
	fromFlags := true
	if f.spec != "" || f.specFile != "" {
		s, err := readSpec(f.spec, f.specFile)
		if err != nil {
			return none, err
		}
		spec, fromFlags = s, false
	}
	vf.overlay(&spec)
	if spec.DataDir == "" && spec.Server == nil && !fromFlags {
		spec.DataDir = runnerwire.DefaultDataDir
	}
	r, err := resolveSpec(spec, fromFlags)
	if err != nil {
		return none, &UsageError{Msg: err.Error()}
	}
	var token []byte
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return none, usagef("--control-token-file: %v", err)
		}
		token = bytes.TrimSpace(b)
		if len(token) == 0 {
			return none, usagef("--control-token-file %s is empty", f.tokenFile)
		}
	}
	if spec.Server == nil {
		if err := checkMemory(r); err != nil {
			return none, err
		}
	}
	if spec.Server != nil && spec.Identify {
		return identifyServer(ctx, onlineTarget(*spec.Server))
	}
	state := &runState{start: start, tables: len(r.Tables), logf: func(format string, args ...any) {
		_, _ = fmt.Fprintf(env.Stderr, "vacuum-runner run: "+format+"\n", args...)
	}}
	defer state.finish()
	control, metrics := newHandlers(state, token, f.metricsListen == "")
	_, stopServer, err := serve(f.listen, control, serverOptions{tls: tlsConfig, maxConns: f.maxConnections}, state.logf)
	if err != nil {
		return none, usagef("--listen %s: %v", f.listen, err)
	}
	defer stopServer()
	if f.metricsListen != "" {
		_, stopMetrics, err := serve(f.metricsListen, metrics, serverOptions{maxConns: f.maxConnections}, state.logf)
		if err != nil {
			return none, usagef("--metrics-listen %s: %v", f.metricsListen, err)
		}
		defer stopMetrics()
	}
	if spec.Server != nil {
		return vacuumServer(ctx, spec, r, fromFlags, onlineTarget(*spec.Server), state)
	}

	db, err := openDB(ctx, r.DataDir, recoveryGate(engine.Options{BufferPoolBytes: r.BufferPoolSize, Logf: engineLog(env.Stderr)},
		r.RunID, r.AllowCrashRecovery), f.lockTimeout)
	if err != nil {
		return none, err
	}
	rep := none
	err = func() (err error) {
		defer closeDB(db, &err)
		tables, err := selectTables(db, r.Tables)
		if err != nil {
			return err
		}
		if p := state.takePending(); p != nil {
			r.Throttle = *p
		}
		if err := makeSortDir(r); err != nil {
			return err
		}
		run, err := vacuum.NewBatch(optionsFrom(r))
		if err != nil {
			return &UsageError{Msg: err.Error()}
		}
		state.setRun(run)
		rep, err = vacuumWindowed(ctx, db, run, r, tables, env.Stderr)
		return err
	}()
	return rep, err
}

// readSpec decodes a RunSpec strictly (unknown fields are errors) from inline JSON or a file.
func readSpec(inline, file string) (runnerwire.RunSpec, error) {
	var s runnerwire.RunSpec
	b := []byte(inline)
	flag := "--spec"
	if file != "" {
		flag = "--spec-file"
		fh, err := os.Open(file)
		if err != nil {
			return s, usagef("%s: %v", flag, err)
		}
		defer func() { _ = fh.Close() }() // read only
		b, err = readLimited(fh, maxSpecBytes)
		if err != nil {
			return s, usagef("%s %s: %v", flag, file, err)
		}
	}
	if len(b) > maxSpecBytes {
		return s, usagef("%s is over %d bytes", flag, maxSpecBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return s, usagef("%s is not a valid RunSpec: %v", flag, err)
	}
	if dec.More() {
		return s, usagef("%s holds more than one JSON value", flag)
	}
	return s, nil
}

// serverOptions are how serve listens: over TLS when tls is set, with at most maxConns
// connections open at once (0 = no limit).
type serverOptions struct {
	tls      *tls.Config
	maxConns int
}

// serve starts an HTTP server on addr (host:port, IPv6 hosts in brackets); stop shuts it down
// (waiting briefly for requests). Past maxConns open connections, further ones wait in the
// kernel's backlog until one closes, so a flood of idle connections costs the runner no
// memory beyond maxConns of them.
func serve(addr string, h http.Handler, o serverOptions, logf func(string, ...any)) (bound net.Addr, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	bound = ln.Addr()
	if o.maxConns > 0 {
		ln = netutil.LimitListener(ln, o.maxConns)
	}
	if o.tls != nil {
		ln = tls.NewListener(ln, o.tls)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logf("HTTP server on %s stopped: %v", addr, err)
		}
	}()
	return bound, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close() // forced after a graceful shutdown failed; nothing more to do
		}
		<-done
	}, nil
}

// summaryOf builds the Summary of an engine run that ended with err and code.
func summaryOf(ctx context.Context, rr *vacuum.BatchReport, err error, code int) runnerwire.Summary {
	return summaryOfReport(ctx, reportFrom(rr), err, code)
}

// summaryOfReport builds the Summary of a run that ended with err and code. A server's
// VERBOSE notices stay out of it (they went to the log): the termination log is small.
func summaryOfReport(ctx context.Context, rep runnerwire.Report, err error, code int) runnerwire.Summary {
	tables := make([]runnerwire.TableResult, len(rep.Tables))
	for i, t := range rep.Tables {
		t.Notices = []string{}
		tables[i] = t
	}
	rep.Tables = tables
	s := runnerwire.Summary{Phase: runnerwire.SummarySucceeded, ExitCode: code, Totals: rep.Totals, Tables: rep.Tables,
		Server: rep.Server, StopReason: rep.StopReason, ResumeNote: rep.ResumeNote, Replication: rep.Replication,
		Foreground: rep.Foreground, ForegroundBaseline: rep.ForegroundBaseline}
	switch {
	case code == runnerwire.ExitOK && rep.StopReason != "":
		complete := 0
		for _, t := range rep.Tables {
			if t.Complete {
				complete++
			}
		}
		why := "stopped at the window's end"
		if rep.StopReason == runnerwire.StopReasonWindowTooShort {
			why = "a VACUUM FULL estimated longer than the time left in the window was not started"
		}
		s.Message = fmt.Sprintf("%s (%s): %d of %d tables complete, removed %d tuples in %.1fs", why, rep.StopReason,
			complete, len(rep.Tables), rep.Totals.TuplesRemoved, rep.Totals.ElapsedSeconds)
	case code == runnerwire.ExitOK && rep.Server != nil && rep.Server.SystemIdentifier != "" && len(rep.Tables) == 0:
		s.Message = fmt.Sprintf("identified %s (%s), system identifier %s", rep.Server.Kind, rep.Server.Version,
			rep.Server.SystemIdentifier)
	case code == runnerwire.ExitOK:
		s.Message = fmt.Sprintf("vacuumed %d tables (%d skipped), removed %d tuples and %d pages in %.1fs",
			rep.Totals.TablesVacuumed, rep.Totals.TablesSkipped, rep.Totals.TuplesRemoved, rep.Totals.PagesRemoved,
			rep.Totals.ElapsedSeconds)
	case code == runnerwire.ExitCancelled:
		s.Phase = runnerwire.SummaryCancelled
		s.Message = "cancelled"
		var sig *SignalError
		if errors.As(context.Cause(ctx), &sig) {
			s.Message = sig.Error()
		}
		s.Message += fmt.Sprintf(" (%d of the run's tables reported); the table in progress stays consistent", len(rep.Tables))
	default:
		s.Phase = runnerwire.SummaryFailed
		s.Message = oneLine(err)
	}
	if s.ResumeNote != "" {
		s.Message += "; " + s.ResumeNote
	}
	return s
}

// writeSummary writes s, truncated to runnerwire.MaxSummaryBytes, to path.
func writeSummary(path string, s runnerwire.Summary) error {
	_, b, err := runnerwire.TruncateSummary(s, runnerwire.MaxSummaryBytes)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
