// Command vacuum-runner is the runner of every vacuum pod and the local CLI for a data
// directory of the bundled storage engine: init, bloat, stats, vacuum, full, check and run
// (pod mode). See package internal/runner.
package main

import (
	"context"
	"os"
	_ "time/tzdata" // the image built without Docker has no /usr/share/zoneinfo; a policy's timeZone needs this

	"golang.org/x/term"

	"github.com/vacuumops/vacuum-operator/internal/runner"
)

func main() {
	ctx, stop := runner.WithSignals(context.Background())
	code := runner.Main(ctx, os.Args[1:], runner.Env{
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Terminal: term.IsTerminal(int(os.Stderr.Fd())),
	})
	stop()
	os.Exit(code)
}
