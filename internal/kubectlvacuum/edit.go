package kubectlvacuum

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// patchRun applies edit to the run's spec as a merge patch of what it changed: only the
// mutable fields (cancel, paused, throttle) are edited here, and the API server's CEL rules
// have the last word on them.
func (e *env) patchRun(ctx context.Context, name string, edit func(*vacuumv1alpha1.VacuumRun) error) (*vacuumv1alpha1.VacuumRun, error) {
	var run vacuumv1alpha1.VacuumRun
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &run); err != nil {
		return nil, fmt.Errorf("get vacuumrun %s/%s: %w", e.ns, name, err)
	}
	patch := client.MergeFrom(run.DeepCopy())
	if err := edit(&run); err != nil {
		return nil, err
	}
	if err := e.c.Patch(ctx, &run, patch); err != nil {
		return nil, fmt.Errorf("patch vacuumrun %s/%s: %w", e.ns, name, err)
	}
	return &run, nil
}

func (e *env) cancelCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cancel RUN",
		Short: "Cancel a run (spec.cancel=true): its pod is stopped and it ends Cancelled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := e.patchRun(cmd.Context(), args[0], func(r *vacuumv1alpha1.VacuumRun) error {
				if r.IsFinished() {
					return fmt.Errorf("vacuumrun %s/%s already ended %s", r.Namespace, r.Name, r.Status.Phase)
				}
				r.Spec.Cancel = true
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.streams.Out, "vacuumrun/%s cancel requested\n", run.Name)
			return nil
		},
	}
}

func (e *env) pauseCommand(pause bool) *cobra.Command {
	use, short, done := "resume RUN", "Let a paused run go on (spec.paused=false)", "resume requested"
	if pause {
		use, short, done = "pause RUN", "Pause a run at its runner's next delay point (spec.paused=true)", "pause requested"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := e.patchRun(cmd.Context(), args[0], func(r *vacuumv1alpha1.VacuumRun) error {
				r.Spec.Paused = pause
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.streams.Out, "vacuumrun/%s %s\n", run.Name, done)
			return nil
		},
	}
}

// throttleFlags are the throttle fields `throttle` may set; unset flags leave the run's.
type throttleFlags struct {
	costDelay, readRate, writeRate, walRate string
	costLimit                               int32
}

func (f *throttleFlags) apply(cmd *cobra.Command, t *vacuumv1alpha1.Throttle) error {
	changed := false
	if cmd.Flags().Changed("cost-delay") {
		d, err := time.ParseDuration(f.costDelay)
		if err != nil {
			return fmt.Errorf("--cost-delay %q: %w", f.costDelay, err)
		}
		t.CostDelay, changed = &metav1.Duration{Duration: d}, true
	}
	if cmd.Flags().Changed("cost-limit") {
		t.CostLimit, changed = &f.costLimit, true
	}
	for _, r := range []struct {
		flag, v string
		field   **resource.Quantity
	}{{"max-read-rate", f.readRate, &t.MaxReadBytesPerSecond}, {"max-write-rate", f.writeRate, &t.MaxWriteBytesPerSecond}, {"max-wal-rate", f.walRate, &t.MaxWALBytesPerSecond}} {
		if !cmd.Flags().Changed(r.flag) {
			continue
		}
		q, err := resource.ParseQuantity(r.v)
		if err != nil {
			return fmt.Errorf("--%s %q: a byte quantity such as 20Mi: %w", r.flag, r.v, err)
		}
		*r.field, changed = &q, true
	}
	if !changed {
		return fmt.Errorf("nothing to change: give --cost-delay, --cost-limit, --max-read-rate, --max-write-rate or --max-wal-rate")
	}
	return nil
}

func (e *env) throttleCommand() *cobra.Command {
	var f throttleFlags
	cmd := &cobra.Command{
		Use:   "throttle RUN [--cost-delay D] [--cost-limit N] [--max-read-rate Q] [--max-write-rate Q] [--max-wal-rate Q]",
		Short: "Change a run's throttle (spec.throttle); the manager pushes it to the running runner",
		Long: `throttle patches the run's spec.throttle, the one spec field besides cancel and paused that
may change while it runs: the manager sends it to the runner pod, which takes it at its next
delay point (status.appliedThrottle shows it taken). Byte rates are quantities per second
(20Mi = 20 MiB/s; 0 = no limit). A policy's own throttle change later replaces a hand edit.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			run, err := e.patchRun(cmd.Context(), args[0], func(r *vacuumv1alpha1.VacuumRun) error {
				if r.IsFinished() {
					return fmt.Errorf("vacuumrun %s/%s already ended %s", r.Namespace, r.Name, r.Status.Phase)
				}
				return f.apply(cmd, &r.Spec.Throttle)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(e.streams.Out, "vacuumrun/%s throttle %s\n", run.Name, formatThrottle(&run.Spec.Throttle))
			return nil
		},
	}
	cmd.Flags().StringVar(&f.costDelay, "cost-delay", "", "sleep owed each time cost-limit is spent (0 to 100ms)")
	cmd.Flags().Int32Var(&f.costLimit, "cost-limit", 0, "cost budget between sleeps (1 to 10000)")
	cmd.Flags().StringVar(&f.readRate, "max-read-rate", "", "cap on bytes read per second (e.g. 20Mi; 0 = none)")
	cmd.Flags().StringVar(&f.writeRate, "max-write-rate", "", "cap on bytes written per second")
	cmd.Flags().StringVar(&f.walRate, "max-wal-rate", "", "cap on WAL bytes written per second")
	return cmd
}
