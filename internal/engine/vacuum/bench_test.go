package vacuum_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// benchRows is the size of benchmark tables: VACUUM_BENCH_ROWS, default
// 60,000 rows of ~100 bytes (~1,200 heap pages, ~9 MiB). 2M rows give
// the 1 GiB-class figures (run by hand).
func benchRows() int {
	if n, err := strconv.Atoi(os.Getenv("VACUUM_BENCH_ROWS")); err == nil && n > 0 {
		return n
	}
	return 60_000
}

// benchEngineOpts are the engine options of the benchmarks: a 128 MiB
// pool, O_DIRECT when VACUUM_BENCH_DIRECT is set, and CheckpointWALBytes
// from VACUUM_BENCH_CHECKPOINT_WAL (bytes; unset = the engine's default).
func benchEngineOpts() engine.Options {
	o := engine.Options{BufferPoolBytes: 128 << 20, Direct: os.Getenv("VACUUM_BENCH_DIRECT") != ""}
	if n, err := strconv.ParseInt(os.Getenv("VACUUM_BENCH_CHECKPOINT_WAL"), 10, 64); err == nil {
		o.CheckpointWALBytes = n
	}
	return o
}

// benchDB builds a data directory holding tables names, each with
// benchRows rows, nIdx indexes and deadPct % of its rows deleted, then
// checkpoints (every page clean) and reopens it (pool cold).
func benchDB(b *testing.B, names []string, nIdx int, deadPct float64) (*engine.DB, string) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "data")
	opts := benchEngineOpts()
	if err := engine.Init(dir, opts); err != nil {
		b.Fatal(err)
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	for i, n := range names {
		tb := createTable(b, db, n, nIdx, benchRows(), 100)
		deletePercent(b, db, tb, deadPct, rand.New(rand.NewSource(int64(i))))
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	db, err = engine.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	return db, dir
}

// achievedCost is the cost rate of rep from the engine's counters with
// PostgreSQL's default weights, over the vacuum's wall-clock time.
func achievedCost(rep *vacuum.Report) float64 { return costOf(rep.Usage) / rep.Elapsed.Seconds() }

// BenchmarkThrottleAccuracy vacuums a fresh 20 %-dead table per
// iteration at cost limit 200 and each delay, with our rate pacing and
// with PostgreSQL's nap rule, and reports achieved/configured from the
// engine's own counters. "unthrottled" gives the machine's ceiling.
func BenchmarkThrottleAccuracy(b *testing.B) {
	type cfg struct {
		name   string
		s      throttle.Settings
		pacing vacuum.Pacing
	}
	cfgs := []cfg{{name: "unthrottled"}}
	for _, d := range []time.Duration{500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond} {
		s := throttle.DefaultSettings()
		s.CostDelay = d
		cfgs = append(cfgs, cfg{"cost200_delay" + d.String() + "_rate", s, vacuum.PacingRate},
			cfg{"cost200_delay" + d.String() + "_pgnap", s, vacuum.PacingPostgresNap})
	}
	for _, lim := range []struct {
		name string
		set  func(*throttle.Settings)
	}{
		{"read_2MBps", func(s *throttle.Settings) { s.MaxReadBytesPerSecond = 2 << 20 }},
		{"write_2MBps", func(s *throttle.Settings) { s.MaxWriteBytesPerSecond = 2 << 20 }},
		{"wal_2MBps", func(s *throttle.Settings) { s.MaxWALBytesPerSecond = 2 << 20 }},
	} {
		var s throttle.Settings
		lim.set(&s)
		cfgs = append(cfgs, cfg{lim.name, s, vacuum.PacingRate})
	}
	for _, c := range cfgs {
		b.Run(c.name, func(b *testing.B) {
			var ratio, rate, forfeit float64
			for range b.N {
				b.StopTimer()
				db, _ := benchDB(b, []string{"t"}, 2, 20)
				opts := vacuum.DefaultOptions()
				s := c.s
				opts.Throttle = &s
				opts.Pacing = c.pacing
				if d, err := time.ParseDuration(os.Getenv("VACUUM_BENCH_BURST")); err == nil {
					opts.ThrottleOptions.Burst = d
				}
				run, err := vacuum.NewBatch(opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				rr, err := db.VacuumBatch(context.Background(), run, []string{"t"})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				rep := rr.Tables[0]
				secs := rep.Elapsed.Seconds()
				// Allowance the throttle gave up because the vacuum was slower
				// than the limit at that moment (CPU or I/O bound), as a
				// fraction of all it granted: achieved + this ~ 1 means the
				// pacing itself lost nothing.
				kind := throttle.Cost
				switch {
				case s.MaxReadBytesPerSecond > 0:
					kind = throttle.ReadBytes
				case s.MaxWriteBytesPerSecond > 0:
					kind = throttle.WriteBytes
				case s.MaxWALBytesPerSecond > 0:
					kind = throttle.WALBytes
				}
				st := run.ThrottleStats()
				if l := st.Limits[kind]; l.Active {
					forfeit = l.Forfeited / (l.Configured * st.Elapsed.Seconds())
				}
				switch {
				case s.MaxReadBytesPerSecond > 0:
					rate = float64(rep.Usage.ReadBytes) / secs
					ratio = rate / float64(s.MaxReadBytesPerSecond)
				case s.MaxWriteBytesPerSecond > 0:
					rate = float64(rep.Usage.WriteBytes) / secs
					ratio = rate / float64(s.MaxWriteBytesPerSecond)
				case s.MaxWALBytesPerSecond > 0:
					rate = float64(rep.Usage.WALBytes) / secs
					ratio = rate / float64(s.MaxWALBytesPerSecond)
				default:
					rate = achievedCost(rep)
					if r := s.Rate(throttle.Cost); r > 0 {
						ratio = rate / r
					}
				}
				db.Close()
				b.StartTimer()
			}
			b.ReportMetric(rate, "units/s")
			b.ReportMetric(ratio, "achieved/limit")
			b.ReportMetric(forfeit, "forfeited/allowance")
		})
	}
}

// BenchmarkLazyVacuumVsSeqScan compares heap pages/s of an unthrottled
// lazy vacuum (20 % dead, 2 indexes) with the engine's sequential scan
// of the same table, both from a cold pool.
func BenchmarkLazyVacuumVsSeqScan(b *testing.B) {
	for range b.N {
		b.StopTimer()
		db, dir := benchDB(b, []string{"t"}, 2, 20)
		pages := heapPages(b, db, "t")
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := tx.Scan("t", func(page.TID, []any) error { return nil }); err != nil {
			b.Fatal(err)
		}
		scanSecs := time.Since(start).Seconds()
		_ = tx.Rollback() // read-only transaction
		db.Close()
		db, err = engine.Open(dir, benchEngineOpts()) // cold pool again
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rep, err := db.Vacuum(context.Background(), "t", unthrottled())
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		vacPPS := float64(rep.PagesTotal) / rep.Elapsed.Seconds()
		scanPPS := float64(pages) / scanSecs
		b.ReportMetric(vacPPS, "vacuum-pages/s")
		b.ReportMetric(scanPPS, "scan-pages/s")
		b.ReportMetric(vacPPS/scanPPS, "vacuum/scan")
		b.ReportMetric(float64(pages), "heap-pages")
		b.ReportMetric(float64(rep.IndexPasses), "index-passes")
		db.Close()
		b.StartTimer()
	}
}

// BenchmarkRingWALFlushes reports WAL flushes per 1,000 heap pages
// vacuumed for each ring size.
func BenchmarkRingWALFlushes(b *testing.B) {
	for _, ring := range []int64{0, 256 << 10, 2 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("ring%dKiB", ring>>10), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				db, _ := benchDB(b, []string{"t"}, 2, 20)
				opts := unthrottled()
				opts.RingSize = ring
				b.StartTimer()
				rep, err := db.Vacuum(context.Background(), "t", opts)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(1000*float64(rep.Usage.WALFlushes)/float64(rep.PagesTotal), "walflushes/1000pages")
				b.ReportMetric(float64(rep.Usage.RingDirtyEvictions), "ring-dirty-evictions")
				b.ReportMetric(float64(rep.PagesTotal)/rep.Elapsed.Seconds(), "pages/s")
				db.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkParallelTables vacuums 8 tables at parallelism 1 and 8.
func BenchmarkParallelTables(b *testing.B) {
	names := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}
	for _, par := range []int{1, 8} {
		b.Run(fmt.Sprintf("parallelism%d", par), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				db, _ := benchDB(b, names, 1, 20)
				opts := unthrottled()
				opts.Parallelism = par
				b.StartTimer()
				rr, err := vacuumTables(context.Background(), db, names, opts)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(rr.Totals.Elapsed.Seconds(), "run-seconds")
				b.ReportMetric(float64(rr.Totals.PagesScanned)/rr.Totals.Elapsed.Seconds(), "pages/s")
				db.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkIndexWorkers vacuums a table with 4 indexes at IndexWorkers 1
// and 4.
func BenchmarkIndexWorkers(b *testing.B) {
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers%d", workers), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				db, _ := benchDB(b, []string{"t"}, 4, 20)
				opts := unthrottled()
				opts.IndexWorkers = workers
				b.StartTimer()
				rep, err := db.Vacuum(context.Background(), "t", opts)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(rep.Elapsed.Seconds(), "vacuum-seconds")
				var ixPages int64
				for _, ix := range rep.Indexes {
					ixPages += ix.PagesScanned
				}
				b.ReportMetric(float64(ixPages), "index-pages")
				db.Close()
				b.StartTimer()
			}
		})
	}
}
