package bench

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestExperiment8sUnthrottledBaselineIsTheMedianRunNotTheFirst(t *testing.T) {
	runs := []onlineRow{
		{vacuum: 1620 * time.Millisecond, during: 3 * time.Millisecond}, // the first, on a busy machine
		{vacuum: 670 * time.Millisecond, during: 1 * time.Millisecond},
		{vacuum: 900 * time.Millisecond, during: 2 * time.Millisecond},
	}
	got := medianVacuum(runs)
	if got.vacuum != 900*time.Millisecond || got.during != 2*time.Millisecond {
		t.Fatalf("median of 1.62, 0.67 and 0.90 s = the run of %v (p99 %v), want the 0.90 s run", got.vacuum, got.during)
	}
	if runs[0].vacuum != 1620*time.Millisecond {
		t.Fatal("medianVacuum reordered its argument")
	}
	if got := medianVacuum(runs[:2]); got.vacuum != 670*time.Millisecond {
		t.Fatalf("median of two = %v, want the lower (0.67 s)", got.vacuum)
	}
	if got := vacuumTimes(runs); got != "1.62, 0.67, 0.90" {
		t.Fatalf("vacuumTimes = %q", got)
	}
}

func TestExperiment8sHeadlineNamesTheChosenSubMillisecondDelayOnce(t *testing.T) {
	tb := NewTable("exp8_online", 2, "system", "delay", "runs", "p99_ratio", "vacuum_x_unthrottled")
	for _, r := range []struct {
		system, delay string
		runs, p99, x  float64
	}{
		{sysOurs, "unthrottled", 3, 2.7, 1},
		{sysOurs, "delay 500µs", 3, 1.5, 2},
		{sysOurs, "delay 750µs", 3, 1.1, 2.9},
		{sysOurs, "delay 5ms", 1, 1.0, 8},
		{sysPostgres, "unthrottled", 3, 3.1, 1},
		{sysPostgres, "delay 500µs", 3, 1.3, 2.2},
		{sysPostgres, "delay 750µs", 2, 1.2, 3.2},
		{sysPostgres, "delay 5ms", 1, 1.3, 18},
	} {
		if err := tb.Add([]string{r.system, r.delay}, r.runs, r.p99, r.x); err != nil {
			t.Fatal(err)
		}
	}
	h, err := onlineHeadline(tablesOf([]*Table{tb}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(h, "; chosen delay 750µs.") ||
		!strings.Contains(h, "delay 500µs: p99 1.50x for 2.0x the unthrottled time (PostgreSQL 15 1.30x for 2.2x) over 3 runs each, ") ||
		!strings.Contains(h, "(PostgreSQL 15 1.20x for 3.2x) over 3 and 2 runs, ") ||
		!strings.Contains(h, "delay 5ms: p99 1.00x for 8.0x the unthrottled time (PostgreSQL 15 1.30x for 18.0x); ") {
		t.Errorf("headline %q, want each delay's medians with their run counts (none for one run) and \"chosen delay 750µs.\" at its end", h)
	}
}

// exp8R is a run of experiment 8 in short: system, delay, VACUUM seconds, p99 alone and
// during in ms.
type exp8R struct {
	sys                string
	d                  time.Duration
	secs, alone, durMs float64
}

// exp8Runs makes experiment 8's runs.
func exp8Runs(rows ...exp8R) []exp8Run {
	var out []exp8Run
	for _, r := range rows {
		out = append(out, exp8Run{system: r.sys, delay: r.d, row: onlineRow{
			vacuum: time.Duration(r.secs * float64(time.Second)),
			alone:  time.Duration(r.alone * float64(time.Millisecond)),
			during: time.Duration(r.durMs * float64(time.Millisecond)),
		}})
	}
	return out
}

func TestExperiment8RepeatsOnlyTheDelaysWhoseFirstRunCouldMeetTheTimeBound(t *testing.T) {
	ms := time.Millisecond
	// Unthrottled 1.6, 0.5 and 1.0 s: the median, 1.0 s, is the baseline.
	unthrottled := []exp8R{{sysOurs, 0, 1.6, 1, 2}, {sysOurs, 0, 0.5, 1, 2}, {sysOurs, 0, 1.0, 1, 2}}
	for _, tc := range []struct {
		name  string
		runs  []exp8R
		bound float64
		most  int
		want  []time.Duration
	}{
		{"delays at most the bound over the median, smallest first",
			append(slices.Clone(unthrottled), exp8R{sysOurs, 2 * ms, 2.9, 1, 1}, exp8R{sysOurs, ms, 1.1, 1, 1}, exp8R{sysOurs, 5 * ms, 8, 1, 1}),
			4, 2, []time.Duration{ms, 2 * ms}},
		{"a first run exactly at the bound is a candidate",
			append(slices.Clone(unthrottled), exp8R{sysOurs, 5 * ms, 4, 1, 1}),
			4, 2, []time.Duration{5 * ms}},
		{"a loaded machine's slow baseline brings more delays within the bound: the smallest most of them",
			append(slices.Clone(unthrottled), exp8R{sysOurs, ms, 1.1, 1, 1}, exp8R{sysOurs, 2 * ms, 1.3, 1, 1},
				exp8R{sysOurs, 5 * ms, 2, 1, 1}, exp8R{sysOurs, 10 * ms, 3.9, 1, 1}),
			4, 2, []time.Duration{ms, 2 * ms}},
		{"only the first run at a delay decides, not a later one",
			append(slices.Clone(unthrottled), exp8R{sysOurs, 2 * ms, 4.5, 1, 1}, exp8R{sysOurs, 2 * ms, 2.0, 1, 1}),
			4, 2, nil},
		{"the other server's runs decide nothing",
			append(slices.Clone(unthrottled), exp8R{sysPostgres, 0, 9, 1, 1}, exp8R{sysPostgres, 5 * ms, 1.0, 1, 1},
				exp8R{sysOurs, 5 * ms, 8, 1, 1}),
			4, 2, nil},
		{"no unthrottled run: no baseline, no candidate",
			[]exp8R{{sysOurs, ms, 1, 1, 1}}, 4, 2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exp8Candidates(exp8Runs(tc.runs...), sysOurs, tc.bound, tc.most); !slices.Equal(got, tc.want) {
				t.Errorf("exp8Candidates = %v, want %v", got, tc.want)
			}
		})
	}
}

// A first pass at 2 ms and 5 ms, then two rounds at 2 ms: the runs as experiment 8 orders them.
func exp8TwoRounds(ours2ms, theirs2ms [3]exp8R) []exp8Run {
	ms := time.Millisecond
	rs := []exp8R{
		{sysOurs, 0, 1.0, 1, 2}, {sysPostgres, 0, 0.5, 1, 3},
		ours2ms[0], theirs2ms[0],
		{sysOurs, 0, 0.8, 1, 2.6}, {sysPostgres, 0, 0.4, 1, 2.5},
		{sysOurs, 5 * ms, 8, 1, 1.1}, {sysPostgres, 5 * ms, 9, 1, 1.3},
		{sysOurs, 0, 1.2, 1, 1.8}, {sysPostgres, 0, 0.6, 1, 2.7},
		ours2ms[1], theirs2ms[1], ours2ms[2], theirs2ms[2],
	}
	return exp8Runs(rs...)
}

func TestExperiment8SummaryIsEachDelaysMedianOverItsRuns(t *testing.T) {
	ms := time.Millisecond
	ours := [3]exp8R{{sysOurs, 2 * ms, 2.5, 1, 1.1}, {sysOurs, 2 * ms, 3.4, 1, 1.5}, {sysOurs, 2 * ms, 2.8, 2, 2.3}}
	theirs := [3]exp8R{{sysPostgres, 2 * ms, 3, 1, 1.2}, {sysPostgres, 2 * ms, 2.5, 1, 1.4}, {sysPostgres, 2 * ms, 2, 1, 1.1}}
	sum, perRun, err := exp8Tables(exp8TwoRounds(ours, theirs), []string{sysOurs, sysPostgres}, []time.Duration{0, 2 * ms, 5 * ms})
	if err != nil {
		t.Fatal(err)
	}
	c := &cells{ts: tablesOf([]*Table{sum, perRun})}
	for _, tc := range []struct {
		sys, delay, column string
		want               float64
	}{
		{sysOurs, "unthrottled", "runs", 3},
		{sysOurs, "unthrottled", "vacuum_s", 1.0},
		{sysOurs, "unthrottled", "vacuum_x_unthrottled", 1},
		{sysOurs, "unthrottled", "p99_ratio", 2}, // of 2, 2.6 and 1.8: a run's own, not the median-time run's
		{sysOurs, "delay 2ms", "runs", 3},
		{sysOurs, "delay 2ms", "vacuum_x_unthrottled", 2.8},
		{sysOurs, "delay 2ms", "vacuum_x_min", 2.5},
		{sysOurs, "delay 2ms", "vacuum_x_max", 3.4},
		{sysOurs, "delay 2ms", "p99_ratio", 1.15}, // of 1.1, 1.5 and 2.3 / 2
		{sysOurs, "delay 2ms", "p99_ratio_min", 1.1},
		{sysOurs, "delay 2ms", "p99_ratio_max", 1.5},
		{sysOurs, "delay 2ms", "p99_alone_ms", 1},
		{sysOurs, "delay 5ms", "runs", 1},
		{sysOurs, "delay 5ms", "vacuum_x_unthrottled", 8},
		{sysPostgres, "unthrottled", "vacuum_s", 0.5},
		{sysPostgres, "delay 2ms", "vacuum_x_unthrottled", 5}, // 2.5 s over PostgreSQL's own 0.5 s
		{sysPostgres, "delay 2ms", "p99_ratio", 1.2},
		{sysPostgres, "delay 5ms", "vacuum_x_unthrottled", 18},
	} {
		if got := c.num("exp8_online", onlineAt(c, tc.sys, tc.delay), tc.column); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s %s %s = %v, want %v", tc.sys, tc.delay, tc.column, got, tc.want)
		}
	}
	if c.err != nil {
		t.Fatal(c.err)
	}
	if len(perRun.Rows) != 14 {
		t.Fatalf("exp8_online_runs has %d rows, want every one of the 14 runs", len(perRun.Rows))
	}
	// Our third run at 2 ms is the 13th VACUUM of the experiment.
	var third []string
	for _, r := range perRun.Rows {
		if r[0] == sysOurs && r[1] == "delay 2ms" && c.num("exp8_online_runs", r, "run") == 3 {
			third = r
		}
	}
	if third == nil || c.num("exp8_online_runs", third, "order") != 13 || c.num("exp8_online_runs", third, "p99_ratio") != 1.15 {
		t.Errorf("our third 2 ms run: %v, want order 13 and p99_ratio 1.15", third)
	}
	if _, _, err := exp8Tables(exp8TwoRounds(ours, theirs), []string{sysOurs}, []time.Duration{0, 10 * ms}); err == nil {
		t.Error("a delay without a run gave no error")
	}
}

func TestExperiment8ChoosesTheDelayOnMediansNotOnOneRun(t *testing.T) {
	ms := time.Millisecond
	// at2ms makes system's three runs at 2 ms from their VACUUM seconds and p99 ratios (alone 1 ms).
	at2ms := func(system string, secs, p99 [3]float64) [3]exp8R {
		var out [3]exp8R
		for i := range out {
			out[i] = exp8R{system, 2 * ms, secs[i], 1, p99[i]}
		}
		return out
	}
	theirSecs, theirP99 := [3]float64{2.9, 3, 3.1}, [3]float64{1.14, 1.3, 1.2}
	for _, tc := range []struct {
		name                   string
		ourSecs, ourP99, their [3]float64 // our times and p99 ratios at 2 ms, PostgreSQL 15's p99 ratios
		chosen, better         bool
	}{
		{"a first run over 1.2x does not hide a median within it",
			[3]float64{2.9, 2.6, 2.7}, [3]float64{1.38, 1.11, 1.15}, theirP99, true, true},
		{"a first run within 1.2x does not choose a delay whose median is over it",
			[3]float64{2.9, 2.6, 2.7}, [3]float64{1.11, 1.3, 1.25}, theirP99, false, false},
		{"the median time decides the 3x bound",
			[3]float64{2.9, 3.3, 3.1}, [3]float64{1.1, 1.1, 1.1}, theirP99, false, false},
		{"chosen, but PostgreSQL 15's median p99 ratio is lower",
			[3]float64{2.9, 2.6, 2.7}, [3]float64{1.18, 1.19, 1.15}, [3]float64{1.14, 1.3, 1.1}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := exp8TwoRounds(at2ms(sysOurs, tc.ourSecs, tc.ourP99), at2ms(sysPostgres, theirSecs, tc.their))
			sum, perRun, err := exp8Tables(runs, []string{sysOurs, sysPostgres}, []time.Duration{0, 2 * ms, 5 * ms})
			if err != nil {
				t.Fatal(err)
			}
			rules := onlineRules(tablesOf([]*Table{sum, perRun}))
			if len(rules) != 2 {
				t.Fatalf("%d rules, want 2", len(rules))
			}
			if rules[0].Holds != tc.chosen || rules[1].Holds != tc.better {
				t.Errorf("chosen %v (%s), better than PostgreSQL 15 %v (%s); want %v and %v",
					rules[0].Holds, rules[0].Conclusion(), rules[1].Holds, rules[1].Conclusion(), tc.chosen, tc.better)
			}
			if tc.chosen && rules[0].Conclusion() != "Chosen: delay 2ms (medians of 3 runs)." {
				t.Errorf("conclusion %q", rules[0].Conclusion())
			}
		})
	}
}

func TestExp8DelaysParsesTheVariablesList(t *testing.T) {
	got, err := exp8Delays("0, 500us,1ms")
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{0, 500 * time.Microsecond, time.Millisecond}; !slices.Equal(got, want) {
		t.Errorf("exp8Delays = %v, want %v", got, want)
	}
	if _, err := exp8Delays("0,fast"); err == nil {
		t.Error("exp8Delays(\"0,fast\") = nil error, want one naming the variable")
	}
}
