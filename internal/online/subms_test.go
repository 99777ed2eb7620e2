package online_test

import (
	"context"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/online"
)

// Experiment 10's bisection and ceiling, and experiment 8 under VACBENCH_EXP8_DELAYS, send
// cost delays below a millisecond (e.g. 250, 500 and 750 us): a delay rounded to 0
// (unthrottled) or to 1 ms anywhere between the run and the server's throttle would measure
// another setting under its name.

// subMillisecondDelays are the delays checked, with one above a millisecond that is not a
// whole number of them.
var subMillisecondDelays = []time.Duration{250 * time.Microsecond, 500 * time.Microsecond,
	750 * time.Microsecond, 1500 * time.Microsecond}

func TestASubMillisecondCostDelayIsWhatPostgreSQLSetsForTheVacuumSession(t *testing.T) {
	_, conn := newDB(t)
	ctx := context.Background()
	for _, d := range subMillisecondDelays {
		if err := online.SetupSession(ctx, conn, online.KindPostgreSQL, limits(d, 200)); err != nil {
			t.Fatalf("session settings at %s: %v", d, err)
		}
		// pg_settings gives vacuum_cost_delay in its unit, milliseconds, as a real.
		got := scalar[float64](t, conn, "SELECT setting::float8 FROM pg_settings WHERE name = 'vacuum_cost_delay'")
		if want := float64(d) / float64(time.Millisecond); got != want {
			t.Errorf("PostgreSQL's vacuum_cost_delay is %v ms after the run's settings for %s, want %v", got, d, want)
		}
	}
}

func TestASubMillisecondCostDelayReachesTheEngineServersVacuumUnrounded(t *testing.T) {
	addr := startEngineServer(t)
	c := engineConn(t, addr)
	createUpdatedOrders(t, c)

	// Limit 1 per 250 us: 4,000 units a second, so the VACUUM (tens of thousands of units)
	// runs for seconds; unthrottled, as a delay rounded to 0 would be, it takes a fraction of one.
	var rec recorder
	run, err := online.New(context.Background(), engineTarget(t, addr), online.Options{Parallelism: 1,
		Tables: []string{"orders"}, Throttle: limits(subMillisecondDelays[0], 1), OnProgress: rec.add,
		PollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	done := vacuumInBackground(run)

	var pid int32
	waitUntil(t, 30*time.Second, "the server-side VACUUM in pg_stat_progress_vacuum", func() bool {
		return c.QueryRow(context.Background(), "SELECT pid FROM pg_stat_progress_vacuum").Scan(&pid) == nil
	})
	delayUS := func() int64 {
		return scalar[int64](t, c, "SELECT cost_delay_us FROM pg_stat_progress_vacuum WHERE pid = $1", pid)
	}
	if got := delayUS(); got != subMillisecondDelays[0].Microseconds() {
		t.Errorf("the server-side VACUUM's cost delay is %d us, want the run's %d", got, subMillisecondDelays[0].Microseconds())
	}
	// The same delays through vacuum_set_throttle, as a throttle change sends them.
	for _, d := range subMillisecondDelays[1:] {
		if err := run.UpdateThrottle(limits(d, 1)); err != nil {
			t.Fatal(err)
		}
		if got := delayUS(); got != d.Microseconds() {
			t.Errorf("after a change to %s the server-side VACUUM's cost delay is %d us, want %d", d, got, d.Microseconds())
		}
	}
	// The throttle slept at those delays: the server's own time slept is in progress.
	waitUntil(t, 30*time.Second, "the server-side VACUUM's time slept seen in progress", func() bool {
		all := rec.all()
		return len(all) > 0 && all[len(all)-1].SleptSeconds != nil && *all[len(all)-1].SleptSeconds > 0
	})
	rep := liftThrottleAndWait(t, run, done)
	if s := rep.Totals.SleptSeconds; s == nil || *s <= 0 {
		t.Errorf("report's time slept %v, want the server's VERBOSE figure above 0", s)
	}
}
