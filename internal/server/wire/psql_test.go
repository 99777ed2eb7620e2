package wire_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/pgtest"
	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

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

// runPsql runs a psql script against addr and returns its stdout and stderr interleaved
// as psql wrote them (one pipe, as pg_regress reads it).
func runPsql(t *testing.T, addr, script string, extra ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	args := append([]string{"-X", "-a", "-A", "-h", host, "-p", port, "-U", "app", "-d", "postgres", "-f", script}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, pgTool(t, "psql"), args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PGCONNECT_TIMEOUT=10", "PGSSLMODE=disable"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("psql: %v\n%s", err, out.String())
	}
	return out.String()
}

// TestPsqlRunsAScriptWithSQLSTATEErrors runs a psql script with errors; psql's \dt and \d
// (joins over pg_catalog) get 0A000, as docs/sql.md says.
func TestPsqlRunsAScriptWithSQLSTATEErrors(t *testing.T) {
	s := startServer(t, wire.Config{})
	script := filepath.Join(t.TempDir(), "s.sql")
	if err := os.WriteFile(script, []byte(`\set VERBOSITY sqlstate
CREATE TABLE t (id bigint PRIMARY KEY, v bigint NOT NULL);
INSERT INTO t VALUES (1, 10), (2, 20);
SELECT id, v * 2 AS twice FROM t ORDER BY id;
INSERT INTO t VALUES (1, 0);
BEGIN;
SELECT 1 / 0;
SELECT 1;
ROLLBACK;
SELECT count(*) FROM t;
\dt
\d t
`), 0o600); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(runPsql(t, s.addr, script))
	want := fmt.Sprintf(`\set VERBOSITY sqlstate
CREATE TABLE t (id bigint PRIMARY KEY, v bigint NOT NULL);
CREATE TABLE
INSERT INTO t VALUES (1, 10), (2, 20);
INSERT 0 2
SELECT id, v * 2 AS twice FROM t ORDER BY id;
id|twice
1|20
2|40
(2 rows)
INSERT INTO t VALUES (1, 0);
psql:%[1]s:5: ERROR:  23505
BEGIN;
BEGIN
SELECT 1 / 0;
psql:%[1]s:7: ERROR:  22012
SELECT 1;
psql:%[1]s:8: ERROR:  25P02
ROLLBACK;
ROLLBACK
SELECT count(*) FROM t;
count
2
(1 row)
\dt
psql:%[1]s:11: ERROR:  0A000
\d t
psql:%[1]s:12: ERROR:  0A000`, script)
	if got != want {
		t.Fatalf("psql output:\n%s\nwant:\n%s", got, want)
	}
}

// allowedDifferences are the lines where engine-server's psql output may differ from
// PostgreSQL's, each a formatting detail with its reason (at most five). Every other line,
// every result, row count and error code must be equal.
var allowedDifferences = []struct{ postgres, engine, reason string }{
	// None yet: the script's output is identical. A difference added here needs its reason.
}

func TestPsqlDifferentialAgainstPostgreSQL15(t *testing.T) {
	if len(allowedDifferences) > 5 {
		t.Fatal("at most five differences may be allowed")
	}
	pgAddr := startPostgres(t)
	s := startServer(t, wire.Config{})
	script, err := filepath.Abs("testdata/differential.sql")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(runPsql(t, pgAddr, script), "\n")
	got := strings.Split(runPsql(t, s.addr, script), "\n")
	for _, d := range diffLines(want, got) {
		if !allowed(d.postgres, d.engine) {
			t.Errorf("PostgreSQL line %d / engine-server line %d:\n  PostgreSQL:    %s\n  engine-server: %s", d.pgLine, d.engineLine, d.postgres, d.engine)
		}
	}
}

type lineDiff struct {
	pgLine, engineLine int
	postgres, engine   string
}

// diffLines pairs the lines of a and b that a longest common subsequence leaves unmatched
// (a line missing on one side pairs with "").
func diffLines(a, b []string) []lineDiff {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []lineDiff
	var onlyA, onlyB []int
	flush := func() {
		for k := 0; k < max(len(onlyA), len(onlyB)); k++ {
			d := lineDiff{}
			if k < len(onlyA) {
				d.pgLine, d.postgres = onlyA[k]+1, a[onlyA[k]]
			}
			if k < len(onlyB) {
				d.engineLine, d.engine = onlyB[k]+1, b[onlyB[k]]
			}
			out = append(out, d)
		}
		onlyA, onlyB = nil, nil
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			flush()
			i++
			j++
		case j >= m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
			onlyA = append(onlyA, i)
			i++
		default:
			onlyB = append(onlyB, j)
			j++
		}
	}
	flush()
	return out
}

func allowed(postgres, engine string) bool {
	for _, d := range allowedDifferences {
		if d.postgres == postgres && d.engine == engine {
			return true
		}
	}
	return false
}

// startPostgres starts a PostgreSQL 15 on a free loopback port, as an unprivileged user
// when the test runs as root, and returns its address. User app may log in (trust).
func startPostgres(t *testing.T) string {
	t.Helper()
	initdb, postgres := pgTool(t, "initdb"), pgTool(t, "postgres")
	base, err := os.MkdirTemp("", "pg15-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			t.Fatalf("running as root needs user nobody to run PostgreSQL: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(base, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(base, "data")
	run := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = base
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C", "LC_ALL=C", "TZ=UTC"}
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := run(ctx, initdb, "-D", data, "-U", "app", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("listener address %v is not TCP", ln.Addr())
	}
	port := tcp.Port
	_ = ln.Close()
	var logBuf bytes.Buffer
	srv := run(context.Background(), postgres, "-D", data, "-p", strconv.Itoa(port), "-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+base, "-c", "fsync=off", "-c", "timezone=UTC", "-c", "shared_buffers=16MB")
	srv.Stdout, srv.Stderr = &logBuf, &logBuf
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGINT) // fast shutdown
		_ = srv.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://app@%s/postgres?sslmode=disable", addr))
		if err == nil {
			_ = c.Close(context.Background())
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL did not start: %v\n%s", err, logBuf.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
