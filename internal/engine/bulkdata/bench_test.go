package bulkdata_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/bulkdata"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
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

// buildUnhinted makes bulkdata's logical table (the same rows, indexes
// and deleted ids) without any scan: rows inserted one by one with the
// indexes in place, then the deleted ones removed by TID, as
// `vacuum-runner bloat` does. No tuple carries a hint bit afterwards,
// neither its inserter's nor its deleter's.
func buildUnhinted(ctx context.Context, db *engine.DB, rows int64) error {
	if err := db.CreateTable(bulkdata.Table, bulkdata.Columns); err != nil {
		return err
	}
	for _, ix := range bulkdata.Indexes {
		if err := db.CreateIndex(ix.Name, bulkdata.Table, ix.Column); err != nil {
			return err
		}
	}
	const batch = 10_000
	var dead []page.TID
	for lo := int64(1); lo <= rows; lo += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		for id := lo; id < lo+batch && id <= rows; id++ {
			tid, err := tx.Insert(bulkdata.Table, []any{id, bulkdata.K1(id), bulkdata.Payload(id)})
			if err != nil {
				return errors.Join(fmt.Errorf("insert %d: %w", id, err), tx.Rollback())
			}
			if bulkdata.Deleted(id) {
				dead = append(dead, tid)
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	for lo := 0; lo < len(dead); lo += batch {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		for _, tid := range dead[lo:min(lo+batch, len(dead))] {
			if err := tx.Delete(bulkdata.Table, tid); err != nil {
				return errors.Join(fmt.Errorf("delete %v: %w", tid, err), tx.Rollback())
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// benchSource builds one state's table in a new directory and closes it.
func benchSource(b *testing.B, state string, rows int64) string {
	b.Helper()
	ctx := context.Background()
	opts := engine.Options{BufferPoolBytes: 128 << 20, CheckpointWALBytes: 1 << 30}
	dir := filepath.Join(b.TempDir(), "src")
	if err := engine.Init(dir, opts); err != nil {
		b.Fatal(err)
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	switch state {
	case "hinted":
		_, err = bulkdata.Build(ctx, db, rows)
	case "unhinted":
		err = buildUnhinted(ctx, db, rows)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatalf("build %s table: %v", state, err)
	}
	return dir
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLazyVacuumCPUPerPage reports the process CPU time of one
// unthrottled lazy VACUUM per heap page of bulkdata's table, for both
// hint-bit states ("hinted": bulkdata.Build, every inserter's hint set by
// the DELETE's scan, no deleter's; "unhinted": no hint bits at all) and
// both I/O modes (buffered, O_DIRECT). Each iteration vacuums a fresh
// copy; as root the OS page cache is dropped first (cold), else the copy
// is read warm and "cold=0" says so. Run with
//
//	VACUUM_BENCH_ROWS=500000 go test -run '^$' -bench LazyVacuumCPUPerPage -benchtime 3x ./internal/engine/bulkdata/
func BenchmarkLazyVacuumCPUPerPage(b *testing.B) {
	rows := benchRows(b)
	for _, state := range []string{"hinted", "unhinted"} {
		b.Run(state, func(b *testing.B) {
			src := benchSource(b, state, rows)
			for _, mode := range []string{"buffered", "direct"} {
				b.Run(mode, func(b *testing.B) {
					var cpu, wall time.Duration
					var pages, fpis int64
					cold := 1.0
					for i := range b.N {
						b.StopTimer()
						dir := filepath.Join(b.TempDir(), fmt.Sprintf("run%d", i))
						if err := engine.CopyDataDir(src, dir); err != nil {
							b.Fatal(err)
						}
						if err := bulkdata.DropCaches(); err != nil {
							cold = 0
						}
						db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 128 << 20, Direct: mode == "direct"})
						if err != nil {
							b.Fatal(err)
						}
						opts := vacuum.DefaultOptions()
						opts.Throttle = &throttle.Settings{}
						b.StartTimer()
						c0, t0 := cpuTime(), time.Now()
						rep, err := db.Vacuum(context.Background(), bulkdata.Table, opts)
						wall += time.Since(t0)
						cpu += cpuTime() - c0
						b.StopTimer()
						if cerr := db.Close(); err == nil {
							err = cerr
						}
						if err != nil {
							b.Fatal(err)
						}
						if rep.TuplesRemoved == 0 {
							b.Fatalf("vacuum removed no tuples: %+v", rep)
						}
						pages += rep.PagesTotal
						fpis += rep.Usage.WALFPIs
						if err := os.RemoveAll(dir); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(cpu.Microseconds())/float64(pages), "cpu-µs/page")
					b.ReportMetric(float64(wall.Microseconds())/float64(pages), "wall-µs/page")
					b.ReportMetric(float64(fpis)/float64(pages), "FPIs/page")
					b.ReportMetric(float64(pages)/float64(b.N), "pages")
					b.ReportMetric(cold, "cold")
				})
			}
		})
	}
}
