package vacuum_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/bulkdata"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// largeRows is the size of the large benchmark table: VACUUM_BENCH_LARGE_ROWS,
// default 7,300,000 rows (about 132,700 heap pages: 1.04 GiB of heap, plus
// two B-trees of ~160 MiB each). Try a small size first, e.g. 200000.
func largeRows(b *testing.B) int64 {
	s := os.Getenv("VACUUM_BENCH_LARGE_ROWS")
	if s == "" {
		return 7_300_000
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		b.Fatalf("VACUUM_BENCH_LARGE_ROWS=%q: want a positive row count", s)
	}
	return n
}

// benchCacheDir is where built benchmark tables are kept between runs
// (VACUUM_BENCH_CACHE, default $TMPDIR/vacuum-bench-cache).
func benchCacheDir() string {
	if d := os.Getenv("VACUUM_BENCH_CACHE"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "vacuum-bench-cache")
}

// largeState is the hint-bit state of the large benchmark table:
// VACUUM_BENCH_STATE, "hinted" (default: bulkdata.Build, the DELETE's scan
// set every inserter's hint) or "unhinted" (bulkdata.BuildUnhinted: row
// inserts with the indexes in place, deletes by TID, no hint bits at all).
func largeState(b *testing.B) bulkdata.State {
	switch s := bulkdata.State(os.Getenv("VACUUM_BENCH_STATE")); s {
	case "":
		return bulkdata.Hinted
	case bulkdata.Hinted, bulkdata.Unhinted:
		return s
	default:
		b.Fatalf("VACUUM_BENCH_STATE=%q: want %q or %q", s, bulkdata.Hinted, bulkdata.Unhinted)
		return ""
	}
}

// BenchmarkLazyVacuumVsSeqScanLarge: unthrottled lazy vacuum of the
// bulkdata table (20 % dead, 2 B-trees; ≥ 1 GiB of heap by default) beside
// the engine's own sequential scan of the same table, in the same run,
// each on a fresh copy of the cached table, each cold: the page cache is
// dropped before it when the process may (root), and the engine is opened
// afresh. Buffered I/O unless VACUUM_BENCH_DIRECT is set. The scan is
// Tx.Scan: the first one after the delete sets hint bits (writing pages, as
// the first reader in PostgreSQL does); the same copy is then scanned again,
// cold, hints set ("hinted-scan": a pure read). Besides pages/s and the
// ratios (target ≥ 0.5) it reports CPU µs per heap page, WAL and the
// checkpoints the engine took during the vacuum. VACUUM_BENCH_STATE=unhinted
// measures the table with no hint bits instead (largeState).
//
//	VACUUM_BENCH_LARGE_ROWS=200000 go test ./internal/engine/vacuum/ -run '^$' -bench VsSeqScanLarge -benchtime=1x
func BenchmarkLazyVacuumVsSeqScanLarge(b *testing.B) {
	rows := largeRows(b)
	b.StopTimer()
	src, err := bulkdata.CachedState(context.Background(), benchCacheDir(), rows, largeState(b),
		engine.Options{BufferPoolBytes: 128 << 20, CheckpointWALBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	cold := 1.0
	for range b.N {
		// The scan, on its own copy (the hint bits it sets must not help the vacuum).
		db, pages := openColdCopy(b, src, &cold)
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		cpu0, start := processCPU(), time.Now()
		if err := tx.Scan(bulkdata.Table, func(page.TID, []any) error { return nil }); err != nil {
			b.Fatal(err)
		}
		scanSecs, scanCPU := time.Since(start).Seconds(), processCPU()-cpu0
		_ = tx.Rollback() // read only
		// The first reader after the delete sets hint bits (and so writes
		// pages); scan the same copy again, cold, for a pure read.
		dir := db.Dir()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		if err := bulkdata.DropCaches(); err != nil {
			cold = 0
		}
		if db, err = engine.Open(dir, benchEngineOpts()); err != nil {
			b.Fatal(err)
		}
		if tx, err = db.Begin(); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if err := tx.Scan(bulkdata.Table, func(page.TID, []any) error { return nil }); err != nil {
			b.Fatal(err)
		}
		hintedSecs := time.Since(start).Seconds()
		_ = tx.Rollback() // read only
		closeAndRemove(b, db)

		db, _ = openColdCopy(b, src, &cold)
		ckpt0 := db.RuntimeStats().Checkpoints
		cpu0 = processCPU()
		b.StartTimer()
		rep, err := db.Vacuum(context.Background(), bulkdata.Table, unthrottled())
		b.StopTimer()
		vacCPU := processCPU() - cpu0
		if err != nil {
			b.Fatal(err)
		}
		ckpts := db.RuntimeStats().Checkpoints - ckpt0
		closeAndRemove(b, db)
		vacPPS := float64(rep.PagesTotal) / rep.Elapsed.Seconds()
		scanPPS := float64(pages) / scanSecs
		b.ReportMetric(vacPPS, "vacuum-pages/s")
		b.ReportMetric(scanPPS, "scan-pages/s")
		b.ReportMetric(vacPPS/scanPPS, "vacuum/scan")
		b.ReportMetric(float64(pages)/hintedSecs, "hinted-scan-pages/s")
		b.ReportMetric(vacPPS*hintedSecs/float64(pages), "vacuum/hinted-scan")
		b.ReportMetric(float64(vacCPU.Microseconds())/float64(rep.PagesTotal), "vacuum-cpu-µs/page")
		b.ReportMetric(float64(scanCPU.Microseconds())/float64(pages), "scan-cpu-µs/page")
		b.ReportMetric(float64(pages*page.Size)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(rep.IndexPasses), "index-passes")
		b.ReportMetric(float64(rep.Usage.WALBytes)/(1<<20), "WAL-MiB")
		b.ReportMetric(cold, "cold")
		b.ReportMetric(float64(ckpts), "checkpoints")
		if rep.TuplesRemoved == 0 || rep.PagesScanned != pages {
			b.Fatalf("vacuum removed %d tuples and scanned %d of %d pages", rep.TuplesRemoved, rep.PagesScanned, pages)
		}
	}
}

// openColdCopy copies the data directory src next to it, drops the OS page
// cache (setting *cold to 0 when it may not) and opens the copy with the
// benchmark options. It returns the table's heap pages.
func openColdCopy(b *testing.B, src string, cold *float64) (*engine.DB, int64) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "data")
	if err := engine.CopyDataDir(src, dir); err != nil {
		b.Fatal(err)
	}
	if err := bulkdata.DropCaches(); errors.Is(err, bulkdata.ErrCannotDropCaches) {
		*cold = 0
	}
	db, err := engine.Open(dir, benchEngineOpts())
	if err != nil {
		b.Fatal(err)
	}
	pages, err := bulkdata.HeapPages(db)
	if err != nil {
		b.Fatal(err)
	}
	return db, pages
}

func closeAndRemove(b *testing.B, db *engine.DB) {
	b.Helper()
	dir := db.Dir()
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
}
