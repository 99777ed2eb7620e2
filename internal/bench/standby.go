package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/pgtest"
	"github.com/vacuumops/vacuum-operator/internal/server/command"
)

// Experiment 5's servers: an engine-server primary and its synchronous standby as two
// processes of this binary (ServeIfChild), and PostgreSQL 15 with a streaming standby.

// serverChildEnv, set to 1, makes this binary run engine-server's command line (ServeIfChild).
const serverChildEnv = "VACBENCH_ENGINE_SERVER"

// ServeIfChild runs engine-server's command line and exits when this process was started by
// experiment 5 as an engine-server process; otherwise it returns at once. A binary that runs
// experiment 5 (cmd/vacbench, its tests) calls it first thing.
func ServeIfChild() {
	if os.Getenv(serverChildEnv) != "1" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := command.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// replicaPair is a primary whose commits wait for its standby's flush, and that standby.
type replicaPair struct {
	primary, standby *srvSystem
	stop             func()
}

// exp5Standby is the standby's name: its application_name, named by the primary's
// --synchronous-standby (ours) or synchronous_standby_names (PostgreSQL).
const exp5Standby = "s1"

// startOursPair starts an engine-server primary with --synchronous-standby and a standby
// whose first step is its base backup of that primary, as two processes.
func (r *runner) startOursPair(ctx context.Context) (*replicaPair, error) {
	dir := filepath.Join(r.work, "exp5-engine-server")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	const pw = "bench-secret"
	users, pwFile := filepath.Join(dir, "users"), filepath.Join(dir, "password")
	if err := os.WriteFile(users, []byte("bench:"+pw+" replication\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		return nil, err
	}
	common := []string{"--auth", "scram", "--users-file", users, "--buffer-pool", strconv.FormatInt(r.sz.SrvPoolBytes, 10),
		"--max-connections", "64"}
	primary, err := r.serverProcess(ctx, filepath.Join(dir, "primary.log"), pw,
		append([]string{"serve", "--init", "--data", filepath.Join(dir, "primary"), "--synchronous-standby", exp5Standby}, common...)...)
	if err != nil {
		return nil, fmt.Errorf("engine-server primary: %w", err)
	}
	standby, err := r.serverProcess(ctx, filepath.Join(dir, "standby.log"), pw,
		append([]string{"serve", "--data", filepath.Join(dir, "standby"), "--standby-of", primary.addr, "--name", exp5Standby,
			"--basebackup-if-empty", "--user", "bench", "--password-file", pwFile, "--sslmode", "disable"}, common...)...)
	if err != nil {
		primary.stop()
		return nil, fmt.Errorf("engine-server standby: %w", err)
	}
	return &replicaPair{primary: primary, standby: standby, stop: func() { standby.stop(); primary.stop() }}, nil
}

// serverProcess runs engine-server with args plus --listen on a free loopback port, its
// output in logPath, and waits until it accepts the bench user's sessions.
func (r *runner) serverProcess(ctx context.Context, logPath, password string, args ...string) (*srvSystem, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logf.Close() }() // the child has its own descriptor
	cmd := exec.Command(exe, append(args, "--listen", addr)...)
	cmd.Env = append(os.Environ(), serverChildEnv+"=1")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", exe, err)
	}
	exited := make(chan int, 1)
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		exited <- cmd.ProcessState.ExitCode()
		close(waited)
	}()
	s := &srvSystem{name: sysOurs, addr: addr, user: "bench", password: password, exited: waited, logPath: logPath}
	s.stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill() // our own child, stuck in its shutdown
			<-waited
		}
	}
	if err := waitSQL(ctx, s, exited); err != nil {
		s.stop()
		out, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return s, nil
}

// startPostgresPair starts PostgreSQL 15 as startDurablePostgres does, a streaming standby made
// with pg_basebackup, and then names that standby in synchronous_standby_names
// (synchronous_commit=on): commits wait for its flush, as ours.
func (r *runner) startPostgresPair(ctx context.Context) (*replicaPair, error) {
	pg, err := r.startDurablePostgres(ctx)
	if err != nil {
		return nil, err
	}
	sb, err := pg.StartStandby(ctx, exp5Standby)
	if err != nil {
		pg.Stop()
		return nil, err
	}
	p := &replicaPair{
		primary: &srvSystem{name: sysPostgres, addr: pg.Addr(), user: pgtest.Superuser, password: pgtest.Password, stop: pg.Stop},
		standby: &srvSystem{name: sysPostgres, addr: sb.Addr(), user: pgtest.Superuser, password: pgtest.Password, stop: sb.Stop},
		stop:    func() { sb.Stop(); pg.Stop() },
	}
	c, err := pgx.Connect(ctx, p.primary.url())
	if err != nil {
		p.stop()
		return nil, err
	}
	defer func() { _ = c.Close(context.Background()) }()
	for _, q := range []string{"ALTER SYSTEM SET synchronous_standby_names = '" + exp5Standby + "'", "SELECT pg_reload_conf()"} {
		if _, err := c.Exec(ctx, q); err != nil {
			p.stop()
			return nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state string
		err := c.QueryRow(ctx, "SELECT sync_state FROM pg_stat_replication WHERE application_name = $1", exp5Standby).Scan(&state)
		if err == nil && state == "sync" {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("PostgreSQL's standby %s not synchronous after 30 s (sync_state %q, %v)", exp5Standby, state, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// watch returns a context cancelled when either server of the pair exits (a standby whose
// replay failed, say): a synchronous primary would otherwise wait for it forever. The
// cause names the server and carries its log's tail.
func (p *replicaPair) watch(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancelCause(ctx)
	go func() {
		var s *srvSystem
		select {
		case <-wctx.Done():
			return
		case <-p.primary.exited:
			s = p.primary
		case <-p.standby.exited:
			s = p.standby
		}
		out, _ := os.ReadFile(s.logPath)
		if len(out) > 4000 {
			out = out[len(out)-4000:]
		}
		cancel(fmt.Errorf("%s at %s exited during the run; the end of its log:\n%s", s.name, s.addr, out))
	}()
	return wctx, func() { cancel(context.Canceled) }
}

// LagSample is one reading of the primary's pg_stat_replication.
type LagSample struct {
	At       time.Duration // since sampling began
	Current  uint64        // the primary's pg_current_wal_lsn()
	Replayed uint64        // the standby's replay_lsn (else flush, else sent)
	Took     time.Duration // the query's round trip (a slow one may have read the two apart)
}

// Lag is the bytes of WAL the standby has not replayed.
func (s LagSample) Lag() int64 {
	if s.Current < s.Replayed {
		return 0
	}
	return int64(s.Current - s.Replayed)
}

// lagQuery is the runner's own reading of a standby's position (package online), on both
// servers alike.
const lagQuery = `SELECT pg_current_wal_lsn()::text, coalesce(replay_lsn, flush_lsn, sent_lsn)::text FROM pg_stat_replication`

// readLag reads one sample from the primary's session c.
func readLag(ctx context.Context, c *pgx.Conn) (LagSample, error) {
	var cur, rep string
	if err := c.QueryRow(ctx, lagQuery).Scan(&cur, &rep); err != nil {
		return LagSample{}, fmt.Errorf("pg_stat_replication: %w", err)
	}
	a, err1 := parseLSN(cur)
	b, err2 := parseLSN(rep)
	return LagSample{Current: a, Replayed: b}, errors.Join(err1, err2)
}

// parseLSN reads a WAL position in pg_lsn's text form (16/B374D848).
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("WAL position %q: want two hexadecimal halves separated by /", s)
	}
	return h<<32 | l, nil
}

// lagSampler reads the primary's pg_stat_replication every interval until stopped.
type lagSampler struct {
	mu      sync.Mutex
	samples []LagSample
	err     error
	start   time.Time
	stop    chan struct{}
	done    chan struct{}
}

func sampleLag(ctx context.Context, s *srvSystem, every time.Duration) (*lagSampler, error) {
	c, err := pgx.Connect(ctx, s.url())
	if err != nil {
		return nil, err
	}
	ls := &lagSampler{stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	go func() {
		defer close(ls.done)
		defer func() { _ = c.Close(context.Background()) }()
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			t0 := time.Now()
			smp, err := readLag(ctx, c)
			smp.At, smp.Took = t0.Sub(ls.start), time.Since(t0)
			ls.mu.Lock()
			if err != nil {
				ls.err = err
				ls.mu.Unlock()
				return
			}
			ls.samples = append(ls.samples, smp)
			ls.mu.Unlock()
			select {
			case <-ls.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return ls, nil
}

// last is the latest sample (zero before the first).
func (ls *lagSampler) last() (LagSample, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.samples) == 0 {
		return LagSample{}, ls.err
	}
	return ls.samples[len(ls.samples)-1], ls.err
}

// since is the sampling clock's reading of t.
func (ls *lagSampler) since(t time.Time) time.Duration { return t.Sub(ls.start) }

func (ls *lagSampler) Stop() ([]LagSample, error) {
	close(ls.stop)
	<-ls.done
	return ls.samples, ls.err
}

// load is pgbench at a fixed rate, run in consecutive chunks until stopped, so that it lasts
// as long as the VACUUM it runs beside, however long that is.
type load struct {
	mu   sync.Mutex
	runs []pgbenchRun
	err  error
	stop chan struct{}
	done chan struct{}
}

// startLoad runs experiment 5's load on s: pgbench's tpcb-like script at FullLoadRate.
func (r *runner) startLoad(ctx context.Context, s *srvSystem) *load {
	return r.startChunkedLoad(ctx, s, r.sz.FullLoadChunk, "-b", "tpcb-like", "-R", strconv.Itoa(r.sz.FullLoadRate),
		"-c", strconv.Itoa(r.sz.FullLoadClients), "-j", "1")
}

// startChunkedLoad runs pgbench with args in consecutive chunks of the given length until
// stopped (the rate of -R is kept across chunks; each chunk's transactions are read from its
// -l log when it ends).
func (r *runner) startChunkedLoad(ctx context.Context, s *srvSystem, chunk time.Duration, args ...string) *load {
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	args = slices.Concat(args, []string{"-T", strconv.Itoa(max(1, int(chunk/time.Second)))})
	go func() {
		defer close(l.done)
		for {
			run, err := r.pgbench(ctx, s, true, args...)
			l.mu.Lock()
			l.runs = append(l.runs, run)
			l.err = errors.Join(l.err, err)
			l.mu.Unlock()
			if err != nil {
				return
			}
			select {
			case <-l.stop:
				return
			default:
			}
		}
	}()
	return l
}

// Stop waits for the running chunk and returns every chunk's transactions as one run.
func (l *load) Stop() (pgbenchRun, error) {
	close(l.stop)
	<-l.done
	var all pgbenchRun
	for _, r := range l.runs {
		all.lat = append(all.lat, r.lat...)
		all.ends = append(all.ends, r.ends...)
		all.transactions += r.transactions
		all.fails += r.fails
	}
	return all, l.err
}
