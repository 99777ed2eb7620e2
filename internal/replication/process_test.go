package replication_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/vacuumops/vacuum-operator/internal/server/command"
)

// childEnv makes the test binary run engine-server's command line instead of the tests,
// so the process tests run real server processes without building the binary.
const childEnv = "VACUUMOPS_REPLICATION_TEST_ENGINE_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		code := command.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// server is an engine-server process.
type server struct {
	t    *testing.T
	name string
	addr string
	args []string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan error
	// netns, when set, is the network namespace the process runs in (ip netns exec) and
	// the test's sessions dial into; password is the sessions' SCRAM password then.
	netns    string
	password string
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// freeAddr is a free loopback address.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// startServer runs `engine-server serve --listen addr --auth trust args...` and waits
// until it accepts queries.
func startServer(t *testing.T, name, addr string, args ...string) *server {
	t.Helper()
	s := &server{t: t, name: name, addr: addr, args: append([]string{"serve", "--listen", addr, "--auth", "trust"}, args...)}
	s.start()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("%s's output:\n%s", s.name, s.out.String())
		}
	})
	return s
}

func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command(os.Args[0], s.args...)
	if s.netns != "" {
		// ip netns exec execs the command in place: the process is the server itself.
		s.cmd = exec.Command("ip", append([]string{"netns", "exec", s.netns, os.Args[0]}, s.args...)...)
	}
	s.cmd.Env = append(os.Environ(), childEnv+"=1")
	if s.out == nil {
		s.out = &lockedBuffer{}
	}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := s.connect(context.Background())
		if err == nil {
			_ = c.Close(context.Background())
			return
		}
		select {
		case err := <-s.done:
			s.t.Fatalf("%s exited before it served: %v\n%s", s.name, err, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s does not accept connections on %s after 60 s: %v\n%s", s.name, s.addr, err, s.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the process with SIGKILL.
func (s *server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	s.t.Logf("%s killed: %v", s.name, <-s.done)
	s.cmd = nil
}

// stop ends the process with SIGTERM (SIGKILL after 20 s).
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			s.t.Errorf("%s exited with %v after SIGTERM", s.name, err)
		}
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		s.t.Logf("%s killed: %v", s.name, <-s.done)
		s.t.Errorf("%s did not stop within 20 s of SIGTERM", s.name)
	}
	s.cmd = nil
}

func (s *server) connect(ctx context.Context) (*pgx.Conn, error) {
	if s.netns == "" {
		return pgx.Connect(ctx, fmt.Sprintf("postgres://tester@%s/postgres?sslmode=disable", s.addr))
	}
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://tester:%s@%s/postgres?sslmode=disable&connect_timeout=5", s.password, s.addr))
	if err != nil {
		return nil, err
	}
	ns := s.netns
	cfg.DialFunc = func(ctx context.Context, _, addr string) (net.Conn, error) { return dialIn(ctx, ns, addr) }
	return pgx.ConnectConfig(ctx, cfg)
}

func (s *server) conn(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := s.connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// dump is every row of table, ordered by its first column, as text.
func dump(t *testing.T, c *pgx.Conn, table string) []string {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT * FROM "+table, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatalf("select from %s: %v", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(vals...))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("select from %s: %v", table, err)
	}
	sort.Strings(out)
	return out
}

// pgbenchWrites runs pgbench-style transactions (tpcb-like: an account update, a teller
// and branch update and a history insert, one transaction each) n times.
func pgbenchWrites(t *testing.T, c *pgx.Conn, from, n int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < from+n; i++ {
		aid, tid, bid, delta := 1+i%100, 1+i%10, 1, i%1000-500
		for _, q := range []string{
			"BEGIN",
			fmt.Sprintf("UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d", delta, aid),
			fmt.Sprintf("UPDATE pgbench_tellers SET tbalance = tbalance + %d WHERE tid = %d", delta, tid),
			fmt.Sprintf("UPDATE pgbench_branches SET bbalance = bbalance + %d WHERE bid = %d", delta, bid),
			fmt.Sprintf("INSERT INTO pgbench_history (tid, bid, aid, delta, seq) VALUES (%d, %d, %d, %d, %d)", tid, bid, aid, delta, i),
			"COMMIT",
		} {
			if _, err := c.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatalf("transaction %d: %s: %v", i, q, err)
			}
		}
	}
}

var pgbenchTables = []string{"pgbench_accounts", "pgbench_tellers", "pgbench_branches", "pgbench_history"}

func pgbenchInit(t *testing.T, c *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	for _, q := range []string{
		"CREATE TABLE pgbench_branches (bid int4 PRIMARY KEY, bbalance int4, filler char(88))",
		"CREATE TABLE pgbench_tellers (tid int4 PRIMARY KEY, bid int4, tbalance int4, filler char(84))",
		"CREATE TABLE pgbench_accounts (aid int4 PRIMARY KEY, bid int4, abalance int4, filler char(84))",
		"CREATE TABLE pgbench_history (seq int4, tid int4, bid int4, aid int4, delta int4, filler char(22))",
		"INSERT INTO pgbench_branches VALUES (1, 0, 'b')",
	} {
		if _, err := c.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for i := 1; i <= 10; i++ {
		if _, err := c.Exec(ctx, fmt.Sprintf("INSERT INTO pgbench_tellers VALUES (%d, 1, 0, 't')", i), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 100; i++ {
		if _, err := c.Exec(ctx, fmt.Sprintf("INSERT INTO pgbench_accounts VALUES (%d, 1, 0, 'a')", i), pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatal(err)
		}
	}
}

// waitStandbyEqual waits until every pgbench table of the standby equals the primary's
// row for row.
func waitStandbyEqual(t *testing.T, primary, standby *server) {
	t.Helper()
	pc := primary.conn(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		sc, err := standby.connect(context.Background())
		if err == nil {
			equal := true
			for _, table := range pgbenchTables {
				if !slices.Equal(dump(t, pc, table), dump(t, sc, table)) {
					equal = false
					break
				}
			}
			_ = sc.Close(context.Background())
			if equal {
				return
			}
		}
		if time.Now().After(deadline) {
			for _, table := range pgbenchTables {
				sc := standby.conn(t)
				p, s := dump(t, pc, table), dump(t, sc, table)
				t.Logf("table %s: primary %d rows, standby %d", table, len(p), len(s))
			}
			t.Fatalf("the standby's tables do not equal the primary's after 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestTwoServerProcessesReplicateAndTheStandbySurvivesKill9: a primary engine-server
// process and a standby process (serve --standby-of, base backup into an empty
// directory) on loopback. After pgbench-style writes (tables created after the base
// backup), the standby's tables equal the primary's row for row while it serves
// read-only queries: writes get 25006, pg_is_in_recovery() is true, pg_stat_wal_receiver
// says streaming. The standby is killed with SIGKILL mid-stream, the primary keeps
// writing, the standby restarts, catches up, and is equal again.
func TestTwoServerProcessesReplicateAndTheStandbySurvivesKill9(t *testing.T) {
	base := t.TempDir()
	pAddr, sAddr := freeAddr(t), freeAddr(t)
	primary := startServer(t, "primary", pAddr, "--data", filepath.Join(base, "primary"), "--init", "--buffer-pool", "16Mi")
	sdir := filepath.Join(base, "standby")
	standby := startServer(t, "standby", sAddr, "--standby-of", pAddr, "--user", "repl", "--data", sdir,
		"--basebackup-if-empty", "--name", "s1", "--buffer-pool", "16Mi")

	pc := primary.conn(t)
	pgbenchInit(t, pc)
	pgbenchWrites(t, pc, 0, 300)
	waitStandbyEqual(t, primary, standby)

	sc := standby.conn(t)
	var inRecovery bool
	if err := sc.QueryRow(context.Background(), "SELECT pg_is_in_recovery()", pgx.QueryExecModeSimpleProtocol).Scan(&inRecovery); err != nil || !inRecovery {
		t.Fatalf("pg_is_in_recovery() on the standby = %v, %v; want true", inRecovery, err)
	}
	var status string
	if err := sc.QueryRow(context.Background(), "SELECT status FROM pg_stat_wal_receiver", pgx.QueryExecModeSimpleProtocol).Scan(&status); err != nil || status != "streaming" {
		t.Fatalf("pg_stat_wal_receiver.status = %q, %v; want streaming", status, err)
	}
	_, err := sc.Exec(context.Background(), "INSERT INTO pgbench_history (seq) VALUES (-1)", pgx.QueryExecModeSimpleProtocol)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		t.Fatalf("INSERT on the standby: %v, want SQLSTATE 25006", err)
	}
	var replay *string
	if err := pc.QueryRow(context.Background(), "SELECT replay_lsn FROM pg_stat_replication WHERE application_name = 's1'",
		pgx.QueryExecModeSimpleProtocol).Scan(&replay); err != nil || replay == nil {
		t.Fatalf("pg_stat_replication.replay_lsn of s1 = %v, %v; want the standby's replay position", replay, err)
	}

	// kill -9 mid-stream: a writer runs while the standby dies.
	writing := make(chan struct{})
	go func() {
		defer close(writing)
		wc, err := primary.connect(context.Background())
		if err != nil {
			t.Error(err)
			return
		}
		defer func() { _ = wc.Close(context.Background()) }()
		pgbenchWrites(t, wc, 300, 400)
	}()
	time.Sleep(300 * time.Millisecond)
	standby.kill()
	<-writing
	pgbenchWrites(t, pc, 700, 100)
	standby.start()
	waitStandbyEqual(t, primary, standby)
	if !strings.Contains(standby.out.String(), "replaying") {
		t.Fatalf("the standby's log does not say it replays:\n%s", standby.out.String())
	}
}
