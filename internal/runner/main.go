package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// SignalError is the cause of a context cancelled by SIGTERM or SIGINT.
type SignalError struct{ Signal os.Signal }

// Error names the signal.
func (e *SignalError) Error() string { return "cancelled by " + signalName(e.Signal) }

func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return s.String()
}

// WithSignals returns a context cancelled, with a *SignalError cause, by the first SIGTERM or
// SIGINT; stop releases the signal handlers.
func WithSignals(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			cancel(&SignalError{Signal: s})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// Env is what a command reads and writes besides its flags.
type Env struct {
	Stdout, Stderr io.Writer
	// Terminal says stderr is a terminal (progress bar on).
	Terminal bool
}

const usageText = `usage: vacuum-runner COMMAND [flags]

commands:
  init    --data DIR
  bloat   --data DIR --table NAME [--rows N] [--dead-fraction F] [--update-fraction F]
          [--indexes N] [--key-type TYPE] [--null-fraction F] [--payload-bytes N] [--seed N]
  stats   --data DIR [--json]
  vacuum  --data DIR [--table NAME]... [throttle and memory flags] [--json]
  full    --data DIR [--table NAME]... [throttle and memory flags] [--json]
  vacuum|full --server HOST:PORT --database DB [--user U] [--password-file F]
          [--sslmode disable|require|verify-ca|verify-full] [--sslrootcert F]
          [--table NAME]... [throttle flags] [--json]   (a live server, online)
  check   --data DIR [--json] [--purge-quarantine]
  upgrade --data DIR [--json]   (an older format version to this build's)
  load    (--server HOST:PORT | --service NAME) --database DB [--user U] [--password-file F]
          [--table T] [--rows N] [--rate N] [--update-percent P] [--connections N]
          [--duration D] [--report-every D] [--json]   (lookups and updates at a fixed rate)
  run     (--spec JSON | --spec-file PATH | --mode lazy|full [vacuum flags])
          --listen ADDR --termination-log PATH [--control-token-file PATH] [--lock-timeout 5m]

run "vacuum-runner COMMAND --help" for a command's flags.`

// Main runs vacuum-runner with args (without the program name) and returns its exit code.
// ctx carries cancellation (see WithSignals).
func Main(ctx context.Context, args []string, env Env) (code int) {
	// A panic anywhere in a command is an internal error (exit 1, retried), never the exit
	// status 2 Go gives it, which would read as bad input.
	defer func() {
		var pe *PanicError
		if err := recovered(recover()); errors.As(err, &pe) {
			_, _ = fmt.Fprintf(env.Stderr, "vacuum-runner: %v\n%s", pe, pe.Stack)
			code = runnerwire.ExitInternal
		}
	}()
	if len(args) == 0 {
		_, _ = fmt.Fprintln(env.Stderr, "vacuum-runner: missing command (init, bloat, stats, vacuum, full, check, upgrade, run, load)")
		return 2
	}
	cmds := map[string]func(context.Context, []string, Env) error{
		"init": cmdInit, "bloat": cmdBloat, "stats": cmdStats, "check": cmdCheck,
		"vacuum": cmdVacuum, "full": cmdFull, "run": cmdRun, "upgrade": cmdUpgrade, "load": cmdLoad,
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" {
		_, _ = fmt.Fprintln(env.Stdout, usageText)
		return 0
	}
	cmd, ok := cmds[name]
	if !ok {
		_, _ = fmt.Fprintf(env.Stderr, "vacuum-runner: unknown command %q (init, bloat, stats, vacuum, full, check, upgrade, run, load)\n", name)
		return 2
	}
	testPanic("command")
	err := cmd(ctx, args[1:], env)
	if err == nil {
		return 0
	}
	var help *helpError
	if errors.As(err, &help) {
		_, _ = fmt.Fprint(env.Stdout, help.text)
		return 0
	}
	var coded *codedError
	if errors.As(err, &coded) {
		// run has already reported and written its summary.
		return coded.code
	}
	cancelled := context.Cause(ctx) != nil && ctx.Err() != nil
	code = exitCode(err, cancelled)
	msg := oneLine(err)
	if cancelled {
		if c := context.Cause(ctx); c != nil {
			msg = c.Error() + ": " + msg
		}
	}
	_, _ = fmt.Fprintf(env.Stderr, "vacuum-runner %s: %s\n", name, msg)
	return code
}

// codedError carries an exit code already decided (and a message already printed).
type codedError struct{ code int }

func (e *codedError) Error() string { return fmt.Sprintf("exit code %d", e.code) }

// helpError is --help: the usage text goes to stdout and the exit code is 0.
type helpError struct{ text string }

func (e *helpError) Error() string { return "help requested" }
