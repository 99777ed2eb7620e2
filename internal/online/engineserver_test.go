package online_test

import (
	"context"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// The engine-server half: the same online path against a real engine-server process (the
// binary, built here from cmd/engine-server), with SCRAM authentication on loopback.

const enginePassword = "engine-secret"

var (
	engineOnce sync.Once
	engineBin  string
	engineErr  error
)

// engineServerBinary builds cmd/engine-server once per test binary.
func engineServerBinary(t *testing.T) string {
	t.Helper()
	engineOnce.Do(func() {
		dir, err := os.MkdirTemp("", "engine-server-bin-")
		if err != nil {
			engineErr = err
			return
		}
		engineBin = filepath.Join(dir, "engine-server")
		out, err := osexec.Command("go", "build", "-o", engineBin, "../../cmd/engine-server").CombinedOutput()
		if err != nil {
			engineErr = fmt.Errorf("build engine-server: %v\n%s", err, out)
		}
	})
	if engineErr != nil {
		t.Fatal(engineErr)
	}
	return engineBin
}

// startEngineServer starts `engine-server serve --init` on a free loopback port with one
// SCRAM user, app, and returns its address; extra are more flags of serve.
func startEngineServer(t *testing.T, extra ...string) string {
	t.Helper()
	addr, _ := startEngineProcess(t, "app:"+enginePassword+"\n", true, extra...)
	return addr
}

// startEngineProcess starts `engine-server serve` (with --init when init) on a free
// loopback port with the given users file, and returns its address and process.
func startEngineProcess(t *testing.T, usersFile string, init bool, extra ...string) (string, *os.Process) {
	t.Helper()
	bin := engineServerBinary(t)
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	writeFile(t, users, usersFile)
	// A free port, the server listens on it next (a test-only race with other listeners),
	// and not one extra names: a --metrics-listen address picked by freeAddr a moment ago
	// is free again, and the kernel handed the same port out twice (CI of 2026-12-07).
	var addr string
	for addr == "" || slices.Contains(extra, addr) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		_ = ln.Close()
	}
	args := []string{"serve", "--data", filepath.Join(dir, "data"), "--listen", addr,
		"--auth", "scram", "--users-file", users, "--buffer-pool", "16Mi"}
	if init {
		args = append(args, "--init")
	}
	cmd := osexec.Command(bin, append(args, extra...)...)
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("engine-server log:\n%s", b)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return addr, cmd.Process
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine-server did not listen on %s within 30 s: %v", addr, err)
		}
		select {
		case <-done:
			t.Fatalf("engine-server exited before listening on %s", addr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func engineTarget(t *testing.T, addr string) online.Target {
	pw := filepath.Join(t.TempDir(), "password")
	writeFile(t, pw, enginePassword+"\n")
	return online.Target{Address: addr, Database: "postgres", User: "app", PasswordFile: pw,
		SSLMode: online.SSLDisable, NoEnvironment: true}
}

func engineConn(t *testing.T, addr string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(),
		fmt.Sprintf("postgres://app:%s@%s/postgres?sslmode=disable", enginePassword, addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// createUpdatedOrders creates table orders with 20,000 rows (a 100-byte pad each) and updates
// each once: 20,000 dead tuples for a VACUUM to remove, over a few hundred pages.
func createUpdatedOrders(t *testing.T, c *pgx.Conn) {
	t.Helper()
	exec(t, c, "CREATE TABLE orders (id bigint PRIMARY KEY, n bigint, pad bytea)")
	exec(t, c, "INSERT INTO orders SELECT g, g, '\\x"+fmt.Sprintf("%0200d", 0)+"'::bytea FROM generate_series(1, 20000) g")
	exec(t, c, "UPDATE orders SET n = n + 1")
}

func TestEngineServerOnlineRunRemovesDeadTuplesWithProgressAndRethrottlesTheRunningVacuum(t *testing.T) {
	addr := startEngineServer(t)
	c := engineConn(t, addr)
	createUpdatedOrders(t, c)
	dead := scalar[int64](t, c, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'orders'")
	if dead != 20000 {
		t.Fatalf("n_dead_tup %d before the run, want the 20000 updated rows' old versions", dead)
	}

	tg := engineTarget(t, addr)
	id, err := online.Identify(context.Background(), tg)
	if err != nil {
		t.Fatal(err)
	}
	if id.Server.Kind != online.KindEngineServer || id.SystemIdentifier == "" || id.SystemIdentifier == "0" {
		t.Fatalf("identified %+v, want the engine server with its system identifier", id)
	}

	var rec recorder
	slow := limits(100*time.Millisecond, 1) // about 10 pages a second: the run would take minutes
	run, err := online.New(context.Background(), tg, online.Options{Parallelism: 1, Tables: []string{"orders"},
		Throttle: slow, OnProgress: rec.add, SystemIdentifier: id.SystemIdentifier,
		PollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	if got := run.ThrottleApplies(); got != runnerwire.ThrottleAppliesImmediately {
		t.Errorf("ThrottleApplies %q on the engine server, want Immediately", got)
	}
	done := vacuumInBackground(run)

	// Progress moves under the slow throttle, read from the server's pg_stat_progress_vacuum.
	var pid int32
	waitUntil(t, 30*time.Second, "the server-side VACUUM's scan seen moving", func() bool {
		scanned := map[int64]bool{}
		for _, p := range rec.all() {
			if p.PagesScanned > 0 && p.Phase == runnerwire.PhaseScanningHeap {
				scanned[p.PagesScanned] = true
			}
		}
		return len(scanned) >= 3 && c.QueryRow(context.Background(), "SELECT pid FROM pg_stat_progress_vacuum").Scan(&pid) == nil
	})
	// The time slept reaches progress from the server's time_slept_ms while the VACUUM runs.
	waitUntil(t, 30*time.Second, "the server-side VACUUM's time slept seen in progress", func() bool {
		all := rec.all()
		p := all[len(all)-1]
		return p.SleptSeconds != nil && *p.SleptSeconds > 0
	})
	delay := scalar[int64](t, c, "SELECT cost_delay_us FROM pg_stat_progress_vacuum WHERE pid = $1", pid)
	if delay != 100000 {
		t.Fatalf("the server-side VACUUM's cost delay is %d us, want the run's 100000", delay)
	}

	// A throttle change reaches the running VACUUM through vacuum_set_throttle, and so does
	// the next one, on the same throttle session.
	if err := run.UpdateThrottle(limits(50*time.Millisecond, 4)); err != nil {
		t.Fatal(err)
	}
	if d, l := scalar[int64](t, c, "SELECT cost_delay_us FROM pg_stat_progress_vacuum WHERE pid = $1", pid),
		scalar[int64](t, c, "SELECT cost_limit FROM pg_stat_progress_vacuum WHERE pid = $1", pid); d != 50000 || l != 4 {
		t.Fatalf("after the first change the server-side VACUUM has cost delay %d us and limit %d, want 50000 and 4", d, l)
	}
	changed := time.Now()
	rep := liftThrottleAndWait(t, run, done)
	t.Logf("finished %.1fs after the throttle change", time.Since(changed).Seconds())
	if len(rep.Tables) != 1 || rep.Tables[0].TuplesRemoved != 20000 || rep.Server == nil ||
		rep.Server.SystemIdentifier != id.SystemIdentifier {
		t.Errorf("report %+v: want orders with 20000 tuples removed on server %s", rep, id.SystemIdentifier)
	}
	if n := scalar[int64](t, c, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'orders'"); n != 0 {
		t.Errorf("n_dead_tup %d after the run, want 0", n)
	}
	// The server's own count of the sleep: at 100 ms per cost unit, then 50 ms per 4 units,
	// the VACUUM slept at least the 300 ms before the first change was made.
	if s := rep.Totals.SleptSeconds; s == nil || *s < 0.3 || len(rep.Tables) != 1 ||
		rep.Tables[0].SleptSeconds == nil || *rep.Tables[0].SleptSeconds != *s {
		t.Errorf("report's time slept %v (table %+v), want the server's VERBOSE figure, at least 0.3 s", s, rep.Tables)
	}
	if rep.Foreground == nil || rep.ForegroundBaseline == nil {
		t.Errorf("report's foreground %+v baseline %+v, want the engine server's latency view read", rep.Foreground, rep.ForegroundBaseline)
	}
}

func TestEngineServerAcceptsByteRatesAndARingSizeWritten(t *testing.T) {
	addr := startEngineServer(t)
	c := engineConn(t, addr)
	exec(t, c, "CREATE TABLE t (id bigint PRIMARY KEY)")
	ring := int64(256 << 10)
	l := limits(0, 200)
	l.MaxReadBytesPerSecond = 64 << 20
	run, err := online.New(context.Background(), engineTarget(t, addr), online.Options{Parallelism: 1,
		Throttle: l, RingSize: &ring})
	if err != nil {
		t.Fatalf("New with a byte rate and a ring size: %v (the engine server honours both)", err)
	}
	_ = run.Close()
}

// waitUntil polls ok every 50 ms until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// vacuumResult is what a Run.Vacuum started by vacuumInBackground returned.
type vacuumResult struct {
	rep runnerwire.Report
	err error
}

// vacuumInBackground starts run.Vacuum and returns where its result arrives.
func vacuumInBackground(run *online.Run) <-chan vacuumResult {
	done := make(chan vacuumResult, 1)
	go func() { rep, err := run.Vacuum(context.Background()); done <- vacuumResult{rep, err} }()
	return done
}

// liftThrottleAndWait lifts run's throttle (no cost delay) and returns the report of the
// VACUUM started by vacuumInBackground, failing t unless it ends without error within 30 s.
func liftThrottleAndWait(t *testing.T, run *online.Run, done <-chan vacuumResult) runnerwire.Report {
	t.Helper()
	if err := run.UpdateThrottle(limits(0, 200)); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.err != nil {
			t.Fatal(res.err)
		}
		return res.rep
	case <-time.After(30 * time.Second):
		t.Fatal("the unthrottled VACUUM did not finish within 30 s of the throttle change")
		return runnerwire.Report{}
	}
}
