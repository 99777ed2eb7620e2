// Command pgcompare times a cold, unthrottled lazy VACUUM of the same
// logical table in the bundled engine and in PostgreSQL 15: rows rows of
// a 100-byte payload, B-trees on two bigint columns, 20 % of the rows
// deleted (package internal/engine/bulkdata defines the rows and the SQL
// that builds them). "Cold" means: the server (or the engine) is
// restarted after the load and the OS page cache is dropped before the
// VACUUM, so it reads the table from the device. Both sides use buffered
// I/O, a 128 MiB buffer pool, 64 MiB for dead TIDs and no cost delay.
//
// It must run as root (to drop the page cache); PostgreSQL runs as the
// unprivileged --pg-user. Usage (see hack/pgcompare/run.sh):
//
//	go run ./hack/pgcompare --rows 2000000 --runs 3
//
// Each run times our vacuum on two tables, interleaved with PostgreSQL:
// "hinted" (bulkdata: every inserter's hint set, no deleter's, the state
// of PostgreSQL's SQL twin) and "unhinted" (vacuum-runner bloat, built by
// --runner: no hint bits at all); --unhinted=false skips the second.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/bulkdata"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

type config struct {
	rows      int64
	runs      int
	cache     string
	pgBin     string
	pgUser    string
	port      int
	skipPG    bool
	skipOurs  bool
	direct    bool
	checksums bool
	keep      bool
	ourCkpt   int64
	ourRing   int64
	cpuprof   string
	tracef    string
	idxWork   int
	heapWork  int
	unhinted  bool
	runner    string
}

func main() {
	var c config
	flag.Int64Var(&c.rows, "rows", 2_000_000, "rows in the table")
	flag.IntVar(&c.runs, "runs", 3, "cold vacuums per side (fresh copy each)")
	flag.StringVar(&c.cache, "cache", filepath.Join(os.TempDir(), "vacuum-bench-cache"), "where built tables are kept between runs")
	flag.StringVar(&c.pgBin, "pg-bin", "/usr/lib/postgresql/15/bin", "PostgreSQL binaries")
	flag.StringVar(&c.pgUser, "pg-user", "nobody", "unprivileged user PostgreSQL runs as")
	flag.IntVar(&c.port, "port", 54329, "PostgreSQL port (unix socket only)")
	flag.BoolVar(&c.skipPG, "skip-pg", false, "only our side")
	flag.BoolVar(&c.skipOurs, "skip-ours", false, "only PostgreSQL")
	flag.BoolVar(&c.direct, "direct", false, "also time our side with O_DIRECT")
	flag.BoolVar(&c.checksums, "pg-checksums", true, "initdb --data-checksums (our engine always checksums pages)")
	flag.BoolVar(&c.keep, "keep", false, "keep PostgreSQL's data directory")
	flag.Int64Var(&c.ourCkpt, "checkpoint-wal", 0, "our engine's CheckpointWALBytes (0 = its default)")
	flag.Int64Var(&c.ourRing, "ring", vacuum.DefaultRingSize, "our vacuum ring in bytes")
	flag.IntVar(&c.idxWork, "index-workers", 2, "our vacuum.Options.IndexWorkers (PostgreSQL 15 vacuums the two indexes in parallel by default: leader + 1 worker)")
	flag.IntVar(&c.heapWork, "heap-workers", 1, "our vacuum.Options.HeapWorkers (the second heap pass on this many goroutines; PostgreSQL has no counterpart)")
	flag.BoolVar(&c.unhinted, "unhinted", true, "also time our side on the unhinted table (vacuum-runner bloat: no hint bits at all)")
	flag.StringVar(&c.runner, "runner", "bin/vacuum-runner", "vacuum-runner binary that builds the unhinted table")
	flag.StringVar(&c.cpuprof, "cpuprofile", "", "write a CPU profile of our (last) vacuum to this file")
	flag.StringVar(&c.tracef, "trace", "", "write a Go execution trace of our (last) vacuum to this file (go tool trace)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "pgcompare:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	if os.Geteuid() != 0 {
		return errors.New("run as root: dropping the OS page cache needs it (PostgreSQL itself runs as --pg-user)")
	}
	fmt.Printf("pgcompare: %d rows, %d-byte payload, 2 B-trees, %d runs per side, interleaved; %s\n", c.rows, bulkdata.PayloadBytes, c.runs, loadavg())
	var src, srcUnhinted string
	var twin *bulkdata.Twin
	if !c.skipOurs {
		var err error
		if src, err = setupOurs(ctx, c); err != nil {
			return err
		}
		if c.unhinted {
			if srcUnhinted, err = setupOursUnhinted(ctx, c); err != nil {
				return err
			}
		}
	}
	if !c.skipPG {
		var err error
		if twin, err = setupPG(ctx, c); err != nil {
			return err
		}
		defer twin.Close()
	}
	// The sides take turns, run by run, so that both see the same
	// machine: on a shared machine the disk and the CPUs change from one
	// minute to the next.
	var ours, oursDirect, oursU, oursUDirect, pg []float64
	for i := range c.runs {
		if !c.skipOurs {
			for _, st := range []struct {
				src         string
				label       string
				buf, direct *[]float64
			}{{src, "hinted", &ours, &oursDirect}, {srcUnhinted, "unhinted", &oursU, &oursUDirect}} {
				if st.src == "" {
					continue
				}
				s, err := runOursOnce(ctx, c, st.src, st.label, false, i)
				if err != nil {
					return err
				}
				*st.buf = append(*st.buf, s)
				if c.direct {
					if s, err = runOursOnce(ctx, c, st.src, st.label, true, i); err != nil {
						return err
					}
					*st.direct = append(*st.direct, s)
				}
			}
		}
		if !c.skipPG {
			s, err := runPGOnce(ctx, twin, i)
			if err != nil {
				return err
			}
			pg = append(pg, s)
		}
	}
	fmt.Println()
	fmt.Println("== hint bits of each table ==")
	fmt.Println("ours hinted:   bulkdata (bulk load, indexes, DELETE by a scan): every inserter's hint set, no deleter's")
	fmt.Println("ours unhinted: vacuum-runner bloat (inserts, deletes by TID, no scan): no hint bits at all")
	fmt.Println("PostgreSQL:    bulkdata's SQL twin (INSERT, 2 CREATE INDEX, DELETE by the rule, CHECKPOINT, no scan):")
	fmt.Println("               the DELETE's scan sets every inserter's xmin-committed hint, no deleter's xmax hint")
	fmt.Println()
	fmt.Println("== summary (median of runs, seconds of the VACUUM statement alone) ==")
	line := func(name string, v []float64) {
		if len(v) > 0 {
			fmt.Printf("%-28s %.3f s  runs %s\n", name+":", median(v), fmtRuns(v))
		}
	}
	line("ours hinted (buffered)", ours)
	line("ours hinted (O_DIRECT)", oursDirect)
	line("ours unhinted (buffered)", oursU)
	line("ours unhinted (O_DIRECT)", oursUDirect)
	line("PostgreSQL 15", pg)
	ratio := func(name string, v []float64) {
		if len(v) == 0 || len(pg) == 0 {
			return
		}
		r := make([]float64, len(v))
		for i := range v {
			r[i] = v[i] / pg[i]
		}
		fmt.Printf("%-38s %.3f (medians; goal <= 0.333); run by run %s\n", name+" / PostgreSQL:", median(v)/median(pg), fmtRuns(r))
	}
	ratio("ours hinted (buffered)", ours)
	ratio("ours unhinted (buffered)", oursU)
	ratio("ours hinted (O_DIRECT)", oursDirect)
	ratio("ours unhinted (O_DIRECT)", oursUDirect)
	fmt.Println(loadavg())
	return nil
}

// setupOurs builds (or reuses) our table.
func setupOurs(ctx context.Context, c config) (string, error) {
	buildOpts := engine.Options{BufferPoolBytes: 128 << 20, CheckpointWALBytes: 1 << 30}
	start := time.Now()
	src, err := bulkdata.Cached(ctx, c.cache, c.rows, buildOpts)
	if err != nil {
		return "", err
	}
	fmt.Printf("ours: table at %s (ready in %.1fs)\n", src, time.Since(start).Seconds())
	return src, nil
}

// setupOursUnhinted builds (or reuses) the unhinted table: the same
// logical shape (rows rows, 100-byte payload, B-trees on id and k1, 20 %
// deleted) made by `vacuum-runner bloat`, which deletes by TID without a
// scan, so no tuple carries a hint bit when the vacuum starts. The cached
// copy is named for the engine's on-disk format, so an older one is rebuilt.
func setupOursUnhinted(ctx context.Context, c config) (string, error) {
	dir := filepath.Join(c.cache, fmt.Sprintf("bloat-v1-d%d-rows%d", engine.DataVersion, c.rows))
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		fmt.Printf("ours: unhinted table at %s (cached)\n", data)
		return data, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	runner, err := filepath.Abs(c.runner) // runCmd runs in the temporary directory
	if err != nil {
		return "", err
	}
	start := time.Now()
	if _, err := runCmd(ctx, runner, "init", "--data", data); err != nil {
		return "", fmt.Errorf("unhinted table: %w", err)
	}
	out, err := runCmd(ctx, runner, "bloat", "--data", data, "--table", bulkdata.Table,
		"--rows", strconv.FormatInt(c.rows, 10), "--dead-fraction", "0.2", "--indexes", "2",
		"--payload-bytes", strconv.Itoa(bulkdata.PayloadBytes), "--seed", "1")
	if err != nil {
		return "", fmt.Errorf("unhinted table: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600); err != nil {
		return "", err
	}
	fmt.Printf("ours: unhinted table at %s (ready in %.1fs): %s", data, time.Since(start).Seconds(), out)
	return data, nil
}

// runOursOnce times one cold vacuum of a fresh copy of src.
func runOursOnce(ctx context.Context, c config, src, label string, direct bool, i int) (float64, error) {
	work, err := os.MkdirTemp(c.cache, "ours-run-")
	if err != nil {
		return 0, err
	}
	s, err := oursOnce(ctx, src, filepath.Join(work, "data"), direct, c)
	if rerr := os.RemoveAll(work); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	fmt.Printf("ours %s run %d (direct=%v): %.3f s; %s\n", label, i+1, direct, s, loadavg())
	return s, nil
}

func oursOnce(ctx context.Context, src, dir string, direct bool, c config) (float64, error) {
	opts := vacuum.DefaultOptions()
	opts.Throttle = &throttle.Settings{} // no limit: VACUUM's vacuum_cost_delay = 0
	opts.RingSize = c.ourRing
	opts.IndexWorkers = c.idxWork
	opts.HeapWorkers = c.heapWork
	if c.cpuprof != "" {
		// The profile also holds the copy of the data directory before the vacuum.
		f, err := os.Create(c.cpuprof)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 0, err
		}
		defer pprof.StopCPUProfile()
	}
	if c.tracef != "" {
		// The trace also holds the copy of the data directory before the vacuum.
		f, err := os.Create(c.tracef)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return 0, err
		}
		defer trace.Stop()
	}
	r, err := bulkdata.VacuumCold(ctx, src, dir, engine.Options{BufferPoolBytes: 128 << 20, Direct: direct, CheckpointWALBytes: c.ourCkpt}, opts)
	if err != nil {
		return 0, err
	}
	if !r.Cold {
		return 0, errors.New("the OS page cache was not dropped")
	}
	rep, u := r.Report, r.Report.Usage
	fmt.Printf("  pages %d scanned %d, tuples removed %d remaining %d, index passes %d; read %d MiB written %d MiB, WAL %d MiB (%d FPIs, %d flushes); %d checkpoints; cpu %.2fs\n",
		rep.PagesTotal, rep.PagesScanned, rep.TuplesRemoved, rep.TuplesRemaining, rep.IndexPasses,
		u.ReadBytes>>20, u.WriteBytes>>20, u.WALBytes>>20, u.WALFPIs, u.WALFlushes, r.Checkpoints, r.CPUSeconds)
	if len(rep.PhaseUsage) > 0 {
		parts := make([]string, len(rep.PhaseUsage))
		for i, pu := range rep.PhaseUsage {
			parts[i] = fmt.Sprintf("%s %.3f s", pu.Phase, pu.Elapsed.Seconds())
		}
		fmt.Printf("  phases: %s\n", strings.Join(parts, ", "))
	}
	fmt.Printf("  ring: %d dirty evictions, %d of them flushed WAL first\n", u.RingDirtyEvictions, u.RingWALFlushes)
	return r.Seconds, nil
}

// setupPG builds PostgreSQL's twin of the table (bulkdata.StartTwin).
func setupPG(ctx context.Context, c config) (*bulkdata.Twin, error) {
	tw, err := bulkdata.StartTwin(ctx, c.rows, bulkdata.TwinOptions{Bin: c.pgBin, User: c.pgUser, Port: c.port,
		Checksums: c.checksums, Keep: c.keep, Logf: func(f string, a ...any) { fmt.Printf(f+"\n", a...) }})
	if err != nil {
		return nil, err
	}
	fmt.Printf("pg: settings:\n  %s\n", strings.ReplaceAll(strings.TrimSpace(tw.Conf), "\n", "\n  "))
	fmt.Printf("pg: load:\n%s", indent(tw.Load))
	return tw, nil
}

// runPGOnce times one cold VACUUM (VERBOSE) on a fresh copy of the twin.
func runPGOnce(ctx context.Context, tw *bulkdata.Twin, i int) (float64, error) {
	s, verbose, err := tw.VacuumCold(ctx, i)
	if err != nil {
		return 0, err
	}
	if i == 0 {
		fmt.Printf("pg: VACUUM (VERBOSE) output of run 1:\n%s", indent(verbose))
	}
	fmt.Printf("pg run %d: %.3f s; %s\n", i+1, s, loadavg())
	return s, nil
}

func runCmd(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = os.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load average unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load average unknown"
	}
	return "load average " + strings.Join(f[:3], " ")
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtRuns(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'f', 3, 64)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func indent(s string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		b.WriteString("    " + sc.Text() + "\n")
	}
	return b.String()
}
