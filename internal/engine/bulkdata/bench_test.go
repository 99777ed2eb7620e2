package bulkdata_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/bulkdata"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// benchRows is the table size of BenchmarkLazyVacuumCPUPerPage:
// VACUUM_BENCH_ROWS, default 100,000 (about 1,700 heap pages).
func benchRows(b *testing.B) int64 {
	s := os.Getenv("VACUUM_BENCH_ROWS")
	if s == "" {
		return 100_000
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		b.Fatalf("VACUUM_BENCH_ROWS=%q: want a positive integer", s)
	}
	return n
}

// benchHeapWorkers is vacuum.Options.HeapWorkers for
// BenchmarkLazyVacuumCPUPerPage: VACUUM_BENCH_HEAP_WORKERS, default 0 (the
// second heap pass on the table's own worker).
func benchHeapWorkers(b *testing.B) int {
	s := os.Getenv("VACUUM_BENCH_HEAP_WORKERS")
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		b.Fatalf("VACUUM_BENCH_HEAP_WORKERS=%q: want a non-negative integer", s)
	}
	return n
}

// benchSource returns one state's table of rows rows: cached under
// VACUUM_BENCH_CACHE when set (so that alternating benchmark binaries
// vacuum the same table without rebuilding it), else built in a new
// directory.
func benchSource(b *testing.B, state bulkdata.State, rows int64) string {
	b.Helper()
	cache := os.Getenv("VACUUM_BENCH_CACHE")
	if cache == "" {
		cache = b.TempDir()
	}
	opts := engine.Options{BufferPoolBytes: 128 << 20, CheckpointWALBytes: 1 << 30}
	dir, err := bulkdata.CachedState(context.Background(), cache, rows, state, opts)
	if err != nil {
		b.Fatalf("build %s table: %v", state, err)
	}
	return dir
}

// BenchmarkLazyVacuumCPUPerPage reports the process CPU time of one
// unthrottled lazy VACUUM per heap page of bulkdata's table, for both
// hint-bit states ("hinted": bulkdata.Build, every inserter's hint set by
// the DELETE's scan, no deleter's; "unhinted": no hint bits at all) and
// both I/O modes (buffered, O_DIRECT). Each iteration vacuums a fresh
// copy; as root the OS page cache is dropped first (cold), else the copy
// is read warm and "cold=0" says so. "ring-WAL-flushes/op" counts the ring
// evictions that found their page's WAL not yet durable and had to flush
// it first; "WAL-fsyncs/op" counts every fsync of the log the vacuum
// caused (its background flush's included). VACUUM_BENCH_HEAP_WORKERS sets
// Options.HeapWorkers. Run with
//
//	VACUUM_BENCH_ROWS=500000 go test -run '^$' -bench LazyVacuumCPUPerPage -benchtime 3x ./internal/engine/bulkdata/
func BenchmarkLazyVacuumCPUPerPage(b *testing.B) {
	rows := benchRows(b)
	heapWorkers := benchHeapWorkers(b)
	for _, state := range []bulkdata.State{bulkdata.Hinted, bulkdata.Unhinted} {
		b.Run(string(state), func(b *testing.B) {
			src := benchSource(b, state, rows)
			for _, mode := range []string{"buffered", "direct"} {
				b.Run(mode, func(b *testing.B) {
					var cpu, wall float64
					var pages, fpis, ringFlushes, walFlushes int64
					cold := 1.0
					b.StopTimer()
					for i := range b.N {
						dir := filepath.Join(b.TempDir(), fmt.Sprintf("run%d", i))
						opts := vacuum.DefaultOptions()
						opts.Throttle = &throttle.Settings{}
						opts.HeapWorkers = heapWorkers
						r, err := bulkdata.VacuumCold(context.Background(), src, dir,
							engine.Options{BufferPoolBytes: 128 << 20, Direct: mode == "direct"}, opts)
						if err != nil {
							b.Fatal(err)
						}
						if !r.Cold {
							cold = 0
						}
						wall += r.Seconds
						cpu += r.CPUSeconds
						pages += r.Report.PagesTotal
						fpis += r.Report.Usage.WALFPIs
						ringFlushes += r.Report.Usage.RingWALFlushes
						walFlushes += r.Report.Usage.WALFlushes
						if err := os.RemoveAll(dir); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(wall*1e9/float64(b.N), "ns/op")
					b.ReportMetric(cpu*1e6/float64(pages), "cpu-µs/page")
					b.ReportMetric(wall*1e6/float64(pages), "wall-µs/page")
					b.ReportMetric(float64(fpis)/float64(pages), "FPIs/page")
					b.ReportMetric(float64(pages)/float64(b.N), "pages")
					b.ReportMetric(float64(ringFlushes)/float64(b.N), "ring-WAL-flushes/op")
					b.ReportMetric(float64(walFlushes)/float64(b.N), "WAL-fsyncs/op")
					b.ReportMetric(cold, "cold")
				})
			}
		})
	}
}
