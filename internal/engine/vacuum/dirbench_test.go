package vacuum_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// BenchmarkLazyVacuumOfDir vacuums every table of an existing data
// directory (VACUUM_BENCH_DIR, e.g. made by `vacuum-runner bloat`),
// unthrottled, on a fresh copy per iteration, with no ring and rings of
// 256 KiB, 2 MiB (the default) and 16 MiB; "seqscan" scans the same tables
// instead (on its own copy, so hint bits it sets do not help the vacuums).
// Besides pages per second of wall clock it reports process CPU time per
// heap page, the useful figure on a loaded machine, and the I/O and WAL
// counts per page. With VACUUM_BENCH_CPUPROFILE set, a CPU profile of the
// last vacuum (not the copy or the open) is written there. Skipped unless
// VACUUM_BENCH_DIR is set.
func BenchmarkLazyVacuumOfDir(b *testing.B) {
	src := os.Getenv("VACUUM_BENCH_DIR")
	if src == "" {
		b.Skip("VACUUM_BENCH_DIR not set")
	}
	b.Run("seqscan", func(b *testing.B) {
		for range b.N {
			db, names := openCopy(b, src)
			tx, err := db.Begin()
			if err != nil {
				b.Fatal(err)
			}
			var pages int64
			cpu0, start := processCPU(), time.Now()
			for _, n := range names {
				if err := tx.Scan(n, func(page.TID, []any) error { return nil }); err != nil {
					b.Fatal(err)
				}
				pages += heapPages(b, db, n)
			}
			cpu, secs := processCPU()-cpu0, time.Since(start).Seconds()
			_ = tx.Rollback()
			b.ReportMetric(float64(pages)/secs, "pages/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(pages), "cpu-µs/page")
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, ring := range []int64{0, 256 << 10, 2 << 20, 16 << 20} {
		b.Run(fmt.Sprintf("vacuum-ring%dKiB", ring>>10), func(b *testing.B) {
			for range b.N {
				db, names := openCopy(b, src)
				opts := unthrottled()
				opts.RingSize = ring
				if p := os.Getenv("VACUUM_BENCH_CPUPROFILE"); p != "" {
					f, err := os.Create(p)
					if err != nil {
						b.Fatal(err)
					}
					if err := pprof.StartCPUProfile(f); err != nil {
						b.Fatal(err)
					}
					defer f.Close()
				}
				cpu0 := processCPU()
				rr, err := vacuumTables(context.Background(), db, names, opts)
				cpu := processCPU() - cpu0
				pprof.StopCPUProfile()
				if err != nil {
					b.Fatal(err)
				}
				pages := float64(rr.Totals.PagesScanned)
				u := rr.Totals.Usage
				b.ReportMetric(pages/rr.Totals.Elapsed.Seconds(), "pages/s")
				b.ReportMetric(float64(cpu.Microseconds())/pages, "cpu-µs/page")
				b.ReportMetric(float64(u.WALBytes)/pages, "WAL-B/page")
				b.ReportMetric(float64(u.WALFPIs)/pages, "FPIs/page")
				b.ReportMetric(1000*float64(u.WALFlushes)/pages, "WAL-flushes/1000pages")
				b.ReportMetric(float64(u.RingDirtyEvictions), "ring-dirty-evictions")
				b.ReportMetric(float64(u.Written)/pages, "writes/page")
				b.ReportMetric(float64(u.Misses)/pages, "misses/page")
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// openCopy copies the data directory src and opens the copy with the
// benchmark options (pool cold), returning its table names.
func openCopy(b *testing.B, src string) (*engine.DB, []string) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	dir := filepath.Join(b.TempDir(), "data")
	if err := engine.CopyDataDir(src, dir); err != nil {
		b.Fatal(err)
	}
	db, err := engine.Open(dir, benchEngineOpts())
	if err != nil {
		b.Fatal(err)
	}
	tables, err := db.Tables()
	if err != nil {
		b.Fatal(err)
	}
	var names []string
	for _, t := range tables {
		names = append(names, t.Name)
	}
	return db, names
}

// processCPU is the user plus system CPU time the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
