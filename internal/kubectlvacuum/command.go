// Package kubectlvacuum is the kubectl plugin `kubectl vacuum`: status of policies and runs
// with live progress, run-now (through the policy's run-now annotation), cancel, throttle,
// pause and resume (patches of the run's mutable spec fields), the runner pod's logs, and
// explain (why a run waits, failed to start or is slow). It talks to the API server only,
// with kubectl's usual flags (--kubeconfig, --context, -n, ...).
package kubectlvacuum

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Exit codes of the plugin. run-now --wait maps the run's end to one of them.
const (
	// ExitOK: the command did what it was asked; with --wait, the run Succeeded.
	ExitOK = 0
	// ExitError: a bad argument, or the API server refused or could not be reached.
	ExitError = 1
	// ExitFailed: the run ended Failed.
	ExitFailed = 2
	// ExitCancelled: the run ended Cancelled.
	ExitCancelled = 3
	// ExitInterrupted: the run ended Interrupted (its window closed first).
	ExitInterrupted = 4
	// ExitTimeout: --timeout passed before the run ended; the run goes on.
	ExitTimeout = 5
)

// exitError carries an exit code other than ExitError to Main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Scheme holds the kinds the plugin reads: Kubernetes' own and vacuum.vacuumops.io's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = vacuumv1alpha1.AddToScheme(s)
	return s
}

// env is what every command needs: the clients, the namespace and the output streams.
type env struct {
	flags   *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	c       client.Client
	kube    kubernetes.Interface
	ns      string
	// poll is how often waiting commands read the run again.
	poll time.Duration
}

// connect builds the clients from kubectl's flags.
func (e *env) connect() error {
	cfg, err := e.flags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return fmt.Errorf("make API client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("make Kubernetes client: %w", err)
	}
	ns, _, err := e.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return fmt.Errorf("read namespace from kubeconfig: %w", err)
	}
	e.c, e.kube, e.ns = c, kube, ns
	return nil
}

// NewCommand is `kubectl vacuum` with all its subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	e := &env{flags: genericclioptions.NewConfigFlags(true), streams: streams, poll: 500 * time.Millisecond}
	root := &cobra.Command{
		Use:         "vacuum",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl vacuum"},
		Short:       "Operate vacuum-operator's VacuumPolicies and VacuumRuns",
		Long: `kubectl vacuum shows and operates the VacuumPolicies and VacuumRuns of vacuum-operator.

Exit codes: 0 ok (with --wait: the run Succeeded), 1 error (bad argument, API server),
2 the run Failed, 3 Cancelled, 4 Interrupted, 5 --timeout passed before the run ended.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return e.connect()
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	e.flags.AddFlags(root.PersistentFlags())
	root.AddCommand(e.statusCommand(), e.runNowCommand(), e.cancelCommand(), e.throttleCommand(),
		e.pauseCommand(true), e.pauseCommand(false), e.logsCommand(), e.explainCommand())
	return root
}

// Main runs the plugin with args (without the program name) and returns its exit code.
func Main(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	cmd := NewCommand(streams)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(streams.ErrOut, "error:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return ExitError
}

// StdStreams are the process's own streams.
func StdStreams() genericiooptions.IOStreams {
	return genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}
