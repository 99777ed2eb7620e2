package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFleetEnvironmentReplacesTheFleetsAndTheirPeriod(t *testing.T) {
	t.Setenv(FleetScalesEnv, "1000, 200")
	t.Setenv(FleetPeriodEnv, "100s")
	sz, err := fleetSizesFromEnv(DefaultSizes())
	if err != nil {
		t.Fatal(err)
	}
	if len(sz.FleetScales) != 2 || sz.FleetScales[0] != 1000 || sz.FleetScales[1] != 200 {
		t.Errorf("fleets %v, want [1000 200]", sz.FleetScales)
	}
	if sz.FleetPeriod != 100*time.Second {
		t.Errorf("period %s, want 100s", sz.FleetPeriod)
	}
	if sz.FleetWindow != DefaultSizes().FleetWindow {
		t.Errorf("window %s changed, want the sizes' own %s", sz.FleetWindow, DefaultSizes().FleetWindow)
	}
}

func TestFleetEnvironmentRefusesWhatIsNotAFleetOrAPeriod(t *testing.T) {
	for _, env := range [][2]string{
		{FleetScalesEnv, "10,x"}, {FleetScalesEnv, "0"}, {FleetPeriodEnv, "soon"}, {FleetPeriodEnv, "10ms"},
		{FleetRatePeriodsEnv, "100s,x"}, {FleetRatePeriodsEnv, "20s"},
	} {
		t.Run(env[0]+"="+env[1], func(t *testing.T) {
			t.Setenv(env[0], env[1])
			if _, err := fleetSizesFromEnv(DefaultSizes()); err == nil || !strings.Contains(err.Error(), env[0]) {
				t.Errorf("error %v, want one naming %s", err, env[0])
			}
		})
	}
}

func TestFleetFindingsSayWhatTheOfferedLoadCostTheMachine(t *testing.T) {
	tb := NewTable(fleetTable, 1, fleetColumns...)
	nums := make([]float64, len(fleetColumns)-1)
	set := func(col string, v float64) {
		for i, c := range fleetColumns[1:] {
			if c == col {
				nums[i] = v
				return
			}
		}
		t.Fatalf("no column %s", col)
	}
	set("policies", 1000)
	set("ticks_per_s", 50)
	set("control_plane_cores", 1.23)
	set("apiserver_cores", 1.09)
	set("etcd_cores", 0.14)
	set("cpu_cores", 0.22)
	set("node_cores", 0.14)
	set("run_queue_mean_ms", 7573)
	if err := tb.Add([]string{"1000"}, nums...); err != nil {
		t.Fatal(err)
	}
	findings, _, _, err := fleetFindings(tablesOf([]*Table{tb}))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(findings, "\n")
	for _, want := range []string{"50.0 ticks a second", "kube-apiserver 1.09", "1.59 of the machine's", "7573 ms (runs)"} {
		if !strings.Contains(text, want) {
			t.Errorf("findings lack %q:\n%s", want, text)
		}
	}
}

func TestFleetRatePeriodsComeFromTheEnvironmentOrNone(t *testing.T) {
	t.Setenv(FleetRatePeriodsEnv, "50s, 200s")
	sz, err := fleetSizesFromEnv(DefaultSizes())
	if err != nil {
		t.Fatal(err)
	}
	if len(sz.FleetRatePeriods) != 2 || sz.FleetRatePeriods[0] != 50*time.Second || sz.FleetRatePeriods[1] != 200*time.Second {
		t.Errorf("rate periods %v, want [50s 3m20s]", sz.FleetRatePeriods)
	}
	t.Setenv(FleetRatePeriodsEnv, "none")
	if sz, err = fleetSizesFromEnv(DefaultSizes()); err != nil || len(sz.FleetRatePeriods) != 0 {
		t.Errorf("rate periods %v (err %v), want none", sz.FleetRatePeriods, err)
	}
}

// fleetTestRow adds a row of the fleet table with the named columns set, the others 0.
func fleetTestRow(t *testing.T, tb *Table, label string, cols map[string]float64) {
	t.Helper()
	nums := make([]float64, len(fleetColumns)-1)
	for col, v := range cols {
		i := slices.Index(fleetColumns[1:], col)
		if i < 0 {
			t.Fatalf("no column %s", col)
		}
		nums[i] = v
	}
	if err := tb.Add([]string{label}, nums...); err != nil {
		t.Fatal(err)
	}
}

func TestFleetFindingsPlaceTheKneeBetweenTheRatesThatMetTheGoalAndThoseThatDidNot(t *testing.T) {
	tb := NewTable(fleetTable, 1, fleetColumns...)
	fleetTestRow(t, tb, "10", map[string]float64{"policies": 10, "ticks_per_s": 0.5, "tick_to_pod_p99_s": 0.1})
	fleetTestRow(t, tb, "1000@1m40s", map[string]float64{"policies": 1000, "ticks_per_s": 10, "tick_to_pod_p99_s": 0.7})
	fleetTestRow(t, tb, "1000@50s", map[string]float64{"policies": 1000, "ticks_per_s": 20, "tick_to_pod_p99_s": 5.1})
	fleetTestRow(t, tb, "1000", map[string]float64{"policies": 1000, "ticks_per_s": 50, "tick_to_pod_p99_s": 15.9})
	ts := tablesOf([]*Table{tb})
	findings, rules, v, err := fleetFindings(ts)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(findings, "\n")
	for _, want := range []string{"between 10.0 (met) and 20.0 ticks a second (not met)", "hourly vacuums 0.28 ticks a second",
		"daily ones 0.012", "50.0 ticks a second (1000)"} {
		if !strings.Contains(text, want) {
			t.Errorf("findings lack %q:\n%s", want, text)
		}
	}
	// The goals are decided at the sizes' own period, never at a rate row that met them.
	if rules[2].Holds || v.Outcome != "not met" || !strings.Contains(v.Run, "15.90 s") {
		t.Errorf("tick-to-pod rule holds %v, verdict %q (%s); want not met at the 50-ticks-a-second row", rules[2].Holds, v.Outcome, v.Run)
	}
	h, err := fleetHeadline(ts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h, "10.0: 0.70 s, 20.0: 5.10 s, 50.0: 15.90 s") || strings.Contains(h, "1000: 0.0/0.0 ms, 0.0 KiB, 1000") {
		t.Errorf("headline %q: want the rates in order and the curve without the rate rows", h)
	}
}

func TestFleetFindingsOfAnOldTableWithoutRateRowsSayNothingOfRates(t *testing.T) {
	tb := NewTable(fleetTable, 1, fleetColumns...)
	fleetTestRow(t, tb, "10", map[string]float64{"policies": 10, "ticks_per_s": 0.5})
	fleetTestRow(t, tb, "1000", map[string]float64{"policies": 1000, "ticks_per_s": 50, "tick_to_pod_p99_s": 15.9})
	findings, _, _, err := fleetFindings(tablesOf([]*Table{tb}))
	if err != nil {
		t.Fatal(err)
	}
	if text := strings.Join(findings, "\n"); strings.Contains(text, "knee") || strings.Contains(text, "hourly") {
		t.Errorf("findings speak of rates no row measured:\n%s", text)
	}
}

func TestSelfCPUCountsThisProcessesWork(t *testing.T) {
	before, err := readSelfCPU()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		after, err := readSelfCPU()
		if err != nil {
			t.Fatal(err)
		}
		if after.CPU > before.CPU {
			return
		}
		for i := 0; i < 1_000_000; i++ {
			_ = strings.Repeat("x", i%7)
		}
	}
	t.Errorf("CPU time did not grow after 5 s of work: %s", before.CPU)
}
