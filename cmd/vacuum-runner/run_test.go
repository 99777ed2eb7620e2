package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/promtool"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// slowRun starts `run` on a copy of the fixture, throttled to ~2000 cost units/s so that it
// takes several seconds, and waits until its vacuum has scanned some heap pages.
type slowRun struct {
	p              *proc
	dir, addr, log string
}

func startSlowRun(t *testing.T, extra ...string) *slowRun {
	t.Helper()
	s := &slowRun{dir: copyFixture(t), addr: freeAddr(t), log: filepath.Join(t.TempDir(), "termination-log")}
	args := append([]string{"run", "--mode", "LAZY", "--data", s.dir, "--listen", s.addr, "--termination-log", s.log,
		"--cost-delay", "10ms", "--cost-limit", "20"}, extra...)
	s.p = start(t, args...)
	s.waitProgress(t, func(p runnerwire.Progress) bool { return p.PagesScanned > 0 })
	return s
}

// waitProgress polls /progress until ok holds (10 s at most) and returns that Progress.
func (s *slowRun) waitProgress(t *testing.T, ok func(runnerwire.Progress) bool) runnerwire.Progress {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var p runnerwire.Progress
		getJSON(t, "http://"+s.addr+"/progress", &p)
		if !slices.Contains(runnerwire.Phases(), p.Phase) {
			t.Fatalf("progress phase %q is not one of %v", p.Phase, runnerwire.Phases())
		}
		if ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress never got there; last %+v\nstderr: %s", p, s.p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *slowRun) summary(t *testing.T) runnerwire.Summary {
	t.Helper()
	b, err := os.ReadFile(s.log)
	if err != nil {
		t.Fatalf("termination log: %v", err)
	}
	if len(b) > runnerwire.MaxSummaryBytes {
		t.Errorf("termination log holds %d bytes, over %d", len(b), runnerwire.MaxSummaryBytes)
	}
	var sum runnerwire.Summary
	decode(t, string(b), &sum)
	return sum
}

func TestThrottledRunServesProgressThatMovesForwardAndAcceptsANewThrottleWithTheToken(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	const token = "s3cret-token-of-this-run"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSlowRun(t, "--control-token-file", tokenFile)

	first := s.waitProgress(t, func(runnerwire.Progress) bool { return true })
	later := s.waitProgress(t, func(p runnerwire.Progress) bool { return p.PagesScanned > first.PagesScanned })
	if later.Table != "items" || later.TablesTotal != 1 || len(later.Tables) != 1 || later.Tables[0].Name != "items" {
		t.Errorf("progress %+v: want table items of 1", later)
	}
	if later.ElapsedSeconds <= first.ElapsedSeconds || later.PagesTotal == 0 || later.Percent <= 0 {
		t.Errorf("progress did not advance: first %+v, later %+v", first, later)
	}
	if body := getText(t, "http://"+s.addr+"/healthz"); !strings.Contains(body, "ok") {
		t.Errorf("/healthz says %q", body)
	}
	metrics := getText(t, "http://"+s.addr+"/metrics")
	for _, m := range []string{"vacuum_runner_heap_blocks_scanned_total", "vacuum_runner_phase{", "vacuum_runner_progress_ratio", "go_goroutines"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	promtool.CheckMetrics(t, []byte(metrics)) // the Prometheus naming guide, on the binary's own exposition

	url := "http://" + s.addr + "/throttle"
	unthrottled := `{"costDelay":"0s"}`
	for _, c := range []struct {
		name, auth, body string
		want             int
	}{
		{"no token", "", unthrottled, 401},
		{"wrong token", "Bearer not-the-token", unthrottled, 401},
		{"token as basic auth", "Basic " + token, unthrottled, 401},
		{"token prefix only", "Bearer " + token[:5], unthrottled, 401},
		{"not a throttle", "Bearer " + token, `{"costDelay":"2ms","speed":"max"}`, 400},
		{"out of range", "Bearer " + token, `{"costLimit":0}`, 400},
		{"too large", "Bearer " + token, `{"costDelay":"` + strings.Repeat("1", 20000) + `ms"}`, 413},
	} {
		if code, body := put(t, url, c.auth, c.body); code != c.want {
			t.Errorf("%s: PUT /throttle = %d %s, want %d", c.name, code, body, c.want)
		}
	}
	if p := s.waitProgress(t, func(runnerwire.Progress) bool { return true }); p.Phase == runnerwire.PhaseDone {
		t.Fatal("the run finished while still throttled; the fixture is too small for this test")
	}
	code, body := put(t, url, "Bearer "+token, `{"costDelay":"0s","maxReadBytesPerSecond":"0"}`)
	if code != 200 {
		t.Fatalf("PUT /throttle with the token = %d %s, want 200", code, body)
	}
	var applied runnerwire.Throttle
	decode(t, body, &applied)
	if applied.CostDelay == nil || applied.CostDelay.Duration != 0 || applied.CostLimit == nil || *applied.CostLimit != runnerwire.DefaultCostLimit {
		t.Errorf("PUT answered %s, want cost delay 0 and the other fields at their defaults", body)
	}
	if rc := s.p.wait(t, 30*time.Second); rc != 0 {
		t.Fatalf("run exit %d\nstderr: %s", rc, s.p.stderr.String())
	}
	if strings.Contains(s.p.stderr.String(), token) {
		t.Error("the runner logged its control token")
	}
	sum := s.summary(t)
	if sum.Phase != runnerwire.SummarySucceeded || sum.ExitCode != 0 || len(sum.Tables) != 1 ||
		sum.Totals.TuplesRemoved != fixtureDeleted+fixtureUpdated {
		t.Errorf("summary %+v: want Succeeded, exit 0, one table, %d tuples removed", sum, fixtureDeleted+fixtureUpdated)
	}
}

func TestSIGTERMStopsTheRunWithinTwoSecondsWritesASummaryAndLeavesTheTableConsistent(t *testing.T) {
	s := startSlowRun(t)
	sent := time.Now()
	if err := s.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rc := s.p.wait(t, 10*time.Second)
	took := time.Since(sent)
	if rc != runnerwire.ExitCancelled {
		t.Fatalf("exit %d after SIGTERM, want 5\nstderr: %s", rc, s.p.stderr.String())
	}
	t.Logf("stopped %v after SIGTERM", took)
	if took > 2*time.Second {
		t.Errorf("runner took %v to stop after SIGTERM, want under 2s", took)
	}
	sum := s.summary(t)
	if sum.Phase != runnerwire.SummaryCancelled || sum.ExitCode != runnerwire.ExitCancelled || !strings.Contains(sum.Message, "SIGTERM") {
		t.Errorf("summary %+v: want phase %s, exit 5, a message naming SIGTERM", sum, runnerwire.SummaryCancelled)
	}
	checkOK(t, s.dir)
}

func TestSecondRunnerOnALockedDirectoryExitsBusyAfterItsLockTimeout(t *testing.T) {
	s := startSlowRun(t)

	r := vr(t, nil, "vacuum", "--data", s.dir, "--lock-timeout", "700ms")
	if r.code != runnerwire.ExitBusy {
		t.Fatalf("second vacuum: exit %d, want 3\nstderr: %s", r.code, r.stderr)
	}
	if r.took < 700*time.Millisecond {
		t.Errorf("second vacuum gave up after %v, before its 700ms lock timeout", r.took)
	}
	if !strings.Contains(r.stderr, "busy") {
		t.Errorf("message %q does not say the directory is busy", r.stderr)
	}

	log := filepath.Join(t.TempDir(), "log")
	r = vr(t, nil, "run", "--data", s.dir, "--listen", freeAddr(t), "--termination-log", log, "--lock-timeout", "300ms")
	if r.code != runnerwire.ExitBusy {
		t.Fatalf("second run: exit %d, want 3\nstderr: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var sum runnerwire.Summary
	if err := json.Unmarshal(b, &sum); err != nil || sum.ExitCode != runnerwire.ExitBusy || sum.Phase != runnerwire.SummaryFailed {
		t.Errorf("second run's summary %s (%v): want Failed with exit code 3", b, err)
	}

	// A runner waiting for the lock still stops at once on SIGTERM.
	waitAddr := freeAddr(t)
	waiting := start(t, "run", "--data", s.dir, "--listen", waitAddr, "--termination-log", log, "--lock-timeout", "5m")
	// Its control server answers once it is up, which is after it took its signal handlers
	// and before it waits for the lock: a fixed sleep raced the start on a loaded machine.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if resp, err := http.Get("http://" + waitAddr + "/healthz"); err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the runner waiting for the lock did not serve /healthz within 10 s\nstderr: %s", waiting.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // into its lock wait
	if err := waiting.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if rc := waiting.wait(t, 2*time.Second); rc != runnerwire.ExitCancelled {
		t.Errorf("runner waiting for the lock: exit %d after SIGTERM, want 5\nstderr: %s", rc, waiting.stderr.String())
	}

	// The first run has no token file: its control endpoint is off.
	if code, body := put(t, "http://"+s.addr+"/throttle", "Bearer anything", `{}`); code != 403 {
		t.Errorf("PUT /throttle without a token file = %d %s, want 403", code, body)
	}
}

func TestRunTakesItsSpecFromAFileWithPerTableOverrides(t *testing.T) {
	dir := copyFixture(t)
	spec := `{"dataDir":"` + dir + `","mode":"full","tables":["items"],"throttle":{"costDelay":"0s"},` +
		`"bufferPoolSize":"32Mi","maintenanceWorkMem":"8Mi","indexWorkers":2,` +
		`"tableOverrides":[{"table":"items","throttle":{"maxWriteBytesPerSecond":"512Mi"}}]}`
	specFile := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(specFile, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "log")
	r := vr(t, nil, "run", "--spec-file", specFile, "--listen", freeAddr(t), "--termination-log", log)
	if r.code != 0 {
		t.Fatalf("run --spec-file: exit %d\nstderr: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var sum runnerwire.Summary
	decode(t, string(b), &sum)
	if sum.Phase != runnerwire.SummarySucceeded || len(sum.Tables) != 1 || sum.Tables[0].Mode != runnerwire.ModeFull {
		t.Fatalf("summary %s: want one table rewritten by VACUUM FULL", b)
	}
	if got := sum.Tables[0].WriteRate.Configured; got != 512<<20 {
		t.Errorf("the table's write limit is %v, want its override's 512Mi", got)
	}
	if s := stats(t, dir); s.DeadTuples != 0 || s.LiveTuples != fixtureRows-fixtureDeleted {
		t.Errorf("after run: %+v, want no dead tuples and %d live", s, fixtureRows-fixtureDeleted)
	}
}

// TestCrashedDirectoryExitsSevenUnlessItsLastOpenerWasThisRunOrRecoveryIsAllowed kills a run
// (SIGKILL, so the directory needs crash recovery) and opens the directory again: a runner
// that is not a later attempt of the same run exits 7 and leaves the directory as it was; a
// later attempt of the same run (same runID) recovers it, as does --allow-crash-recovery.
func TestCrashedDirectoryExitsSevenUnlessItsLastOpenerWasThisRunOrRecoveryIsAllowed(t *testing.T) {
	s := startSlowRun(t, "--spec", `{"runID":"3f1c2a4e-run-a"}`)
	if err := s.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = s.p.wait(t, 10*time.Second)
	control, err := os.ReadFile(filepath.Join(s.dir, "control"))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "--data", s.dir},
		{"stats", "--data", s.dir},
		{"vacuum", "--data", s.dir, "--cost-delay", "0"},
		{"bloat", "--data", s.dir, "--table", "more", "--rows", "10"},
	} {
		r := vr(t, nil, args...)
		if r.code != runnerwire.ExitNeedsRecovery || !strings.Contains(r.stderr, "run 3f1c2a4e-run-a") {
			t.Fatalf("%v on a crashed directory: exit %d, stderr %q; want 7 naming the last opener", args, r.code, r.stderr)
		}
	}
	other := vr(t, nil, "run", "--spec", `{"runID":"another-run"}`, "--mode", "lazy", "--data", s.dir,
		"--listen", freeAddr(t), "--termination-log", filepath.Join(t.TempDir(), "log"), "--cost-delay", "0")
	if other.code != runnerwire.ExitNeedsRecovery {
		t.Fatalf("run of another run on the crashed directory: exit %d (%s), want 7", other.code, other.stderr)
	}
	if after, err := os.ReadFile(filepath.Join(s.dir, "control")); err != nil || string(after) != string(control) {
		t.Fatalf("a refused runner changed the control file (%v)", err)
	}
	again := vr(t, nil, "run", "--spec", `{"runID":"3f1c2a4e-run-a"}`, "--mode", "lazy", "--data", s.dir,
		"--listen", freeAddr(t), "--termination-log", filepath.Join(t.TempDir(), "log"), "--cost-delay", "0")
	if again.code != 0 {
		t.Fatalf("a later attempt of the same run: exit %d (%s), want 0", again.code, again.stderr)
	}
	checkOK(t, s.dir)

	// --allow-crash-recovery recovers a directory another opener crashed.
	s2 := startSlowRun(t)
	if err := s2.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = s2.p.wait(t, 10*time.Second)
	if r := vr(t, nil, "check", "--data", s2.dir); r.code != runnerwire.ExitNeedsRecovery {
		t.Fatalf("check of the crashed directory: exit %d, want 7", r.code)
	}
	mustVR(t, "check", "--data", s2.dir, "--allow-crash-recovery")
	checkOK(t, s2.dir)
}
