// Command demo is `make demo`: it shows the whole product on one machine with no cluster.
// It builds the binaries, starts the local dev cluster (internal/devcluster), makes a data
// volume with a bloated engine (three tables, 20 to 60 % dead, one over 100 MiB), creates its
// PV and PVC, applies the sample policies from config/samples/ with kubectl, shows a live
// `kubectl get vacuumruns`-style table while they work and prints each run's per-table
// report. Then the online part: the engine-server sample (StatefulSet and Service shop-db)
// with its table bloated, the sample load generator beside it, and the online sample policy
// run once beside the live load, the table showing the foreground's p99 against its baseline,
// and a report comparing the foreground's p99 before and during the vacuum. It stops
// everything it started (also on Ctrl-C or SIGTERM) and never reads standard input; the
// online part needs root (routable pod addresses, so that Services have endpoints).
//
//	demo [--keep] [--timeout 10m]
//
// --keep leaves the cluster up after the runs until Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/term"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/devcluster"
)

// The sample policies the demo applies, and the claim they name.
var samplePolicies = []string{
	"config/samples/vacuum_v1alpha1_vacuumpolicy_lazy.yaml",
	"config/samples/vacuum_v1alpha1_vacuumpolicy_full.yaml",
}

const (
	claimName = "orders-data"
	namespace = "default"
)

func main() {
	keep := flag.Bool("keep", os.Getenv("KEEP") != "" && os.Getenv("KEEP") != "0", "keep the cluster up after the runs until Ctrl-C (also KEEP=1)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up if the runs have not ended by then")
	flag.Parse()
	logf.SetLogger(logr.Discard()) // the control plane and the node log nothing the user needs
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *keep, *timeout); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, keep bool, timeout time.Duration) (err error) {
	start := time.Now()
	root, err := devcluster.RepoRoot()
	if err != nil {
		return err
	}
	out := os.Stdout
	step := func(format string, a ...any) {
		_, _ = fmt.Fprintf(out, "==> [%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, a...))
	}
	step("building manager, vacuum-runner and engine-server, starting the local dev cluster")
	c, err := devcluster.Start(ctx, devcluster.Options{RepoRoot: root, Build: true, Log: io.Discard,
		ManagerArgs: []string{"--progress-interval=1s"}})
	if err != nil {
		return err
	}
	defer func() {
		step("stopping the dev cluster")
		if stopErr := c.Stop(); stopErr != nil && err == nil {
			err = stopErr
		}
	}()
	_, _ = fmt.Fprintf(out, "\n    From another terminal:  export KUBECONFIG=%s\n", c.Kubeconfig)
	_, _ = fmt.Fprintf(out, "                            kubectl get vacuumpolicies,vacuumruns,pods\n")
	_, _ = fmt.Fprintf(out, "    Logs: %s, %s\n\n", c.ManagerLog, filepath.Join(c.NodeStateDir, "logs"))

	dataDir := filepath.Join(c.StateDir, "volumes", claimName)
	runner := filepath.Join(root, "bin", "vacuum-runner")
	step("making the data volume %s", dataDir)
	if err := makeVolume(ctx, out, runner, dataDir); err != nil {
		return err
	}
	if err := devcluster.CreateVolume(ctx, c.Client, namespace, claimName, dataDir); err != nil {
		return err
	}
	step("claim %s/%s bound to it; applying the sample policies", namespace, claimName)
	if err := applySamples(ctx, c, root); err != nil {
		return err
	}
	step("the runs (refreshing every second)")
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	live := term.IsTerminal(int(os.Stdout.Fd()))
	runs, err := watchRuns(wctx, c.Client, namespace, policyNames(), out, live)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintln(out)
	printReports(out, runs)
	if failed := failedRuns(runs); failed != "" {
		return fmt.Errorf("runs did not succeed: %s", failed)
	}
	online, peak, err := onlineDemo(wctx, c, root, out, live, step)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintln(out)
	printReports(out, []vacuumv1alpha1.VacuumRun{*online})
	printForeground(out, online, peak)
	runs = append(runs, *online)
	step("done")
	if keep {
		_, _ = fmt.Fprintf(out, "\nKEEP: the cluster stays up until Ctrl-C.  export KUBECONFIG=%s\n", c.Kubeconfig)
		<-ctx.Done()
	}
	if failed := failedRuns(runs); failed != "" {
		return fmt.Errorf("runs did not succeed: %s", failed)
	}
	return nil
}

// policyNames are the names of the sample policies.
func policyNames() []string { return []string{"orders-lazy", "orders-full"} }

// applySamples applies the sample policies with kubectl, as a user would.
func applySamples(ctx context.Context, c *devcluster.Cluster, root string) error {
	return kubectlApply(ctx, c, root, samplePolicies...)
}

// kubectl runs kubectl against the dev cluster, its output on standard output.
func kubectl(ctx context.Context, c *devcluster.Cluster, args ...string) error {
	bin, err := devcluster.Kubectl(c.AssetsDir)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	cmd.Stdin = nil
	b, err := cmd.CombinedOutput()
	_, _ = os.Stdout.Write(b)
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", args[0], err)
	}
	return nil
}
