package runner

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vacuumops/vacuum-operator/internal/cliflag"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// quantity writes a byte count as a Kubernetes quantity ("128Mi").
func quantity(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }

// parseFlags parses args into fs and turns every failure into a one-line *UsageError.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return &helpError{text: fmt.Sprintf("usage: vacuum-runner %s [flags]\n%s", fs.Name(), fs.FlagUsages())}
		}
		return usagef("%s", err.Error())
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (flags start with --)", fs.Arg(0))
	}
	return nil
}

// vacuumFlags are the flags of vacuum, full and run: they build a RunSpec in which only the
// flags given on the command line are set, so that a spec's values and the defaults apply to
// the others.
type vacuumFlags struct {
	fs     *pflag.FlagSet
	data   string
	mode   string
	tables []string

	costDelay                          time.Duration
	costLimit, hit, miss, dirty        int32
	readRate, writeRate, walRate       cliflag.Quantity
	ringSize, bufferPool, workMem      cliflag.Quantity
	parallelism, indexWorkers, minDead int32
	noTruncate                         bool
	json                               bool
	allowRecovery                      bool
	stopAfter                          time.Duration
	resume                             bool
}

// addVacuumFlags registers the vacuum flags on fs; withMode adds --mode (run only).
func addVacuumFlags(fs *pflag.FlagSet, withMode bool) *vacuumFlags {
	f := &vacuumFlags{fs: fs}
	fs.StringVar(&f.data, "data", "", "data directory")
	if withMode {
		fs.StringVar(&f.mode, "mode", "lazy", "lazy or full (case-insensitive)")
	}
	fs.StringArrayVar(&f.tables, "table", nil, "table to vacuum (repeatable; none = all tables)")
	fs.DurationVar(&f.costDelay, "cost-delay", runnerwire.DefaultCostDelay, "cost delay (0 = no cost throttling)")
	fs.Int32Var(&f.costLimit, "cost-limit", runnerwire.DefaultCostLimit, "cost units per cost delay")
	fs.Int32Var(&f.hit, "page-hit-cost", runnerwire.DefaultPageHitCost, "cost of a page found in the buffer pool")
	fs.Int32Var(&f.miss, "page-miss-cost", runnerwire.DefaultPageMissCost, "cost of a page read from storage")
	fs.Int32Var(&f.dirty, "page-dirty-cost", runnerwire.DefaultPageDirtyCost, "cost of a page dirtied")
	f.readRate.Value = resource.MustParse("0")
	f.writeRate.Value = resource.MustParse("0")
	f.walRate.Value = resource.MustParse("0")
	fs.Var(&f.readRate, "max-read-rate", "relation bytes read per second (0 = no limit)")
	fs.Var(&f.writeRate, "max-write-rate", "relation bytes written per second (0 = no limit)")
	fs.Var(&f.walRate, "max-wal-rate", "WAL bytes per second (0 = no limit)")
	f.ringSize.Value = resource.MustParse("2Mi")
	f.bufferPool.Value = resource.MustParse("128Mi")
	f.workMem.Value = resource.MustParse("64Mi")
	fs.Var(&f.ringSize, "ring-size", "vacuum ring size (0 = none, else 128Ki to 16Gi)")
	fs.Var(&f.bufferPool, "buffer-pool", "buffer pool size")
	fs.Int32Var(&f.parallelism, "parallelism", runnerwire.DefaultParallelism, "tables vacuumed at once")
	fs.Int32Var(&f.indexWorkers, "index-workers", 0, "indexes of one table vacuumed at once (lazy vacuum; full builds them one after another)")
	fs.Var(&f.workMem, "maintenance-work-mem", "dead-tuple memory (lazy) or index sort memory (full) per worker")
	fs.BoolVar(&f.noTruncate, "no-truncate", false, "keep empty pages at the end of tables (lazy)")
	fs.Int32Var(&f.minDead, "min-dead-percent", 0, "skip tables whose dead share is below this percentage (0-100)")
	fs.DurationVar(&f.stopAfter, "stop-after", 0,
		"stop every table's vacuum this long after the start and exit 0, unfinished tables complete false (0 = no limit)")
	fs.BoolVar(&f.resume, "resume", false, "continue each table's lazy vacuum from its saved position (block 0 where there is none)")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON")
	fs.BoolVar(&f.allowRecovery, "allow-crash-recovery", false,
		"replay the WAL of a data directory that was not shut down cleanly (else exit 7)")
	return f
}

// overlay sets in s every field whose flag was given on the command line.
func (f *vacuumFlags) overlay(s *runnerwire.RunSpec) {
	set := f.fs.Changed
	q := func(v cliflag.Quantity) *resource.Quantity { c := v.Value.DeepCopy(); return &c }
	if set("data") {
		s.DataDir = f.data
	}
	if set("allow-crash-recovery") {
		s.AllowCrashRecovery = f.allowRecovery
	}
	if set("mode") {
		s.Mode = runnerwire.Mode(f.mode)
	}
	if set("stop-after") && f.stopAfter > 0 {
		s.StopAt = &metav1.Time{Time: time.Now().Add(f.stopAfter)}
	}
	if set("resume") {
		s.Resume = f.resume
	}
	if set("table") {
		s.Tables = append([]string(nil), f.tables...)
	}
	th := s.Throttle
	if th == nil {
		th = &runnerwire.Throttle{}
	}
	touched := false
	mark := func(name string) bool { ok := set(name); touched = touched || ok; return ok }
	if mark("cost-delay") {
		th.CostDelay = &metav1.Duration{Duration: f.costDelay}
	}
	if mark("cost-limit") {
		th.CostLimit = ptr.To(f.costLimit)
	}
	if mark("page-hit-cost") {
		th.PageHitCost = ptr.To(f.hit)
	}
	if mark("page-miss-cost") {
		th.PageMissCost = ptr.To(f.miss)
	}
	if mark("page-dirty-cost") {
		th.PageDirtyCost = ptr.To(f.dirty)
	}
	if mark("max-read-rate") {
		th.MaxReadBytesPerSecond = q(f.readRate)
	}
	if mark("max-write-rate") {
		th.MaxWriteBytesPerSecond = q(f.writeRate)
	}
	if mark("max-wal-rate") {
		th.MaxWALBytesPerSecond = q(f.walRate)
	}
	if touched || s.Throttle != nil {
		s.Throttle = th
	}
	if set("ring-size") {
		s.RingSize = q(f.ringSize)
	}
	if set("buffer-pool") {
		s.BufferPoolSize = q(f.bufferPool)
	}
	if set("parallelism") {
		s.Parallelism = ptr.To(f.parallelism)
	}
	if set("index-workers") {
		s.IndexWorkers = ptr.To(f.indexWorkers)
	}
	if set("maintenance-work-mem") {
		s.MaintenanceWorkMem = q(f.workMem)
	}
	if set("no-truncate") {
		t := !f.noTruncate
		s.Truncate = &t
	}
	if set("min-dead-percent") {
		s.MinDeadTuplePercent = ptr.To(f.minDead)
	}
}

// flagOfField names the command-line flag of a RunSpec field, for error messages.
var flagOfField = map[string]string{
	"dataDir": "--data", "mode": "--mode", "stopAt": "--stop-after", "ringSize": "--ring-size", "bufferPoolSize": "--buffer-pool",
	"parallelism": "--parallelism", "indexWorkers": "--index-workers",
	"maintenanceWorkMem": "--maintenance-work-mem", "minDeadTuplePercent": "--min-dead-percent",
	"throttle.costDelay": "--cost-delay", "throttle.costLimit": "--cost-limit",
	"throttle.pageHitCost": "--page-hit-cost", "throttle.pageMissCost": "--page-miss-cost",
	"throttle.pageDirtyCost": "--page-dirty-cost", "throttle.maxReadBytesPerSecond": "--max-read-rate",
	"throttle.maxWriteBytesPerSecond": "--max-write-rate", "throttle.maxWALBytesPerSecond": "--max-wal-rate",
}

// resolveSpec applies defaults and ranges (runnerwire.Resolve) and reports every problem in one
// line, naming flags rather than spec fields when the spec came from flags.
func resolveSpec(s runnerwire.RunSpec, fromFlags bool) (runnerwire.Resolved, error) {
	r, err := s.Resolve()
	if err == nil {
		return r, nil
	}
	var msgs []string
	for _, e := range flatten(err) {
		var fe *runnerwire.FieldError
		if errors.As(e, &fe) {
			name := fe.Field
			if fromFlags {
				if f, ok := flagOfField[fe.Field]; ok {
					name = f
				} else if strings.HasPrefix(fe.Field, "tables[") {
					name = "--table"
				}
			}
			if fe.Field == "dataDir" && fe.Message == "required" {
				msgs = append(msgs, name+" is required")
				continue
			}
			msgs = append(msgs, name+": "+fe.Message)
			continue
		}
		msgs = append(msgs, e.Error())
	}
	return r, &UsageError{Msg: strings.Join(msgs, "; ")}
}

// flatten unwraps errors.Join trees into their leaves.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// mustQuantity parses a constant quantity.
func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
