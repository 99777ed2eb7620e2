package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/fixture"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for the server's log writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// goServe runs Main with args in a goroutine under a context that stands for main's
// signal context, and returns Main's log and what stops it: stop cancels the context, waits
// up to 30 s for Main to return and gives its exit code (-1 if it did not return). stop may
// be called more than once; the test's cleanup calls it too.
func goServe(t *testing.T, args ...string) (*syncBuffer, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	exit := make(chan int, 1)
	go func() { exit <- Main(ctx, args, logs, logs) }()
	var once sync.Once
	code := -1
	stop := func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-exit:
			case <-time.After(30 * time.Second):
				t.Errorf("serve did not stop within 30 s of its signal\n%s", logs.String())
			}
		})
		return code
	}
	t.Cleanup(func() { stop() })
	return logs, stop
}

// connect connects as app to the server starting on addr, retrying for 30 s.
func connect(t *testing.T, addr string, logs *syncBuffer) *pgx.Conn {
	t.Helper()
	url := fmt.Sprintf("postgres://app@%s/postgres?sslmode=disable", addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(context.Background(), url)
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not accept connections: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServeHoldsTheLockAndShutsDownCleanlyRollingBackOpenTransactions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	logs, stop := goServe(t, "serve", "--init", "--data", dir, "--auth", "trust", "--listen", addr, "--buffer-pool", "4Mi")
	c := connect(t, addr, logs)
	bg := context.Background()
	for _, q := range []string{"CREATE TABLE t (id bigint PRIMARY KEY)", "INSERT INTO t VALUES (1)", "BEGIN", "INSERT INTO t VALUES (2)"} {
		if _, err := c.Exec(bg, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := engine.Open(dir, engine.Options{}); !errors.Is(err, engine.ErrInUse) {
		t.Fatalf("opening the served directory: %v, want ErrInUse (serve holds the lock)", err)
	}
	if code := stop(); code != ExitOK { // what SIGTERM does in main
		t.Fatalf("exit code %d\n%s", code, logs.String())
	}
	if _, err := c.Exec(bg, "SELECT 1"); err == nil {
		t.Fatal("the idle-in-transaction session still works after shutdown")
	}
	db, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	if !db.RecoveryInfo().CleanShutdown {
		t.Fatal("the data directory was not shut down cleanly (no final checkpoint)")
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := tx.Scan("t", func(_ page.TID, row []any) error {
		id, ok := row[0].(int64)
		if !ok {
			return fmt.Errorf("id is %T", row[0])
		}
		ids = append(ids, id)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback()
	if fmt.Sprint(ids) != "[1]" {
		t.Fatalf("rows after shutdown %v, want [1] (the committed row; the open transaction rolled back)", ids)
	}
	if !strings.Contains(logs.String(), "final checkpoint taken") {
		t.Fatalf("log does not report the final checkpoint:\n%s", logs.String())
	}
}

func TestServeRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"trust on a non-loopback address", []string{"serve", "--data", dir, "--auth", "trust", "--listen", "0.0.0.0:0"}, "loopback"},
		{"scram without users", []string{"serve", "--data", dir, "--listen", "127.0.0.1:0"}, "--users-file"},
		{"unknown auth", []string{"serve", "--data", dir, "--auth", "md5"}, "scram or trust"},
		{"no data", []string{"serve", "--auth", "trust"}, "--data"},
		{"cert without key", []string{"serve", "--data", dir, "--auth", "trust", "--tls-cert", "x"}, "go together"},
		{"zero checkpoint distance", []string{"serve", "--data", dir, "--auth", "trust", "--checkpoint-wal-size", "0"}, "--checkpoint-wal-size must be positive"},
		{"zero connections", []string{"serve", "--data", dir, "--auth", "trust", "--max-connections", "0"}, "at least 1"},
		{"negative processors", []string{"serve", "--data", dir, "--auth", "trust", "--gomaxprocs", "-1"}, "--gomaxprocs must be 0 or more"},
		{"negative vacuum nice", []string{"serve", "--data", dir, "--auth", "trust", "--vacuum-nice", "-1"}, "--vacuum-nice must be between 0 and 39"},
		{"vacuum nice above the range", []string{"serve", "--data", dir, "--auth", "trust", "--vacuum-nice", "40"}, "--vacuum-nice must be between 0 and 39"},
		{"unknown vacuum scheduling policy", []string{"serve", "--data", dir, "--auth", "trust", "--vacuum-sched", "batch"}, `--vacuum-sched must be normal or idle, got "batch"`},
		{"not a data directory", []string{"serve", "--data", dir, "--auth", "trust", "--listen", "127.0.0.1:0"}, "not a data directory"},
		{"pprof on a non-loopback address", []string{"serve", "--data", dir, "--auth", "trust", "--listen", "127.0.0.1:0", "--pprof", "0.0.0.0:0"}, "--pprof is allowed only on a loopback"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := Main(context.Background(), tc.args, &out, &out); code != ExitUsage {
				t.Fatalf("exit code %d, want %d\n%s", code, ExitUsage, out.String())
			}
			if !strings.Contains(out.String(), tc.msg) {
				t.Fatalf("message %q does not mention %q", out.String(), tc.msg)
			}
		})
	}
}

// TestServeUpgradeServesADirectoryAnOlderBuildWrote: serve refuses a format-3
// directory (the fixture ends in a crash after a VACUUM FULL), naming the upgrade;
// serve --upgrade upgrades it, recovers it and serves its rows; a second start with
// --upgrade finds nothing to do.
func TestServeUpgradeServesADirectoryAnOlderBuildWrote(t *testing.T) {
	dir := fixture.Extract(t, fixture.Upgrade("v3.tar.gz"))
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"serve", "--data", dir, "--auth", "trust", "--listen", freeAddr(t)}, &out, &out); code == ExitOK ||
		!strings.Contains(out.String(), "vacuum-runner upgrade") {
		t.Fatalf("serve of a format-3 directory without --upgrade: exit %d, %q; want a failure naming vacuum-runner upgrade", code, out.String())
	}
	for i, want := range []string{"upgraded " + dir + " from format version 3 to 4", ""} {
		addr := freeAddr(t)
		logs, stop := goServe(t, "serve", "--upgrade", "--data", dir, "--auth", "trust", "--listen", addr, "--buffer-pool", "4Mi")
		c := connect(t, addr, logs)
		var n int64
		if err := c.QueryRow(context.Background(), "SELECT count(*) FROM accounts").Scan(&n); err != nil {
			t.Fatal(err)
		}
		// The fixture's rows: ids 1..3000 but the multiples of 7, and 10 committed after its FULL.
		if n != 3000-3000/7+10 {
			t.Fatalf("start %d: %d rows in accounts, want %d", i+1, n, 3000-3000/7+10)
		}
		_ = c.Close(context.Background())
		if code := stop(); code != ExitOK {
			t.Fatalf("start %d: exit code %d\n%s", i+1, code, logs.String())
		}
		upgraded := strings.Contains(logs.String(), "upgraded ")
		if want != "" && !strings.Contains(logs.String(), want) || want == "" && upgraded {
			t.Fatalf("start %d: log %q, want the line %q", i+1, logs.String(), want)
		}
	}
}

func TestInitCreatesADataDirectoryOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"init", "--data", dir}, &out, &out); code != ExitOK {
		t.Fatalf("init: %d %s", code, out.String())
	}
	if code := Main(context.Background(), []string{"init", "--data", dir}, &out, &out); code != ExitUsage {
		t.Fatalf("second init: %d, want %d", code, ExitUsage)
	}
}

func TestServeWithPprofServesGoProfilesOnItsLoopbackAddress(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	addr, prof := freeAddr(t), freeAddr(t)
	logs, _ := goServe(t, "serve", "--init", "--data", dir, "--auth", "trust", "--listen", addr,
		"--buffer-pool", "4Mi", "--pprof", prof)
	get := func(path string) (int, string, error) {
		resp, err := http.Get("http://" + prof + path)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, err := get("/debug/pprof/")
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no profiler on %s: %v (status %d)\n%s", prof, err, code, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, tc := range []struct{ path, want string }{
		{"/debug/pprof/heap?debug=1", "heap profile:"},
		{"/debug/pprof/goroutine?debug=1", "goroutine profile:"},
		{"/debug/pprof/symbol", "num_symbols"},
	} {
		code, body, err := get(tc.path)
		if err != nil || code != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: status %d, err %v, body without %q: %.200s", tc.path, code, err, tc.want, body)
		}
	}
	if !strings.Contains(logs.String(), "profiler on http://"+prof+"/debug/pprof/") {
		t.Errorf("the log does not name the profiler's address:\n%s", logs.String())
	}
}

// TestServeCheckpointsAfterTheWALSizeItIsGiven: --checkpoint-wal-size sets how much WAL
// starts an automatic checkpoint. A few MiB of inserts, far below the 64Mi default, move
// the control file's checkpoint on a server given 1Mi, and the server's log says so, with
// what the checkpoint wrote (as PostgreSQL's log_checkpoints).
func TestServeCheckpointsAfterTheWALSizeItIsGiven(t *testing.T) {
	dir, c, logs := startServeLogs(t, "--buffer-pool", "4Mi", "--checkpoint-wal-size", "1Mi")
	before, err := wal.ReadControl(vfs.NewOS(nil), dir)
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	if _, err := c.Exec(bg, "CREATE TABLE t (id bigint PRIMARY KEY, pad text)"); err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 500)
	for i := range 8 { // 8 x 1000 rows of ~0.5 KiB: about 4 MiB of WAL
		if _, err := c.Exec(bg, "INSERT INTO t SELECT g, $1 FROM generate_series($2::bigint, $3::bigint) AS g", pad, i*1000, i*1000+999); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, err := wal.ReadControl(vfs.NewOS(nil), dir)
		if err != nil {
			t.Fatal(err)
		}
		if after.CheckpointLSN > before.CheckpointLSN && strings.Contains(logs.String(), "engine: checkpoint complete: wrote ") {
			if !strings.Contains(logs.String(), "engine: checkpoint starting: wal") {
				t.Errorf("the log does not say the WAL distance started the checkpoint:\n%s", logs.String())
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint at %v (before %v) 10 s after about 4 MiB of WAL, with --checkpoint-wal-size 1Mi; the log:\n%s",
				after.CheckpointLSN, before.CheckpointLSN, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startServe runs serve --init on a fresh data directory under trust on a free loopback
// port, with extra flags, until the test ends, and returns the directory and a session.
func startServe(t *testing.T, extra ...string) (string, *pgx.Conn) {
	t.Helper()
	dir, c, _ := startServeLogs(t, extra...)
	return dir, c
}

// startServeLogs is startServe that also returns the server's log.
func startServeLogs(t *testing.T, extra ...string) (string, *pgx.Conn, *syncBuffer) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	addr := freeAddr(t)
	logs, _ := goServe(t, append([]string{"serve", "--init", "--data", dir, "--auth", "trust", "--listen", addr}, extra...)...)
	url := fmt.Sprintf("postgres://app@%s/postgres?sslmode=disable", addr)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.Connect(context.Background(), url)
		if err == nil {
			t.Cleanup(func() { _ = c.Close(context.Background()) })
			return dir, c, logs
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not accept connections: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// oDirect is Linux's O_DIRECT as /proc/PID/fdinfo's flags field prints it (octal).
const oDirect = 0o40000

// directFiles counts this process's open files under dir, and how many of them were
// opened with O_DIRECT, from /proc/self/fd and /proc/self/fdinfo.
func directFiles(t *testing.T, dir string) (open, direct int) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to read open files' flags from: %v", err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err != nil || !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", fd.Name()))
		if err != nil {
			continue // closed since the listing
		}
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "flags:"); ok {
				flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
				if err != nil {
					t.Fatalf("fdinfo of %s: flags %q: %v", target, v, err)
				}
				open++
				if flags&oDirect != 0 {
					direct++
				}
			}
		}
	}
	return open, direct
}

// TestServeDirectIOOpensRelationFilesWithODirect: with --direct-io the server reads and
// writes its tables' files with O_DIRECT (the buffer pool their only cache); without it,
// through the page cache. The file system of the test's directory must take O_DIRECT (a
// refusal falls back to buffered I/O, and the test says so rather than pass).
func TestServeDirectIOOpensRelationFilesWithODirect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flags  []string
		direct bool
	}{
		{"with --direct-io", []string{"--direct-io"}, true},
		{"without", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, c := startServe(t, append([]string{"--buffer-pool", "4Mi"}, tc.flags...)...)
			bg := context.Background()
			if _, err := c.Exec(bg, "CREATE TABLE t (id bigint PRIMARY KEY, pad text)"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(bg, "INSERT INTO t SELECT g, 'x' FROM generate_series(1, 1000) AS g"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Exec(bg, "CHECKPOINT"); err != nil { // writes the table's pages to its files
				t.Fatal(err)
			}
			open, direct := directFiles(t, filepath.Join(dir, "base"))
			if open == 0 {
				t.Fatalf("no relation file of %s is open after a CHECKPOINT of a new table", dir)
			}
			switch {
			case tc.direct && direct == 0:
				t.Fatalf("--direct-io: none of the %d open relation files has O_DIRECT (does %s's file system refuse it?)", open, dir)
			case !tc.direct && direct > 0:
				t.Fatalf("without --direct-io: %d of the %d open relation files have O_DIRECT", direct, open)
			}
		})
	}
}
