package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, Env{Stdout: &out, Stderr: &errOut})
	if code != 0 {
		t.Logf("vacuum-runner %v: exit %d: %s", args, code, errOut.String())
	}
	return code, out.String()
}

// A FULL whose index entries do not fit in maintenance memory spills sort runs. They go to
// <data>/pgsql_tmp on the data volume, never to the system temporary directory (in a pod, a
// 64Mi emptyDir at /tmp): here TMPDIR does not exist, so a spill there would fail the FULL.
func TestFullSpillsItsSortRunsIntoTheDataDirectoryNotTMPDIR(t *testing.T) {
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "no-such-dir"))
	dir := filepath.Join(t.TempDir(), "data")
	if code, _ := runMain(t, "init", "--data", dir); code != 0 {
		t.Fatal("init failed")
	}
	// 70,000 rows, 5% deleted: 66,500 entries of 16 bytes against the runner's smallest sort
	// memory, 1Mi (65,536 entries), spill one run of the index build.
	if code, _ := runMain(t, "bloat", "--data", dir, "--table", "t", "--rows", "70000", "--dead-fraction", "0.05",
		"--payload-bytes", "8", "--indexes", "1"); code != 0 {
		t.Fatal("bloat failed")
	}
	code, out := runMain(t, "full", "--data", dir, "--maintenance-work-mem", "1Mi", "--cost-delay", "0", "--json")
	if code != 0 {
		t.Fatalf("FULL with spilled sort runs failed with exit %d", code)
	}
	var rep runnerwire.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Totals.TuplesRemaining != 66500 || rep.Totals.TuplesRemoved != 3500 {
		t.Errorf("FULL kept %d and removed %d tuples, want 66500 and 3500", rep.Totals.TuplesRemaining, rep.Totals.TuplesRemoved)
	}
	ents, err := os.ReadDir(filepath.Join(dir, SortDirName))
	if err != nil || len(ents) != 0 {
		t.Errorf("sort directory %s: %v entries, err %v; want it present and empty", SortDirName, len(ents), err)
	}
	if code, _ := runMain(t, "check", "--data", dir); code != 0 {
		t.Error("check after the FULL is not clean")
	}
}
