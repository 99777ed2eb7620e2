package vacuum_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

var crashIterations = flag.Int("vacuum.crash.iterations", 20, "SIGKILL iterations of each vacuum crash test")

const (
	crashDirEnv  = "VACUUM_TEST_CRASH_DIR"
	crashModeEnv = "VACUUM_TEST_CRASH_MODE"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		crashChild(dir, os.Getenv(crashModeEnv))
		return
	}
	os.Exit(m.Run())
}

// crashOpts give the killed vacuum a small pool (dirty pages leave the
// ring and the pool mid-vacuum) and frequent checkpoints.
func crashOpts() engine.Options {
	o := testOpts()
	o.CheckpointWALBytes = 256 << 10
	o.LockTimeout = 10 * time.Second
	return o
}

// crashVacuumOpts pace the vacuum so that it lasts a few hundred ms.
func crashVacuumOpts() vacuum.Options {
	o := slowOpts(40000)
	o.MaintenanceWorkMem = vacuum.MinMaintenanceWorkMem // many index passes
	return o
}

// crashChild opens dir, says "ready", vacuums table t (lazy or full), says
// "done" and waits to be killed.
func crashChild(dir, mode string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	db, err := engine.Open(dir, crashOpts())
	if err != nil {
		fail(err)
	}
	os.Stdout.WriteString("ready\n")
	switch mode {
	case "full":
		// Half the lazy vacuum's rate: at 40,000 units/s FULL finished
		// before the kill (0-300 ms) in 4 to 12 of 20 iterations, near
		// the limit of 10 below; at 20,000 none finished in 2 runs.
		o := crashVacuumOpts()
		o.Throttle.CostLimit /= 2
		_, err = db.VacuumFull(context.Background(), "t", o)
	case "lazy-parallel":
		// One index pass, both indexes at once, the heap pass on 3 workers,
		// the background WAL flusher on;
		// slower pacing so that it still lasts a few hundred ms.
		o := slowOpts(8000)
		o.IndexWorkers, o.HeapWorkers = 2, 3
		_, err = db.Vacuum(context.Background(), "t", o)
	case "lazy-resume":
		// A quarter of crashVacuumOpts' rate: at the full rate the first vacuum of
		// this small table could end inside the shortest delay before its kill
		// (50 ms), so a quiet machine sometimes resumed nothing.
		o := crashVacuumOpts()
		o.Throttle.CostLimit /= 4
		o.Resume = true
		_, err = db.Vacuum(context.Background(), "t", o)
	default:
		_, err = db.Vacuum(context.Background(), "t", crashVacuumOpts())
	}
	if err != nil {
		fail(err)
	}
	os.Stdout.WriteString("done\n")
	time.Sleep(time.Hour) // wait for the kill
}

func TestLazyVacuumSurvivesSIGKILL(t *testing.T) { crashLoop(t, "lazy") }

func TestVacuumFullSurvivesSIGKILL(t *testing.T) { crashLoop(t, "full") }

func TestParallelLazyVacuumSurvivesSIGKILL(t *testing.T) { crashLoop(t, "lazy-parallel") }

func crashLoop(t *testing.T, mode string) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	dir := filepath.Join(t.TempDir(), "data")
	opts := crashOpts()
	if err := engine.Init(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	tb := createTable(t, db, "t", 2, 2500, 100)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	next := int64(1 << 20)
	midway := 0
	for iter := range *crashIterations {
		// Churn: delete a quarter of the rows, insert as many new ones.
		db, err := engine.Open(dir, opts)
		if err != nil {
			t.Fatalf("iteration %d: open: %v", iter, err)
		}
		refreshTIDs(t, db, tb)
		n := deletePercent(t, db, tb, 25, rng)
		insertRows(t, db, tb, next, next+int64(n))
		next += int64(n)
		if err := db.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		finished := killVacuumChild(t, dir, mode, time.Duration(rng.Intn(300))*time.Millisecond)
		if !finished {
			midway++
		}

		db, err = engine.Open(dir, opts)
		if err != nil {
			t.Fatalf("iteration %d: reopen after SIGKILL: %v", iter, err)
		}
		checkClean(t, db)
		verifyRows(t, db, tb)
		checkNoOrphans(t, db, dir)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%s: %d of %d kills landed while the vacuum was running", mode, midway, *crashIterations)
	if midway*2 < *crashIterations {
		t.Errorf("only %d of %d kills interrupted a vacuum: the test does not exercise recovery", midway, *crashIterations)
	}
}

// killVacuumChild runs the child on dir and SIGKILLs it after delay. It
// reports whether the vacuum had finished by then.
func killVacuumChild(t *testing.T, dir, mode string, delay time.Duration) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashModeEnv+"="+mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 2)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if l := <-lines; l != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("vacuum child did not start (%q)", l)
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // the kill makes Wait report an error; the status is checked below
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("vacuum child exited by itself (%v) before the kill", cmd.ProcessState)
	}
	for l := range lines {
		if l == "done" {
			return true
		}
	}
	return false
}

// checkNoOrphans asserts that every relation file belongs to a relation
// of the catalog (a killed VACUUM FULL's new files are gone after Open).
func checkNoOrphans(t *testing.T, db *engine.DB, dir string) {
	t.Helper()
	tables, err := db.Tables()
	if err != nil {
		t.Fatal(err)
	}
	known := map[storage.RelFileNode]bool{}
	for _, ti := range tables {
		known[ti.Relfilenode] = true
		for _, ix := range ti.Indexes {
			known[ix.Relfilenode] = true
		}
	}
	for _, p := range relationFiles(t, dir) {
		rel, _, _, ok := storage.ParseFileName(filepath.Base(p))
		if ok && !known[rel] {
			t.Errorf("orphan relation file %s after reopening", p)
		}
	}
}

// TestResumedLazyVacuumAfterSIGKILLsRemovesEveryDeadTuple kills vacuums started with Resume
// at random moments, checking the directory after each kill, until one finishes: then no
// dead tuple is left and every live row reads right, as after one uninterrupted vacuum.
func TestResumedLazyVacuumAfterSIGKILLsRemovesEveryDeadTuple(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	dir := filepath.Join(t.TempDir(), "data")
	opts := crashOpts()
	if err := engine.Init(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	tb := createTable(t, db, "t", 2, 2500, 100)
	deletePercent(t, db, tb, 30, rand.New(rand.NewSource(5)))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	kills := 0
	for iter := 0; ; iter++ {
		if iter == 30 {
			t.Fatalf("no resumed vacuum finished in %d runs", iter)
		}
		if killVacuumChild(t, dir, "lazy-resume", time.Duration(50+rng.Intn(150))*time.Millisecond) {
			break
		}
		kills++
		db, err := engine.Open(dir, opts)
		if err != nil {
			t.Fatalf("reopen after kill %d: %v", kills, err)
		}
		checkClean(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if kills == 0 {
		t.Fatal("the first resumed vacuum finished before its kill: the test resumed nothing")
	}
	db, err = engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkClean(t, db)
	verifyRows(t, db, tb)
	if d := deadTuples(t, db); d != 0 {
		t.Errorf("after %d kills and the finishing resume %d dead tuples remain, want 0", kills, d)
	}
	t.Logf("%d kills before a resumed vacuum finished", kills)
}
