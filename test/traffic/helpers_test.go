package traffic_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/pgtest"
)

var kills = flag.Int("traffic.kills", 5, "SIGKILLs of the server in the durability test (the issue's long variant: 20)")

// password is user app's password on every server started here (SCRAM-SHA-256).
const password = "traffic-secret"

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// engineServerBinary builds cmd/engine-server once per test binary, without -race.
func engineServerBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "traffic-bin-")
		if binErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "engine-server"), "../../cmd/engine-server").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("build engine-server: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "engine-server")
}

// pgTool returns the path of a PostgreSQL 15 program (pgtest.Tool: installed when missing
// and the test runs as root; otherwise the test fails saying what to do).
func pgTool(t *testing.T, name string) string {
	t.Helper()
	p, err := pgtest.Tool(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// server is an engine-server process over a data directory of its own, on a free loopback
// port, with one SCRAM user, app.
type server struct {
	t          *testing.T
	dir, data  string
	addr, log  string
	extraFlags []string
	cmd        *exec.Cmd
	done       chan struct{}
}

var (
	templateOnce sync.Once
	templateData string // a data directory `pgbench -i -s 2` initialized, stopped cleanly
	templateOut  string // that pgbench's output
)

// startPgbenchServer starts a server (as startServer) over a copy of a data directory that
// `pgbench -i -s 2` initialized once per test binary (through an engine-server stopped
// cleanly afterwards), and returns it with that pgbench's output: one initialization
// instead of one per test.
func startPgbenchServer(t *testing.T, extraFlags ...string) (*server, string) {
	t.Helper()
	templateOnce.Do(func() {
		engineServerBinary(t) // binDir exists
		dir := filepath.Join(binDir, "template")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "users"), []byte("app:"+password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s := &server{t: t, dir: dir, data: filepath.Join(dir, "data"), addr: ln.Addr().String(), log: filepath.Join(dir, "server.log")}
		_ = ln.Close()
		s.start()
		out := initPgbench(t, s, "2")
		s.stop()
		templateData, templateOut = s.data, out
	})
	if templateData == "" {
		t.Fatal("the pgbench -i -s 2 template data directory failed in an earlier test (see its log)")
	}
	return launch(t, templateData, extraFlags), templateOut
}

// launch starts engine-server serve --init with extra flags over a data directory of its
// own (a copy of from, or a new one when from is empty) and waits until it answers.
func launch(t *testing.T, from string, extraFlags []string) *server {
	t.Helper()
	dir := t.TempDir()
	if from != "" {
		if out, err := exec.Command("cp", "-a", from, filepath.Join(dir, "data")).CombinedOutput(); err != nil {
			t.Fatalf("copy the template data directory: %v\n%s", err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "users"), []byte("app:"+password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dir: dir, data: filepath.Join(dir, "data"), addr: ln.Addr().String(),
		log: filepath.Join(dir, "server.log"), extraFlags: extraFlags}
	_ = ln.Close() // the server listens on it next; a test-only race with other listeners
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			s.stop()
		}
		if t.Failed() {
			b, _ := os.ReadFile(s.log)
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			t.Logf("engine-server log (tail):\n%s", b)
		}
	})
	return s
}

// start runs the server (again, after a kill or a stop) and waits until SELECT 1 answers.
func (s *server) start() {
	s.t.Helper()
	args := append([]string{"serve", "--init", "--data", s.data, "--listen", s.addr, "--auth", "scram",
		"--users-file", filepath.Join(s.dir, "users"), "--buffer-pool", "64Mi"}, s.extraFlags...)
	log, err := os.OpenFile(s.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	s.cmd = exec.Command(engineServerBinary(s.t), args...)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := selectOne(ctx, s.connString())
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("engine-server did not answer SELECT 1 on %s within 90 s: %v", s.addr, err)
		}
		select {
		case <-s.done:
			b, _ := os.ReadFile(s.log)
			s.t.Fatalf("engine-server exited before answering on %s:\n%s", s.addr, b)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// stop sends SIGTERM (graceful shutdown, final checkpoint) and waits, killing after 60 s.
func (s *server) stop() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("engine-server did not stop within 60 s of SIGTERM")
	}
	s.cmd = nil
}

func (s *server) connString() string {
	return fmt.Sprintf("postgres://app:%s@%s/postgres?sslmode=disable", password, s.addr)
}

// connect opens a pgx session, closed at the end of the test.
func (s *server) connect(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.connString())
	if err != nil {
		t.Fatalf("connect to %s: %v", s.addr, err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// selectOne opens a new session, runs SELECT 1 and closes it.
func selectOne(ctx context.Context, url string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return err
	}
	if one != 1 {
		return fmt.Errorf("SELECT 1 returned %d", one)
	}
	return nil
}

// bench is one pgbench run's outcome.
type bench struct {
	args      []string
	out       string
	err       error // pgbench's exit status (clients aborted by an error exit 2)
	processed int64
	failed    int64
	tps       float64
}

var (
	processedRE = regexp.MustCompile(`number of transactions actually processed: (\d+)`)
	failedRE    = regexp.MustCompile(`number of failed transactions: (\d+)`)
	tpsRE       = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
)

// runPgbench runs PostgreSQL 15's pgbench, unmodified, against s; it never fails the test
// (it may run in a goroutine): callers judge the result with ok.
func runPgbench(ctx context.Context, t *testing.T, addr string, args ...string) bench {
	return runPgbenchIn(ctx, t, "", addr, args...)
}

// runPgbenchIn is runPgbench in working directory dir (where -l writes its logs).
func runPgbenchIn(ctx context.Context, t *testing.T, dir, addr string, args ...string) bench {
	host, port, _ := net.SplitHostPort(addr)
	all := append([]string{"-h", host, "-p", port, "-U", "app"}, args...)
	all = append(all, "postgres")
	cmd := exec.CommandContext(ctx, pgTool(t, "pgbench"), all...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PGCONNECT_TIMEOUT=10", "PGSSLMODE=disable", "PGPASSWORD=" + password}
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	b := bench{args: args}
	b.err = cmd.Run()
	b.out = out.String()
	if m := processedRE.FindStringSubmatch(b.out); m != nil {
		b.processed, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := failedRE.FindStringSubmatch(b.out); m != nil {
		b.failed, _ = strconv.ParseInt(m[1], 10, 64)
	} else {
		b.failed = -1
	}
	if m := tpsRE.FindStringSubmatch(b.out); m != nil {
		b.tps, _ = strconv.ParseFloat(m[1], 64)
	}
	return b
}

// transactionLatencies reads the per-transaction logs pgbench -l wrote into dir: each
// line is "client transaction latency_us script epoch_s epoch_us".
func transactionLatencies(t *testing.T, dir string) []time.Duration {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "pgbench_log.*"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no pgbench_log.* in %s (%v)", dir, err)
	}
	var lat []time.Duration
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			if len(f) < 6 {
				continue
			}
			us, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("%s: line %q: %v", l, line, err)
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
	}
	return lat
}

// ok fails the test unless the run exited 0 with transactions and none failed.
func (b bench) ok(t *testing.T, what string) {
	t.Helper()
	if b.err != nil || b.failed != 0 || b.processed == 0 {
		t.Fatalf("%s: pgbench %v: exit %v, %d transactions, %d failed\n%s", what, b.args, b.err, b.processed, b.failed, b.out)
	}
}

// mustPgbench runs pgbench in the foreground and requires it to succeed.
func mustPgbench(t *testing.T, s *server, args ...string) bench {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := runPgbench(ctx, t, s.addr, args...)
	b.ok(t, "pgbench")
	return b
}

// initPgbench runs `pgbench -i -s scale` and requires it to succeed.
func initPgbench(t *testing.T, s *server, scale string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := runPgbench(ctx, t, s.addr, "-i", "-s", scale)
	if b.err != nil {
		t.Fatalf("pgbench -i -s %s: %v\n%s", scale, b.err, b.out)
	}
	return b.out
}

// ledger is the balance state pgbench's tables are in.
type ledger struct {
	accounts, branches, tellers int64 // sums of the balances
	history, delta              int64 // pgbench_history's rows and the sum of their deltas
}

func balances(t *testing.T, c *pgx.Conn) ledger {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var l ledger
	for q, dst := range map[string][]any{
		"SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts":       {&l.accounts},
		"SELECT coalesce(sum(bbalance), 0) FROM pgbench_branches":       {&l.branches},
		"SELECT coalesce(sum(tbalance), 0) FROM pgbench_tellers":        {&l.tellers},
		"SELECT count(*), coalesce(sum(delta), 0) FROM pgbench_history": {&l.history, &l.delta},
	} {
		if err := c.QueryRow(ctx, q).Scan(dst...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return l
}

// consistent fails the test unless every balance sum equals the history's deltas (true of
// pgbench's tables after tpcb-like runs that started from -i, history kept).
func (l ledger) consistent(t *testing.T, what string) {
	t.Helper()
	if l.accounts != l.branches || l.branches != l.tellers || l.tellers != l.delta {
		t.Fatalf("%s: balances disagree: accounts %d, branches %d, tellers %d, history deltas %d (%d rows)",
			what, l.accounts, l.branches, l.tellers, l.delta, l.history)
	}
}
