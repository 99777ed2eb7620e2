package main

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/bench"
)

// csvSpec is what one CSV file of a quick run must hold.
type csvSpec struct {
	name   string
	labels int // leading text columns
	rows   int // exact row count; -1 = at least minRows
	min    int
}

func expectedCSVs(sz bench.Sizes) []csvSpec {
	return []csvSpec{
		{"exp0_machine_probe", 1, 7, 0},
		{"exp1_foreground", 1, 1 + len(sz.Delays), 0},
		{"exp2_parallel", 1, 2 * len(sz.Parallelisms), 0},
		{"exp3_ring", 1, len(sz.Rings), 0},
		{"exp4_tidstore_synthetic", 0, len(sz.SynthSizes) * len(sz.SynthDensities), 0},
		{"exp4_index_passes", 0, len(sz.Mems), 0},
		{"exp5_full_lag", 2, exp5Runs(sz), 0},
		{"exp5_lag_series", 1, -1, 3},
		{"exp6_throttle_accuracy", 2, 2*len(sz.AccDelays) + 3*len(sz.AccByteShare), 0},
		{"exp7_ratios", 1, 8, 0},
		{"exp7_rounds", 2, 2 * sz.SrvRounds, 0},
		{"exp7_pgbench", 2, 2 * 2 * sz.SrvRounds, 0},
		{"exp7_vacuum", 2, 4, 0},
		{"exp8_online", 2, 2 * len(sz.OnlineDelays), 0},
		// The first pass (each delay, and unthrottled twice more, on both servers); the
		// repeated rounds come on top.
		{"exp8_online_runs", 2, -1, 2 * (len(sz.OnlineDelays) + 2)},
		{"exp9_windows", 1, 1 + (len(sz.WinSplits)-1)*len(sz.WinCycles), 0},
		{"exp10_summary", 2, 6, 0},
		{"exp10_targets", 2, 2, 0},
		{"exp10_runs", 4, -1, 2 * (sz.AdaptRuns + sz.AdaptRuns*(1+len(sz.AdaptDelays)))},
		{"exp11_summary", 1, 5, 0},
		{"exp11_runs", 1, -1, 4 * sz.LimRuns},
	}
}

var expectedPNGs = []string{
	"exp1_p99_vs_delay.png", "exp1_vacuum_time_vs_delay.png",
	"exp2_time_vs_parallelism.png", "exp2_mbps_vs_parallelism.png",
	"exp3_vacuum_time.png", "exp3_wal_flushes.png", "exp3_hit_ratio.png",
	"exp4_bytes_per_tid.png", "exp4_lookup_ns.png", "exp4_index_passes.png", "exp4_vacuum_time_vs_mem.png",
	"exp5_lag_vs_time.png",
	"exp6_cost_accuracy.png", "exp6_byte_accuracy.png",
	"exp9_pages_vs_windows.png", "exp9_time_vs_windows.png",
}

// table is a CSV file read back: column name -> values per row.
type table struct {
	header []string
	rows   [][]string
}

func (tb table) col(t *testing.T, name string) []float64 {
	t.Helper()
	i := slices.Index(tb.header, name)
	if i < 0 {
		t.Fatalf("no column %q in %v", name, tb.header)
	}
	out := make([]float64, len(tb.rows))
	for r, row := range tb.rows {
		out[r], _ = strconv.ParseFloat(row[i], 64)
	}
	return out
}

// TestMain lets experiment 5 run this test binary as its engine-server processes.
func TestMain(m *testing.M) {
	bench.ServeIfChild()
	os.Exit(m.Run())
}

func TestQuickRunWritesEveryExperimentWithConsistentFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every experiment (under 2 minutes)")
	}
	out, work := t.TempDir(), t.TempDir()
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"--quick", "--out", out, "--work", work}, &stderr); code != 0 {
		t.Fatalf("vacbench --quick exited %d:\n%s", code, stderr.String())
	}
	t.Log(stderr.String())

	tables := map[string]table{}
	for _, spec := range expectedCSVs(bench.QuickSizes()) {
		header, rows, err := bench.ReadCSV(filepath.Join(out, spec.name+".csv"))
		if err != nil {
			t.Fatalf("%s: %v", spec.name, err)
		}
		if spec.rows >= 0 && len(rows) != spec.rows {
			t.Errorf("%s: %d rows, want %d", spec.name, len(rows), spec.rows)
		}
		if spec.rows < 0 && len(rows) < spec.min {
			t.Errorf("%s: %d rows, want at least %d", spec.name, len(rows), spec.min)
		}
		for r, row := range rows {
			if len(row) != len(header) {
				t.Fatalf("%s row %d: %d fields, header has %d", spec.name, r, len(row), len(header))
			}
			for c := spec.labels; c < len(row); c++ {
				v, err := strconv.ParseFloat(row[c], 64)
				if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Errorf("%s row %d column %s: %q is not a finite non-negative number", spec.name, r, header[c], row[c])
				}
			}
		}
		tables[spec.name] = table{header, rows}
	}
	if t.Failed() {
		t.FailNow()
	}

	t.Run("a vacuum split over windows removes what one uninterrupted vacuum removes", func(t *testing.T) {
		tb := tables["exp9_windows"]
		complete, tuples := tb.col(t, "complete"), tb.col(t, "tuples_removed")
		for i := range tuples {
			if tb.rows[i][0] == "uninterrupted" && complete[i] != 1 {
				t.Fatalf("the uninterrupted vacuum did not complete: %v", tb.rows[i])
			}
			if complete[i] == 1 && tuples[i] != tuples[0] {
				t.Errorf("row %v removed %.0f tuples, the uninterrupted vacuum %.0f", tb.rows[i], tuples[i], tuples[0])
			}
		}
	})

	t.Run("a longer cost delay never makes lazy vacuum faster", func(t *testing.T) {
		tb := tables["exp1_foreground"]
		tb.rows = tb.rows[1:] // "alone" ran no vacuum
		delay, secs := tb.col(t, "cost_delay_ms"), tb.col(t, "vacuum_s")
		rate, limit := tb.col(t, "cost_per_s"), tb.col(t, "limit_cost_per_s")
		for i := range delay {
			for j := i + 1; j < len(delay); j++ {
				if delay[j] <= delay[i] {
					t.Fatalf("rows not in increasing delay order: %v", delay)
				}
				// Where run i went clearly faster than delay j's limit
				// allows, delay j must take longer: its throttle holds the
				// same work (same table, same cost units within a few %) to
				// a lower rate. Where run i was already slower than that
				// limit, neither limit held the vacuum back (the machine
				// did) and the two times differ only by noise: no order
				// is asserted for that pair.
				if rate[i] > 1.1*limit[j] && secs[j] < secs[i] {
					t.Errorf("delay %.0f ms took %.3f s, less than %.3f s at delay %.0f ms (which ran at %.0f cost/s, above the %.0f limit)",
						delay[j], secs[j], secs[i], delay[i], rate[i], limit[j])
				} else if rate[i] <= 1.1*limit[j] {
					t.Logf("delay %.0f vs %.0f ms: not binding over each other (%.0f cost/s vs limit %.0f), order not asserted", delay[i], delay[j], rate[i], limit[j])
				}
			}
		}
	})

	t.Run("more dead-TID memory never means more index passes", func(t *testing.T) {
		tb := tables["exp4_index_passes"]
		mem, passes := tb.col(t, "mem_mib"), tb.col(t, "index_passes")
		for i := 1; i < len(mem); i++ {
			if mem[i] <= mem[i-1] {
				t.Fatalf("memory not increasing: %v", mem)
			}
			if passes[i] > passes[i-1] {
				t.Errorf("%.2f MiB: %.0f index passes, more than %.0f at %.2f MiB", mem[i], passes[i], passes[i-1], mem[i-1])
			}
		}
		if passes[0] < 1 {
			t.Errorf("smallest memory: %.0f index passes, want at least 1 (the table has dead tuples and indexes)", passes[0])
		}
	})

	t.Run("VACUUM FULL's runs each watched a real standby, ours three or four times and PostgreSQL's once", func(t *testing.T) {
		tb := tables["exp5_full_lag"]
		want := [][2]string{{"unthrottled", "engine-server"}, {"WAL limit", "engine-server"}, {"WAL limit", "engine-server"},
			{"postgresql unthrottled", "postgresql-15"}}
		if bench.QuickSizes().FullCostDelay > 0 {
			want = slices.Insert(want, 1, [2]string{"cost delay", "engine-server"})
		}
		if len(tb.rows) != len(want) {
			t.Fatalf("%d runs, want %d", len(tb.rows), len(want))
		}
		for i, w := range want {
			if !strings.HasPrefix(tb.rows[i][0], w[0]) || tb.rows[i][1] != w[1] {
				t.Errorf("run %d is %q on %q, want %q... on %q", i, tb.rows[i][0], tb.rows[i][1], w[0], w[1])
			}
		}
		apply, limit, tx := tb.col(t, "apply_mb_per_s"), tb.col(t, "wal_limit_mb_per_s"), tb.col(t, "tx_during")
		wl := limit[len(want)-2] // the WAL-limit runs are ours' last two
		if apply[0] <= 0 || wl <= 0 || wl > apply[0] || limit[len(want)-3] != wl {
			t.Errorf("apply rate %.3f MB/s, WAL limits %.3f and %.3f MB/s: want a measured apply rate and one limit not above it",
				apply[0], limit[len(want)-3], wl)
		}
		if bound := tb.col(t, "lag_bound_mb"); bound[len(want)-3] != 0 || bound[len(want)-2] <= 0 {
			t.Errorf("lag bounds %.3f and %.3f MB: want the limit alone, then the limit with a bound", bound[len(want)-3], bound[len(want)-2])
		}
		// At quick sizes a FULL can be shorter than the gap between the load's commits
		// (PostgreSQL's quick FULL once had none at -R 50), so only the
		// counting itself is checked: some run saw the load's transactions.
		if total := slices.Max(tx); total < 1 {
			t.Errorf("no transaction of the load ended during any FULL: %v", tx)
		}
		series := tables["exp5_lag_series"]
		for _, r := range tb.rows {
			if !slices.ContainsFunc(series.rows, func(s []string) bool { return s[0] == r[0] }) {
				t.Errorf("lag series has no samples of %q", r[0])
			}
		}
	})

	t.Run("adaptive throttling's runs were each judged against a target chosen between the load alone and beside the unthrottled vacuum", func(t *testing.T) {
		tg := tables["exp10_targets"]
		alone, un, goal := tg.col(t, "alone"), tg.col(t, "beside_unthrottled"), tg.col(t, "target_value")
		for i, row := range tg.rows {
			lo, hi := math.Min(alone[i], un[i]), math.Max(alone[i], un[i])
			if row[0] == "replication lag" {
				// chooseTarget raises both figures to one WAL page: a lag under it is a
				// standby that keeps up, and a quiet machine's unthrottled FULL can keep
				// under it too (then the target is that page).
				lo, hi = math.Max(lo, 8192/1e6), math.Max(hi, 8192/1e6)
			}
			if goal[i] <= 0 || goal[i] < lo*0.999 || goal[i] > hi*1.001 {
				t.Errorf("%s: target %.4f not within alone %.4f and unthrottled %.4f", row[0], goal[i], alone[i], un[i])
			}
		}
		aw, ah := tg.col(t, "alone_windows"), tg.col(t, "alone_windows_held")
		for i, row := range tg.rows {
			// The latency target's stretches of the load alone are judged window by window;
			// the lag target's are not.
			if measured := aw[i] >= 1; measured != (row[0] == "foreground p99") || ah[i] > aw[i] || ah[i] < 0 {
				t.Errorf("%s: the load alone held %.0f of %.0f windows", row[0], ah[i], aw[i])
			}
		}
		runs := tables["exp10_runs"]
		windows, secs := runs.col(t, "windows"), runs.col(t, "vacuum_s")
		adaptive := map[string]int{}
		for i, row := range runs.rows {
			if secs[i] <= 0 {
				t.Errorf("run %v: VACUUM time %.3f s", row[:4], secs[i])
			}
			if row[3] != "calibration" && windows[i] < 1 {
				t.Errorf("run %v was judged over no window", row[:4])
			}
			if row[2] == "adaptive" {
				adaptive[row[0]]++
			}
		}
		for _, part := range []string{"foreground p99", "replication lag"} {
			if adaptive[part] != bench.QuickSizes().AdaptRuns {
				t.Errorf("%s: %d adaptive runs, want %d", part, adaptive[part], bench.QuickSizes().AdaptRuns)
			}
		}
	})

	t.Run("the online VACUUM's medians are over the runs its runs table lists, repeated rounds included", func(t *testing.T) {
		sum, runs := tables["exp8_online"], tables["exp8_online_runs"]
		counts, perDelay := sum.col(t, "runs"), map[[2]string]int{}
		for _, row := range runs.rows {
			perDelay[[2]string{row[0], row[1]}]++
		}
		total := 0
		for i, row := range sum.rows {
			if got := perDelay[[2]string{row[0], row[1]}]; float64(got) != counts[i] {
				t.Errorf("%s %s: runs %v, but exp8_online_runs has %d", row[0], row[1], counts[i], got)
			}
			total += int(counts[i])
		}
		sz := bench.QuickSizes()
		// The quick sizes make every throttled delay a candidate, up to OnlineMaxCandidates:
		// each of those runs 1 + OnlineRounds times.
		repeated := min(len(sz.OnlineDelays)-1, sz.OnlineMaxCandidates)
		if want := 2 * (3 + len(sz.OnlineDelays) - 1 + repeated*sz.OnlineRounds); total != want {
			t.Errorf("%d runs in all, want %d (per server three unthrottled, one at each throttled delay, %d more at %d of them)",
				total, want, sz.OnlineRounds, repeated)
		}
	})

	t.Run("every headline of the report follows from its CSV files", func(t *testing.T) {
		if err := bench.CheckReport(out); err != nil {
			t.Error(err)
		}
	})

	t.Run("every plot is a valid PNG", func(t *testing.T) {
		pngs, _ := filepath.Glob(filepath.Join(out, "*.png"))
		for _, want := range expectedPNGs {
			if !slices.Contains(pngs, filepath.Join(out, want)) {
				t.Errorf("missing plot %s", want)
			}
		}
		for _, p := range pngs {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(f)
			f.Close()
			if err != nil {
				t.Errorf("%s: %v", filepath.Base(p), err)
				continue
			}
			if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
				t.Errorf("%s: %dx%d pixels", filepath.Base(p), b.Dx(), b.Dy())
			}
		}
	})

	t.Run("the report names the machine and every experiment", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(out, bench.ReportFile))
		if err != nil {
			t.Fatal(err)
		}
		rep := string(b)
		for _, want := range []string{"CPU cores", "memory", "kernel", "file system", "O_DIRECT", "load average",
			"0. Machine probe", "What was reproduced", "1. Foreground impact", "2. Parallel tables", "3. Ring size", "4. Dead-TID memory", "5. VACUUM FULL", "6. Throttle accuracy"} {
			if !strings.Contains(rep, want) {
				t.Errorf("REPORT.md does not mention %q", want)
			}
		}
		for _, p := range expectedPNGs {
			if !strings.Contains(rep, "("+p+")") {
				t.Errorf("REPORT.md does not show %s", p)
			}
		}
	})
}

func TestBadFlagsExitWithUsageCode(t *testing.T) {
	for _, args := range [][]string{{"--nope"}, {"extra"}, {"--standby-mbps", "1"}} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, &stderr); code != 2 {
			t.Errorf("vacbench %v exited %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}

// exp5Runs is experiment 5's FULL runs at sz: ours unthrottled, with a cost delay when sz has
// one and with the WAL limit, and PostgreSQL's.
func exp5Runs(sz bench.Sizes) int {
	if sz.FullCostDelay > 0 {
		return 5
	}
	return 4
}
