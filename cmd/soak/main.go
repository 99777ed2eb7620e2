// Command soak is the crash soak of the storage engine (package
// internal/soak): it runs a writer with lazy vacuums, VACUUM FULLs and
// checkpoints in a child process, crashes the child again and again
// (SIGKILL, or a simulated power loss inside it), and after every crash
// compares the whole table with a ledger of committed operations and runs
// Check. It prints the figures and exits 0 when nothing was lost or
// resurrected, 1 when a problem was found, 2 on bad flags.
//
//	soak --duration 10m --kills 250 --data DIR --ledger FILE --seed N
//
// `soak child ...` is the child (started by the soak itself).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/soak"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		os.Exit(soak.ChildMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("soak", flag.ContinueOnError)
	fl.SetOutput(stderr)
	var cfg soak.Config
	fl.DurationVar(&cfg.Duration, "duration", 0, "stop after this long (0 = no limit)")
	fl.IntVar(&cfg.Kills, "kills", 0, "stop after this many crashes (0 = no limit)")
	fl.StringVar(&cfg.Data, "data", "", "data directory (created if missing, resumed otherwise; default: a new temporary directory)")
	fl.StringVar(&cfg.Ledger, "ledger", "", "ledger file, outside the data directory (default: next to it)")
	fl.Uint64Var(&cfg.Seed, "seed", 0, "random seed (0 = time)")
	fl.IntVar(&cfg.Rows, "rows", 1000, "table size the writer steers towards")
	fl.DurationVar(&cfg.MaxRun, "max-run", 600*time.Millisecond, "longest a child runs before its SIGKILL")
	fl.Float64Var(&cfg.PowerLossShare, "powerloss-share", 0.5, "share of crashes that are simulated power losses")
	fl.IntVar(&cfg.PowerLossMaxOps, "powerloss-max-ops", 4000, "a power loss cuts the child at a file operation drawn from 1..N")
	fl.Float64Var(&cfg.RecoveryCrashShare, "recovery-crash-share", 0.1, "share of crashes followed by a crash inside crash recovery")
	quiet := fl.Bool("quiet", false, "do not print a line per crash")
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() > 0 || (cfg.Duration <= 0 && cfg.Kills <= 0) {
		_, _ = fmt.Fprintln(stderr, "soak: set --duration or --kills (and no positional arguments)")
		return 2
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	if cfg.Data == "" {
		tmp, err := os.MkdirTemp("", "soak-")
		if err != nil {
			_, _ = fmt.Fprintln(stderr, "soak:", err)
			return 1
		}
		cfg.Data = filepath.Join(tmp, "data")
	}
	if cfg.Ledger == "" {
		cfg.Ledger = filepath.Clean(cfg.Data) + ".ledger"
	}
	self, err := os.Executable()
	if err != nil {
		_, _ = fmt.Fprintln(stderr, "soak:", err)
		return 1
	}
	cfg.Command = func(args []string) *exec.Cmd { return exec.Command(self, append([]string{"child"}, args...)...) }
	if !*quiet {
		cfg.Logf = func(format string, a ...any) { _, _ = fmt.Fprintf(stderr, format+"\n", a...) }
	}
	_, _ = fmt.Fprintf(stdout, "soak: data %s, ledger %s, seed %d\n", cfg.Data, cfg.Ledger, cfg.Seed)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fig, err := soak.Run(ctx, cfg)
	if fig != nil {
		_, _ = fmt.Fprint(stdout, fig)
	}
	switch {
	case errors.Is(err, soak.ErrDiverged):
		_, _ = fmt.Fprintf(stderr, "soak: %v (data directory and ledger kept for inspection)\n", err)
		return 1
	case err != nil:
		_, _ = fmt.Fprintln(stderr, "soak:", err)
		return 1
	}
	return 0
}
