// Command devcluster runs the local dev cluster (see internal/devcluster) until Ctrl-C or
// SIGTERM: envtest's control plane with the CRDs, the real kube-controller-manager, a local
// node that runs every pod (the operator's, Deployments' and StatefulSets') as local
// processes, and the manager. For development and tests only; as root on Linux the pods get
// addresses of 10.213.0.0/24 (VACUUM_LOCALNODE_POD_CIDR), which Services' EndpointSlices
// carry, otherwise loopback ones, which they cannot.
//
//	devcluster up [--state-dir DIR] [--no-build] [--no-manager] [--volume NAME=DIR]...
//
// It prints `export KUBECONFIG=...` once the cluster is up; point kubectl at it from another
// terminal. --volume creates a PersistentVolume on DIR and a claim NAME bound to it in the
// default namespace (DIR is where `vacuum-runner init` made an engine data directory).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vacuumops/vacuum-operator/internal/devcluster"
)

type volumes []string

func (v *volumes) String() string     { return strings.Join(*v, ",") }
func (v *volumes) Set(s string) error { *v = append(*v, s); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "up" {
		return errors.New("usage: devcluster up [--state-dir DIR] [--no-build] [--no-manager] [--volume NAME=DIR]")
	}
	fs := flag.NewFlagSet("devcluster up", flag.ContinueOnError)
	stateDir := fs.String("state-dir", "", "directory for the kubeconfig, logs and pod state (default: a temp dir, removed on exit)")
	noBuild := fs.Bool("no-build", false, "use the manager and vacuum-runner already in bin/")
	noManager := fs.Bool("no-manager", false, "do not start the manager (run it yourself against the kubeconfig)")
	var vols volumes
	fs.Var(&vols, "volume", "NAME=DIR: a claim NAME in namespace default bound to a volume on DIR (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	root, err := devcluster.RepoRoot()
	if err != nil {
		return err
	}
	logf.SetLogger(logr.Discard()) // the control plane and the node log nothing the user needs
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := devcluster.Start(ctx, devcluster.Options{
		RepoRoot: root, Build: !*noBuild, StateDir: *stateDir, KeepState: *stateDir != "",
		NoManager: *noManager, Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	defer func() {
		_, _ = fmt.Fprintln(os.Stderr, "stopping the dev cluster")
		if err := c.Stop(); err != nil {
			_, _ = fmt.Fprintln(os.Stderr, "devcluster: stop:", err)
		}
	}()
	for _, v := range vols {
		name, dir, ok := strings.Cut(v, "=")
		if !ok || name == "" || dir == "" {
			return fmt.Errorf("--volume %q: want NAME=DIR", v)
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		if err := devcluster.CreateVolume(ctx, c.Client, "default", name, abs); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(os.Stderr, "claim default/%s bound to %s\n", name, abs)
	}
	fmt.Printf("export KUBECONFIG=%s\n", c.Kubeconfig)
	_, _ = fmt.Fprintf(os.Stderr, "dev cluster up (kubectl: %s); Ctrl-C stops it\n", kubectlHint(c.AssetsDir))
	<-ctx.Done()
	return nil
}

func kubectlHint(assets string) string {
	k, err := devcluster.Kubectl(assets)
	if err != nil {
		return "none found"
	}
	return k
}
