package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/load"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
)

// `vacuum-runner load`, the binary, against PostgreSQL 15 (the load's own tests run it
// against the engine server): found through a Service's environment variables, stopped by
// SIGTERM.

// lockedBuffer is a bytes.Buffer a test reads while the process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func TestLoadReachesTheServiceFromItsVariablesAndExitsZeroOnSIGTERMWithItsTotals(t *testing.T) {
	db, conn, _ := postgres(t)
	host, port, err := net.SplitHostPort(pg.Addr())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "load", "--service", "shop-db", "--database", db, "--sslmode", "disable",
		"--rows", "200", "--rate", "100", "--connections", "2", "--report-every", "300ms", "--json")
	cmd.Env = append(os.Environ(), "SHOP_DB_SERVICE_HOST="+host, "SHOP_DB_SERVICE_PORT="+port,
		"PGUSER="+pgtest.Superuser, "PGPASSWORD="+pgtest.Password, "PGPASSFILE=/nonexistent")
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill() // still running after a failure
		}
	})
	waitFor(t, 30*time.Second, func() bool { return strings.Count(stdout.String(), "\n") >= 2 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("load exited with %v after SIGTERM, want 0\nstderr: %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("load still running 10 s after SIGTERM\nstderr: %s", stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var final load.Report
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &final); err != nil {
		t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
	}
	if !final.Final || final.Total.Failed != 0 || final.Total.Statements == 0 || final.Total.Updates == 0 {
		t.Fatalf("final report %+v: want statements, updates and no failure", final)
	}
	var rows, sum int64
	if err := conn.QueryRow(context.Background(), "SELECT count(*), sum(n) FROM vacuumops_load").Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	if rows != 200 || sum != final.Total.Updates {
		t.Errorf("vacuumops_load has %d rows with sum(n) %d, want 200 and the %d updates the load committed", rows, sum, final.Total.Updates)
	}
}

func TestLoadWithoutTheServicesVariablesNamesThem(t *testing.T) {
	r := vr(t, nil, "load", "--service", "shop-db", "--database", "shop")
	if r.code != 2 || !strings.Contains(r.stderr, "SHOP_DB_SERVICE_HOST") {
		t.Errorf("exit %d, stderr %q: want 2 naming SHOP_DB_SERVICE_HOST", r.code, r.stderr)
	}
	r = vr(t, nil, "load", "--server", "127.0.0.1:1", "--database", "shop", "--update-percent", "120")
	if r.code != 2 || !strings.Contains(r.stderr, "--update-percent") {
		t.Errorf("exit %d, stderr %q: want 2 naming --update-percent", r.code, r.stderr)
	}
}
