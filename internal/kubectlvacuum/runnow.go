package kubectlvacuum

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/controllers"
)

func (e *env) runNowCommand() *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "run-now POLICY",
		Short: "Start a run of POLICY now, whatever its schedule; print its name",
		Long: `run-now sets the policy's vacuum.vacuumops.io/run-now annotation to a new value, as
kubectl annotate would; the policy then creates the run <policy>-now-<hash>, whose name is
printed. Under concurrencyPolicy Forbid the run is created once the active run has ended.
With --wait the command waits for the run's end and exits 0 when it Succeeded, 2 Failed,
3 Cancelled, 4 Interrupted, 5 when --timeout passes first (the run goes on).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			name, err := e.requestRun(ctx, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(e.streams.Out, "vacuumrun/%s\n", name)
			if !wait {
				return nil
			}
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return e.waitForEnd(ctx, name, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait for the run's end; the exit code says how it ended")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up after this long (0 = wait forever)")
	return cmd
}

// requestRun sets a new value of the policy's run-now annotation and returns the name of the
// run the policy makes for it.
func (e *env) requestRun(ctx context.Context, policy string) (string, error) {
	var p vacuumv1alpha1.VacuumPolicy
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: policy}, &p); err != nil {
		return "", fmt.Errorf("get vacuumpolicy %s/%s: %w", e.ns, policy, err)
	}
	if p.HaltedByCorruption() {
		return "", fmt.Errorf("vacuumpolicy %s/%s is halted: run %s found corruption; annotate it %s=%s once handled",
			e.ns, policy, p.Status.CorruptionRun, vacuumv1alpha1.AnnotationCorruptionAcknowledged, p.Status.CorruptionRun)
	}
	value := strconv.FormatInt(time.Now().UnixNano(), 10)
	patch := client.MergeFrom(p.DeepCopy())
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[vacuumv1alpha1.AnnotationRunNow] = value
	if err := e.c.Patch(ctx, &p, patch); err != nil {
		return "", fmt.Errorf("annotate vacuumpolicy %s/%s %s=%s: %w", e.ns, policy, vacuumv1alpha1.AnnotationRunNow, value, err)
	}
	return controllers.RunNowRunName(p.Name, value), nil
}

// waitForEnd polls the run until it ended (or ctx ends) and maps its phase to an exit code.
func (e *env) waitForEnd(ctx context.Context, name string, timeout time.Duration) error {
	key := client.ObjectKey{Namespace: e.ns, Name: name}
	lastNote := ""
	for {
		var run vacuumv1alpha1.VacuumRun
		err := e.c.Get(ctx, key, &run)
		switch {
		case err == nil:
			if note := progressNote(&run); note != lastNote {
				fmt.Fprintln(e.streams.ErrOut, note)
				lastNote = note
			}
			if run.IsFinished() {
				return endError(&run)
			}
		case apierrors.IsNotFound(err):
			// not made yet (an active run under Forbid), or already pruned
		case ctx.Err() == nil:
			return fmt.Errorf("get vacuumrun %s/%s: %w", e.ns, name, err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return &exitError{code: ExitTimeout, err: fmt.Errorf("vacuumrun %s/%s did not end within %s", e.ns, name, timeout)}
			}
			return ctx.Err()
		case <-time.After(e.poll):
		}
	}
}

// progressNote is one line on where a waited-for run is.
func progressNote(run *vacuumv1alpha1.VacuumRun) string {
	row := runRow(run)
	s := fmt.Sprintf("%s: %s", run.Name, row.Phase)
	if row.Reason != "" {
		s += " (" + row.Reason + ")"
	}
	if run.Status.Phase == vacuumv1alpha1.RunRunning {
		s += fmt.Sprintf(" %d%% %s", row.Percent, row.Table)
	}
	return s
}

// endError is nil for a Succeeded run and an exitError naming the outcome otherwise.
func endError(run *vacuumv1alpha1.VacuumRun) error {
	code := ExitFailed
	switch run.Status.Phase {
	case vacuumv1alpha1.RunSucceeded:
		return nil
	case vacuumv1alpha1.RunCancelled:
		code = ExitCancelled
	case vacuumv1alpha1.RunInterrupted:
		code = ExitInterrupted
	}
	reason := ""
	if c := run.Status.Outcome(); c != nil {
		reason = " (" + c.Reason + ")"
	}
	return &exitError{code: code, err: fmt.Errorf("vacuumrun %s/%s ended %s%s: %s", run.Namespace, run.Name, run.Status.Phase, reason, run.Status.Message)}
}
