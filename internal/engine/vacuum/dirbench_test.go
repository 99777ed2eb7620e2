package vacuum_test

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// BenchmarkLazyVacuumOfDir vacuums every table of an existing data
// directory (VACUUM_BENCH_DIR, e.g. made by `vacuum-runner bloat`),
// unthrottled, on a fresh copy per iteration. With VACUUM_BENCH_CPUPROFILE
// set, a CPU profile of the vacuum alone (not the copy or the open) is
// written there. It reports heap pages per second of wall clock and of
// process CPU time, the latter being the useful figure on a loaded
// machine. Skipped unless VACUUM_BENCH_DIR is set.
func BenchmarkLazyVacuumOfDir(b *testing.B) {
	src := os.Getenv("VACUUM_BENCH_DIR")
	if src == "" {
		b.Skip("VACUUM_BENCH_DIR not set")
	}
	for range b.N {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), "data")
		if err := copyTree(src, dir); err != nil {
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
		b.StartTimer()
		rr, err := db.VacuumTables(context.Background(), names, unthrottled())
		b.StopTimer()
		cpu := processCPU() - cpu0
		pprof.StopCPUProfile()
		if err != nil {
			b.Fatal(err)
		}
		pages := float64(rr.Totals.PagesScanned)
		b.ReportMetric(pages/rr.Totals.Elapsed.Seconds(), "pages/s")
		b.ReportMetric(pages/cpu.Seconds(), "pages/cpu-s")
		b.ReportMetric(float64(cpu.Microseconds())/pages, "cpu-µs/page")
		u := rr.Totals.Usage
		b.ReportMetric(float64(u.WALBytes)/pages, "WAL-B/page")
		b.ReportMetric(float64(u.WALFlushes), "WAL-flushes")
		b.ReportMetric(float64(u.WALFPIs)/pages, "FPIs/page")
		b.ReportMetric(float64(u.RingDirtyEvictions), "ring-dirty-evictions")
		b.ReportMetric(float64(u.Written), "pages-written")
		b.ReportMetric(float64(u.Misses), "misses")
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

// processCPU is the user plus system CPU time the process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
