// Command kubectl-vacuum is the kubectl plugin for vacuum-operator: put it on PATH and run
// `kubectl vacuum status`, `run-now`, `cancel`, `throttle`, `pause`, `resume`, `logs` and
// `explain` (see `kubectl vacuum --help` and the README).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vacuumops/vacuum-operator/internal/kubectlvacuum"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlvacuum.Main(ctx, os.Args[1:], kubectlvacuum.StdStreams())
	stop()
	os.Exit(code)
}
