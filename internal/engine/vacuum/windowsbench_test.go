package vacuum_test

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// windowRows is the table of BenchmarkLazyVacuumSplitOverWindows:
// VACUUM_BENCH_WINDOW_ROWS, default 200,000 rows (the quick variant: 20000).
func windowRows(b *testing.B) int {
	s := os.Getenv("VACUUM_BENCH_WINDOW_ROWS")
	if s == "" {
		return 200_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("VACUUM_BENCH_WINDOW_ROWS=%q: want a positive row count", s)
	}
	return n
}

// BenchmarkLazyVacuumSplitOverWindows is the cost of resuming: one lazy
// vacuum of a table (two indexes, 20 % dead, unthrottled) split over N
// windows, each stopped once it has scanned 1/N of the heap's blocks and
// the next resumed with Options.Resume (so the blocks a stop redoes make
// more than N windows necessary), against N = 1. A windowed run ends a
// dead-items cycle every quarter of a window's blocks (what the runner
// does for a window), so more windows mean more index passes. Reported
// per whole vacuum: heap pages scanned, index pages scanned, index
// passes, seconds (all invocations), windows used.
//
//	go test ./internal/engine/vacuum -run '^$' -bench LazyVacuumSplitOverWindows -benchtime 1x
//	VACUUM_BENCH_WINDOW_ROWS=20000 go test ... (quick)
func BenchmarkLazyVacuumSplitOverWindows(b *testing.B) {
	rows := windowRows(b)
	opts := testOpts()
	opts.BufferPoolBytes = 64 << 20
	tmpl := filepath.Join(b.TempDir(), "template")
	if err := engine.Init(tmpl, opts); err != nil {
		b.Fatal(err)
	}
	db, err := engine.Open(tmpl, opts)
	if err != nil {
		b.Fatal(err)
	}
	tb := createTable(b, db, "t", 2, rows, 100)
	deletePercent(b, db, tb, 20, rand.New(rand.NewSource(1)))
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("windows=%d", n), func(b *testing.B) {
			var heap, index, passes, windows int64
			var secs float64
			for range b.N {
				dir := filepath.Join(b.TempDir(), "data")
				if err := engine.CopyDataDir(tmpl, dir); err != nil {
					b.Fatal(err)
				}
				db, err := engine.Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				pages := heapPages(b, db, "t")
				vo := unthrottled()
				if n > 1 {
					vo.CycleBlocks = max(1, pages/int64(4*n))
				}
				for w := 1; ; w++ {
					if w > 8*n {
						b.Fatalf("not complete after %d windows", w)
					}
					stop := pages / int64(n) // blocks this window scans
					if n == 1 {
						stop = -1
					}
					start := time.Now()
					rep := vacuumUntil(b, db, vo, stop)
					secs += time.Since(start).Seconds()
					heap += rep.PagesScanned
					passes += rep.IndexPasses
					for _, ix := range rep.Indexes {
						index += ix.PagesScanned
					}
					windows++
					if rep.Complete {
						break
					}
					vo.Resume = true
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
			k := float64(b.N)
			b.ReportMetric(float64(heap)/k, "heap_pages")
			b.ReportMetric(float64(index)/k, "index_pages")
			b.ReportMetric(float64(passes)/k, "index_passes")
			b.ReportMetric(secs/k, "s_total")
			b.ReportMetric(float64(windows)/k, "windows")
		})
	}
}
