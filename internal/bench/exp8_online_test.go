package bench

import (
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
	tb := NewTable("exp8_online", 2, "system", "delay", "p99_ratio", "vacuum_x_unthrottled")
	for _, r := range []struct {
		system, delay string
		p99, x        float64
	}{
		{sysOurs, "unthrottled", 2.7, 1},
		{sysOurs, "delay 500µs", 1.5, 2},
		{sysOurs, "delay 750µs", 1.1, 2.9},
		{sysPostgres, "unthrottled", 3.1, 1},
		{sysPostgres, "delay 500µs", 1.3, 2.2},
		{sysPostgres, "delay 750µs", 1.2, 3.2},
	} {
		if err := tb.Add([]string{r.system, r.delay}, r.p99, r.x); err != nil {
			t.Fatal(err)
		}
	}
	h, err := onlineHeadline(tablesOf([]*Table{tb}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(h, "; chosen delay 750µs.") || !strings.Contains(h, "delay 500µs: p99 1.50x for 2.0x") {
		t.Errorf("headline %q, want the 500µs row and \"chosen delay 750µs.\" at its end", h)
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
