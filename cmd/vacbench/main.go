// Command vacbench measures the five field reports of docs/design.md with
// the bundled engine and writes docs/benchmarks/REPORT.md, one CSV file per
// table of figures and PNG plots (see internal/bench).
//
//	vacbench [--quick] [--only 7] [--out docs/benchmarks] [--work DIR] [--direct=true]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/bench"
)

func main() {
	bench.ServeIfChild() // experiment 5's engine-server processes are this binary
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr))
}

// run parses args, runs the benchmark and returns the exit code.
func run(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("vacbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "docs/benchmarks", "directory for REPORT.md, the CSV files and the PNG plots")
	work := fs.String("work", "", "directory for the data directories (default: a new temporary directory, removed afterwards)")
	quick := fs.Bool("quick", false, "run every experiment at toy size (under 2 minutes)")
	direct := fs.Bool("direct", true, "O_DIRECT relation I/O (falls back where the file system refuses it)")
	only := fs.String("only", "", "comma-separated experiment numbers to run (default: all); the report then holds only those")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vacbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var onlyIDs []int
	if *only != "" {
		for _, f := range strings.Split(*only, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || id < 0 {
				fmt.Fprintf(stderr, "vacbench: --only: %q is not an experiment number\n", f)
				return 2
			}
			onlyIDs = append(onlyIDs, id)
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	lg := log.New(stderr, "", log.Ltime)
	via := ""
	if os.Getenv("MAKELEVEL") != "" {
		via = "make bench"
	}
	cfg := bench.Config{
		OutDir: *out, WorkDir: *work, Quick: *quick, Direct: *direct, Only: onlyIDs,
		Command: strings.TrimSpace("vacbench " + strings.Join(args, " ")),
		Via:     via,
		Logf:    lg.Printf,
	}
	start := time.Now()
	res, err := bench.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "vacbench: %v\n", err)
		return 1
	}
	lg.Printf("wrote %s/%s and %d experiments' CSV and PNG files in %s", *out, bench.ReportFile, len(res.Sections), time.Since(start).Round(time.Second))
	return 0
}
