package bench

import (
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
