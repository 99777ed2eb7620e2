package main

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/runner"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

func stats(t *testing.T, dir string) runner.TableStatsOutput {
	t.Helper()
	var s runner.StatsOutput
	decode(t, mustVR(t, "stats", "--data", dir, "--json").stdout, &s)
	if len(s.Tables) != 1 {
		t.Fatalf("stats lists %d tables, want 1: %+v", len(s.Tables), s)
	}
	return s.Tables[0]
}

func checkOK(t *testing.T, dir string) {
	t.Helper()
	var c runner.CheckOutput
	decode(t, mustVR(t, "check", "--data", dir, "--json").stdout, &c)
	if !c.OK || len(c.Problems) != 0 {
		t.Fatalf("check found problems: %+v", c)
	}
}

// bloat makes tables of the data model's column types (text keys with
// NULLs here) and stats reports the types, each index's key columns and
// its page layout; vacuum then leaves a directory that checks clean.
func TestBloatOfTextKeysWithNullsThenStatsShowsTheirTypes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustVR(t, "init", "--data", dir)
	mustVR(t, "bloat", "--data", dir, "--table", "names", "--rows", "4000", "--indexes", "2",
		"--key-type", "varchar(20)", "--null-fraction", "0.25", "--dead-fraction", "0.5", "--seed", "7")
	st := stats(t, dir)
	want := []runner.ColumnOutput{{Name: "id", Type: "int8"}, {Name: "k1", Type: "varchar(20)"}, {Name: "payload", Type: "bytea"}}
	if !slices.Equal(st.Columns, want) {
		t.Fatalf("stats columns %+v, want %+v", st.Columns, want)
	}
	if len(st.Indexes) != 2 || !slices.Equal(st.Indexes[1].Columns, []string{"k1"}) || st.Indexes[1].Layout != 2 {
		t.Fatalf("stats indexes %+v, want names_k1_idx on k1 in layout 2", st.Indexes)
	}
	// About a quarter of the k1 values are NULL and have no entry.
	if e := st.Indexes[1].Entries; e < 2800 || e > 3200 {
		t.Fatalf("k1 index holds %d entries of 4000 rows, want about 3000 (25%% NULL)", e)
	}
	mustVR(t, "vacuum", "--data", dir, "--cost-delay", "0")
	checkOK(t, dir)
	if out := mustVR(t, "stats", "--data", dir).stdout; !strings.Contains(out, "names (id int8, k1 varchar(20), payload bytea)") {
		t.Fatalf("stats text output lacks the column types:\n%s", out)
	}
}

func TestBloatThenVacuumRemovesEveryDeadTupleAndFullShrinksTheTable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	mustVR(t, "init", "--data", dir)
	out := mustVR(t, "bloat", "--data", dir, "--table", "orders", "--rows", "20000", "--indexes", "3",
		"--dead-fraction", "0.25", "--update-fraction", "0.2", "--payload-bytes", "120", "--seed", "3").stdout
	if !strings.Contains(out, "deleted 5000, updated 3000") {
		t.Errorf("bloat says %q, want it to report 5000 deleted and 3000 updated", out)
	}

	before := stats(t, dir)
	if before.LiveTuples != 15000 || before.DeadTuples != 8000 {
		t.Fatalf("after bloat: live %d dead %d, want 15000 live and 8000 dead (5000 deleted + 3000 updated)",
			before.LiveTuples, before.DeadTuples)
	}
	if len(before.Indexes) != 3 || before.Indexes[0].Column != "id" || before.Indexes[2].Column != "k2" {
		t.Fatalf("indexes %+v, want id, k1, k2", before.Indexes)
	}

	var rep runnerwire.Report
	decode(t, mustVR(t, "vacuum", "--data", dir, "--json", "--cost-delay", "0").stdout, &rep)
	if len(rep.Tables) != 1 || rep.Tables[0].TuplesRemoved != before.DeadTuples {
		t.Fatalf("vacuum --json: %+v, want one table with %d tuples removed", rep.Tables, before.DeadTuples)
	}
	if tr := rep.Tables[0]; tr.Mode != runnerwire.ModeLazy || tr.TuplesRemaining != 15000 || tr.IndexPasses < 1 || len(tr.Indexes) != 3 {
		t.Errorf("vacuum table result %+v: want Lazy, 15000 remaining, at least 1 index pass, 3 indexes", tr)
	}
	if rep.Totals.TuplesRemoved != before.DeadTuples || rep.Totals.TablesVacuumed != 1 {
		t.Errorf("totals %+v do not sum the table", rep.Totals)
	}
	checkOK(t, dir)
	after := stats(t, dir)
	if after.DeadTuples != 0 || after.LiveTuples != 15000 {
		t.Fatalf("after vacuum: live %d dead %d, want 15000 and 0", after.LiveTuples, after.DeadTuples)
	}

	var full runnerwire.Report
	decode(t, mustVR(t, "full", "--data", dir, "--json", "--cost-delay", "0", "--index-workers", "2").stdout, &full)
	if len(full.Tables) != 1 || full.Tables[0].Mode != runnerwire.ModeFull {
		t.Fatalf("full --json: %+v", full.Tables)
	}
	shrunk := stats(t, dir)
	if shrunk.Pages >= after.Pages || shrunk.LiveTuples != 15000 {
		t.Fatalf("VACUUM FULL left %d pages (was %d) and %d live tuples; want fewer pages, 15000 live",
			shrunk.Pages, after.Pages, shrunk.LiveTuples)
	}
	if full.Tables[0].PagesRemaining != shrunk.Pages {
		t.Errorf("full reports %d pages remaining, stats says %d", full.Tables[0].PagesRemaining, shrunk.Pages)
	}
	checkOK(t, dir)
}

func TestVacuumWithoutJSONPrintsAVerboseReport(t *testing.T) {
	dir := copyFixture(t)
	out := mustVR(t, "vacuum", "--data", dir, "--cost-delay", "0", "--max-read-rate", "0").stdout
	for _, want := range []string{`vacuum of "items"`, "tuples: " + strconv.Itoa(fixtureDeleted+fixtureUpdated) + " removed",
		"buffer usage:", "WAL usage:", "throttle:", "no limit", "total: 1 tables vacuumed"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

func TestMinDeadPercentSkipsTablesBelowIt(t *testing.T) {
	dir := copyFixture(t)
	var rep runnerwire.Report
	decode(t, mustVR(t, "vacuum", "--data", dir, "--json", "--cost-delay", "0", "--min-dead-percent", "90").stdout, &rep)
	if len(rep.Tables) != 1 || !rep.Tables[0].Skipped || rep.Totals.TablesSkipped != 1 {
		t.Fatalf("with --min-dead-percent 90 on a table ~25%% dead: %+v, want it skipped", rep)
	}
	if s := stats(t, dir); s.DeadTuples != fixtureDeleted+fixtureUpdated {
		t.Errorf("a skipped table lost dead tuples: %d", s.DeadTuples)
	}
}

func TestBadInputExitsTwoWithAOneLineMessage(t *testing.T) {
	dir := copyFixture(t)
	notData := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string // in the message
	}{
		{"unknown flag", []string{"vacuum", "--data", dir, "--fast"}, "unknown flag: --fast"},
		{"bad quantity", []string{"vacuum", "--data", dir, "--ring-size", "lots"}, "--ring-size"},
		{"ring size out of range", []string{"vacuum", "--data", dir, "--ring-size", "1Ki"}, "--ring-size: must be 0 or between 128Ki and 16Gi"},
		{"parallelism 0", []string{"vacuum", "--data", dir, "--parallelism", "0"}, "--parallelism: must be between 1 and 64, got 0"},
		{"unknown mode", []string{"run", "--mode", "quick", "--data", dir, "--listen", "127.0.0.1:0",
			"--termination-log", filepath.Join(t.TempDir(), "log")}, `--mode: must be Lazy or Full, got "quick"`},
		{"missing data", []string{"vacuum"}, "--data is required"},
		{"unknown table", []string{"vacuum", "--data", dir, "--table", "nosuch"}, `unknown table "nosuch"`},
		{"not a data directory", []string{"stats", "--data", notData}, "is not a data directory"},
		{"unknown command", []string{"sweep"}, `unknown command "sweep"`},
		{"positional argument", []string{"check", "--data", dir, "extra"}, `unexpected argument "extra"`},
		{"bad cost delay", []string{"full", "--data", dir, "--cost-delay", "1s"}, "--cost-delay: must be between 0 and 100ms"},
		{"bad spec", []string{"run", "--spec", `{"mode":"Lazy","costs":1}`, "--listen", "127.0.0.1:0",
			"--termination-log", filepath.Join(t.TempDir(), "log")}, `unknown field "costs"`},
		{"bloat fraction", []string{"bloat", "--data", dir, "--table", "x", "--dead-fraction", "2"}, "--dead-fraction must be between 0 and 1"},
		{"bloat key type", []string{"bloat", "--data", dir, "--table", "x", "--key-type", "int4(3)"}, "--key-type: int4 takes no length"},
		{"bloat null fraction", []string{"bloat", "--data", dir, "--table", "x", "--null-fraction", "-1"}, "--null-fraction must be between 0 and 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := vr(t, nil, c.args...)
			if r.code != runnerwire.ExitBadInput {
				t.Fatalf("exit %d, want %d\nstderr: %s", r.code, runnerwire.ExitBadInput, r.stderr)
			}
			msg := strings.TrimRight(r.stderr, "\n")
			if lines := strings.Split(msg, "\n"); len(lines) != 1 && !strings.HasPrefix(c.args[0], "run") {
				t.Errorf("message has %d lines, want one: %q", len(lines), msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("message %q does not say %q", msg, c.want)
			}
		})
	}
}

func TestRunRefusesASpecThatDoesNotFitTheCgroupMemoryLimit(t *testing.T) {
	dir := copyFixture(t)
	for _, v := range []struct{ version, file string }{{"v2", "memory.max"}, {"v1", "memory/memory.limit_in_bytes"}} {
		t.Run(v.version, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, v.file)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("268435456\n"), 0o644); err != nil { // 256Mi
				t.Fatal(err)
			}
			env := []string{"VACUUM_RUNNER_CGROUP_ROOT=" + root}
			r := vr(t, env, "vacuum", "--data", dir, "--buffer-pool", "256Mi", "--parallelism", "2")
			if r.code != runnerwire.ExitBadInput {
				t.Fatalf("exit %d, want 2; stderr %s", r.code, r.stderr)
			}
			// 256Mi + 2 x 64Mi + 64Mi = 448Mi needed, 256Mi allowed.
			for _, want := range []string{"448Mi", "256Mi", "memory limit"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("message %q does not name %s", r.stderr, want)
				}
			}
			if r := vr(t, env, "vacuum", "--data", dir, "--buffer-pool", "64Mi", "--cost-delay", "0"); r.code != 0 {
				t.Errorf("a run that fits (64+64+64 Mi) exited %d: %s", r.code, r.stderr)
			}
		})
	}
}

func TestCorruptedHeapPageExitsFourNamingFileAndBlock(t *testing.T) {
	dir := copyFixture(t)
	heap := heapFile(t, dir)
	corruptBlock(t, heap, 3)

	r := vr(t, nil, "vacuum", "--data", dir, "--cost-delay", "0")
	if r.code != runnerwire.ExitCorruption {
		t.Fatalf("vacuum of a corrupted table: exit %d, want 4\nstderr: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, filepath.Base(heap)) || !strings.Contains(r.stderr, "block 3") {
		t.Errorf("stderr %q does not name file %s and block 3", r.stderr, filepath.Base(heap))
	}

	c := vr(t, nil, "check", "--data", dir, "--json")
	if c.code != runnerwire.ExitCorruption {
		t.Fatalf("check: exit %d, want 4\nstderr: %s", c.code, c.stderr)
	}
	var out runner.CheckOutput
	decode(t, c.stdout, &out)
	if out.OK || len(out.Problems) == 0 || !strings.HasSuffix(out.Problems[0].File, filepath.Base(heap)) || out.Problems[0].Block != 3 {
		t.Errorf("check --json = %+v, want a problem in %s block 3", out, filepath.Base(heap))
	}
}

// heapFile returns the main fork of the fixture's table: the relation created first (the
// lowest relfilenode), its indexes after it.
func heapFile(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "base"))
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			nums = append(nums, n)
		}
	}
	if len(nums) == 0 {
		t.Fatal("no relation files in base/")
	}
	sort.Ints(nums)
	return filepath.Join(dir, "base", strconv.Itoa(nums[0]))
}

// corruptBlock flips one byte in the middle of block blk of file.
func corruptBlock(t *testing.T, file string, blk int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	off := blk*8192 + 4000
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestQuarantineIsReportedByStatsAndEmptiedByCheckPurge makes a directory
// look inconsistent (a catalog switch of unknown outcome, with a relation
// file the catalog does not name): the runner's Open moves the file into
// the quarantine instead of deleting it, stats reports its size, and
// check --purge-quarantine empties it.
func TestQuarantineIsReportedByStatsAndEmptiedByCheckPurge(t *testing.T) {
	dir := copyFixture(t)
	heap := heapFile(t, dir)
	st, err := os.Stat(heap)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(heap)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "base", "90000"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "CATALOG_SWITCH_UNCERTAIN"), []byte("test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var s runner.StatsOutput
	decode(t, mustVR(t, "stats", "--data", dir, "--json").stdout, &s)
	if s.Quarantine.Files != 1 || s.Quarantine.Bytes != st.Size() {
		t.Fatalf("stats reports quarantine %+v, want 1 file of %d bytes", s.Quarantine, st.Size())
	}
	if _, err := os.Stat(filepath.Join(dir, "base", "90000")); !os.IsNotExist(err) {
		t.Fatalf("the orphan is still in base/ (%v)", err)
	}
	var c runner.CheckOutput
	decode(t, mustVR(t, "check", "--data", dir, "--json", "--purge-quarantine").stdout, &c)
	if !c.OK || c.PurgedQuarantine == nil || c.PurgedQuarantine.Files != 1 {
		t.Fatalf("check --purge-quarantine = %+v, want ok and one file purged", c)
	}
	decode(t, mustVR(t, "stats", "--data", dir, "--json").stdout, &s)
	if s.Quarantine.Files != 0 || s.Quarantine.Bytes != 0 {
		t.Fatalf("stats after the purge reports quarantine %+v, want empty", s.Quarantine)
	}
	checkOK(t, dir)
}

// TestAPanicInTheRunnerExitsOneNotTwo fires the test-only panic trigger (the test binary is
// built with -tags testhooks): the runner recovers it and exits 1 (internal, retried), not
// Go's panic status 2, which the operator would read as bad input.
func TestAPanicInTheRunnerExitsOneNotTwo(t *testing.T) {
	r := vr(t, []string{"VACUUM_RUNNER_TEST_PANIC=command"}, "stats", "--data", copyFixture(t))
	if r.code != runnerwire.ExitInternal || !strings.Contains(r.stderr, "panic: test panic at command") {
		t.Fatalf("stats with a panic: exit %d, stderr %q; want exit 1 naming the panic", r.code, r.stderr)
	}
}
