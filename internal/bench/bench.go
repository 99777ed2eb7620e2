package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
)

// Section is one experiment's part of the report.
type Section struct {
	ID       int
	Title    string
	Claim    string   // the field report it measures, and where that figure comes from
	Setup    []string // every setting, one per line
	Tables   []*Table
	Plots    []string // PNG file names in OutDir
	Headline string   // the figures that matter, computed from Tables alone (see headline.go)
	Findings []string // further sentences computed from the figures
	Rules    []Rule   // conclusions printed only when the figures show them
	Verdict  *Verdict // what of the field report was reproduced; nil for the probe
	Caveats  []string
	Elapsed  time.Duration
	Load     string // /proc/loadavg when the experiment started
}

// Result is a whole run.
type Result struct {
	Config   Config
	Sizes    Sizes
	Machine  Machine
	Probe    Probe
	Sections []*Section
	Warnings []string // engine warnings (e.g. O_DIRECT fallbacks), deduplicated
	Started  time.Time
	Elapsed  time.Duration
}

// runner carries what every experiment needs.
type runner struct {
	cfg  Config
	sz   Sizes
	work string
	logf func(string, ...any)

	mu          sync.Mutex
	warnings    map[string]int
	opened      int
	directOpens int
	seq         int
	fgTmpl      string // experiment 1's data set
	probe       Probe  // the machine probe, measured first
	// pgTmpl is the one initdb every PostgreSQL server of the run starts from (nil: each
	// runs its own, as a runner made by a test does).
	pgTmpl *pgtest.Template
}

// experiment is one numbered experiment: run measures and fills a
// Section; headline states its main figures from its tables alone, so the
// committed report can be checked against the committed CSV files.
type experiment struct {
	id       int
	run      func(context.Context, *runner) (*Section, error)
	headline func(tables) (string, error)
}

var experiments = []experiment{
	{0, runProbe, probeHeadline},
	{1, runForeground, foregroundHeadline},
	{2, runParallel, parallelHeadline},
	{3, runRing, ringHeadline},
	{4, runDeadTIDs, deadTIDsHeadline},
	{5, runFullLag, fullLagHeadline},
	{6, runAccuracy, accuracyHeadline},
	{7, runServer, serverHeadline},
	{8, runOnline, onlineHeadline},
	{9, runWindows, windowsHeadline},
	{10, runAdaptive, adaptiveHeadline},
	{11, runLimit, limitHeadline},
	{12, runFleet, fleetHeadline},
}

// Run executes every experiment, writes the CSV files, the plots and
// REPORT.md into cfg.OutDir, and returns what it measured.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	sz := DefaultSizes()
	if cfg.Quick {
		sz = QuickSizes()
	}
	return RunSizes(ctx, cfg, sz)
}

// RunSizes is Run with explicit sizes.
func RunSizes(ctx context.Context, cfg Config, sz Sizes) (*Result, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	work := cfg.WorkDir
	if work == "" {
		d, err := os.MkdirTemp("", "vacbench-")
		if err != nil {
			return nil, fmt.Errorf("create work directory: %w", err)
		}
		work = d
		defer os.RemoveAll(d)
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	res := &Result{Config: cfg, Sizes: sz, Machine: ReadMachine(work), Started: time.Now()}
	res.Machine.DirectAsk = cfg.Direct
	r := &runner{cfg: cfg, sz: sz, work: work, logf: cfg.Logf, warnings: map[string]int{}, pgTmpl: &pgtest.Template{}}
	defer func() { _ = r.pgTmpl.Close() }()
	cfg.Logf("vacbench: %s sizes, work directory %s (%s), load %s", sz.Name, work, res.Machine.FS, res.Machine.LoadStart)
	for _, e := range experiments {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if cfg.Only != nil && !slices.Contains(cfg.Only, e.id) {
			continue
		}
		start, load := time.Now(), LoadAvg()
		cfg.Logf("experiment %d: start (load %s)", e.id, load)
		sec, err := e.run(ctx, r)
		if err != nil {
			return res, fmt.Errorf("experiment %d: %w", e.id, err)
		}
		sec.ID, sec.Load = e.id, load
		if sec.Headline, err = e.headline(tablesOf(sec.Tables)); err != nil {
			return res, fmt.Errorf("experiment %d: headline: %w", e.id, err)
		}
		sec.Elapsed = time.Since(start)
		cfg.Logf("experiment %d: done in %s", e.id, sec.Elapsed.Round(time.Millisecond))
		for _, t := range sec.Tables {
			if _, err := t.Write(cfg.OutDir); err != nil {
				return res, err
			}
		}
		res.Sections = append(res.Sections, sec)
	}
	res.Elapsed = time.Since(res.Started)
	res.Machine.LoadEnd = LoadAvg()
	res.Machine.DirectUsed = cfg.Direct && r.opened > 0 && r.directOpens == r.opened
	res.Warnings = r.warningList()
	res.Probe = r.probe
	if err := WriteReport(cfg.OutDir, res); err != nil {
		return res, err
	}
	return res, nil
}

// engineOpts are the engine options of every data directory.
func (r *runner) engineOpts(pool, walSeg int64) engine.Options {
	return engine.Options{BufferPoolBytes: pool, Direct: r.cfg.Direct, WALSegmentSize: walSeg, Logf: r.warn}
}

func (r *runner) warn(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.warnings[msg]++
	r.mu.Unlock()
}

func (r *runner) warningList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for m, n := range r.warnings {
		// Recovery and checkpoint chatter is not a warning worth reporting.
		if !strings.Contains(strings.ToLower(m), "direct") && !strings.Contains(strings.ToLower(m), "warn") {
			continue
		}
		out = append(out, fmt.Sprintf("%s (x%d)", m, n))
	}
	sort.Strings(out)
	return out
}

// buildPoolBytes is the smallest buffer pool data sets are built with.
const buildPoolBytes = 512 << 20

// template builds a data set once under the work directory.
func (r *runner) template(name string, opts engine.Options, specs []TableSpec) (string, error) {
	dir := filepath.Join(r.work, "template-"+name)
	start := time.Now()
	// Building is not measured: a large pool keeps it in memory. The pool
	// size is not stored in the directory; measured runs use their own.
	opts.BufferPoolBytes = max(opts.BufferPoolBytes, buildPoolBytes)
	if err := BuildDataSet(dir, opts, specs); err != nil {
		return "", err
	}
	r.logf("  data set %s: %d MiB on disk, built in %s", name, dirBytes(dir)>>20, time.Since(start).Round(time.Millisecond))
	return dir, nil
}

// fresh copies template to a new directory and opens it (cold pool).
// The caller closes the DB and calls drop(dir) when done.
func (r *runner) fresh(template string, opts engine.Options) (*engine.DB, string, error) {
	r.mu.Lock()
	r.seq++
	dir := filepath.Join(r.work, fmt.Sprintf("run-%03d", r.seq))
	r.mu.Unlock()
	if err := engine.CopyDataDir(template, dir); err != nil {
		return nil, "", fmt.Errorf("copy data set: %w", err)
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		return nil, "", fmt.Errorf("open %s: %w", dir, err)
	}
	r.mu.Lock()
	r.opened++
	if db.RuntimeStats().Direct {
		r.directOpens++
	}
	r.mu.Unlock()
	return db, dir, nil
}

// finish closes db and removes its directory.
func finish(db *engine.DB, dir string) error {
	err := db.Close()
	if rerr := os.RemoveAll(dir); err == nil {
		err = rerr
	}
	if errors.Is(err, engine.ErrClosed) {
		err = nil
	}
	return err
}

// mib formats bytes in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// pagesMiB is the size of n pages in MiB.
func pagesMiB(n int64) float64 { return float64(n) * 8192 / (1 << 20) }

// baseName is the file name of path p.
func baseName(p string) string { return filepath.Base(p) }
