package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestExperiment8VacuumCostUnitsByServer is a measurement, not a check: with
// VACBENCH_EXP8_COST=1 it runs experiment 8's reload, load and VACUUM once unthrottled
// and once at 1 ms on each server and logs each VACUUM's buffer usage, its cost units and
// the VERBOSE report (the engine server's splits its usage by phase), so the two
// servers' cost units can be compared line by line (docs/benchmarks/online-cost.md). It
// takes about 90 s and belongs under the bench lock; without the variable it is skipped.
// VACBENCH_EXP8_COST_DELAYS (e.g. "0,500us,500us", the first 0) picks the delays, and
// VACBENCH_EXP8_COST_OURS_ONLY=1 leaves PostgreSQL 15 out, VACBENCH_EXP8_SERVE_ARGS adds
// flags to the engine server's serve (e.g. "--vacuum-nice 0" for an A/B); the engine server's rows also log
// the Go runtime's counters over the stretch alone and over the VACUUM (exp8_runtime.go).
func TestExperiment8VacuumCostUnitsByServer(t *testing.T) {
	if os.Getenv("VACBENCH_EXP8_COST") == "" {
		t.Skip("a measurement: set VACBENCH_EXP8_COST=1 to run it")
	}
	ctx := context.Background()
	r := &runner{sz: DefaultSizes(), work: t.TempDir(), logf: t.Logf, warnings: map[string]int{}}
	ckpt := os.Getenv("VACBENCH_EXP8_CHECKPOINT_WAL") // the engine server's --checkpoint-wal-size
	if ckpt == "" {
		ckpt = exp8CheckpointWAL
	}
	args := append([]string{"--checkpoint-wal-size", ckpt}, strings.Fields(os.Getenv(Exp8ServeArgsEnv))...)
	ours, err := r.startOurs(ctx, "exp8-cost", args...)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.stop()
	pg, err := r.startPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.stop()
	t.Logf("engine server %s; load %s", strings.Join(args, " "), LoadAvg())
	delays := []time.Duration{0, time.Millisecond}
	if v := os.Getenv("VACBENCH_EXP8_COST_DELAYS"); v != "" { // e.g. 0,500us: the first must be 0
		delays = nil
		for _, f := range strings.Split(v, ",") {
			d, err := time.ParseDuration(f)
			if err != nil {
				t.Fatalf("VACBENCH_EXP8_COST_DELAYS: %v", err)
			}
			delays = append(delays, d)
		}
	}
	systems := []*srvSystem{ours, pg}
	if os.Getenv("VACBENCH_EXP8_COST_OURS_ONLY") != "" {
		systems = systems[:1]
	}
	for _, s := range systems {
		var done []onlineRow
		for _, d := range delays {
			row, err := r.onlineRun(ctx, s, d, done)
			if err != nil {
				t.Fatal(err)
			}
			done = append(done, row)
			t.Logf("%s at %s: VACUUM %.3f s; %d hits, %d misses, %d dirtied: %d cost units; pgbench p99 %.3f ms alone, %.3f ms during",
				s.name, delayName(d), row.vacuum.Seconds(), row.hits, row.misses, row.dirtied, row.cost, ms(row.alone), ms(row.during))
			if s.name == sysOurs {
				t.Logf("Go runtime alone %s", row.rtAlone)
				t.Logf("Go runtime during %s", row.rtDuring)
			}
			t.Logf("%s", strings.Join(row.notices, "\n"))
		}
	}
	t.Logf("load %s", LoadAvg())
}
