package kubectlvacuum

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/controllers"
)

func (e *env) logsCommand() *cobra.Command {
	var follow, previous bool
	var attempt int32
	cmd := &cobra.Command{
		Use:   "logs RUN [-f]",
		Short: "Print the logs of the run's runner pod (its current or last attempt)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var run vacuumv1alpha1.VacuumRun
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: args[0]}, &run); err != nil {
				return fmt.Errorf("get vacuumrun %s/%s: %w", e.ns, args[0], err)
			}
			pod := run.Status.PodName
			if attempt > 0 {
				pod = fmt.Sprintf("%s-%d", run.Name, attempt)
			}
			if pod == "" {
				return fmt.Errorf("vacuumrun %s/%s has no runner pod yet (%s); see kubectl vacuum explain %s", e.ns, run.Name, runRow(&run).Phase, run.Name)
			}
			opts := &corev1.PodLogOptions{Container: controllers.RunnerContainer, Follow: follow, Previous: previous}
			stream, err := e.kube.CoreV1().Pods(e.ns).GetLogs(pod, opts).Stream(ctx)
			if err != nil {
				return fmt.Errorf("logs of pod %s/%s: %w", e.ns, pod, err)
			}
			defer func() { _ = stream.Close() }()
			if _, err := io.Copy(e.streams.Out, stream); err != nil && ctx.Err() == nil {
				return fmt.Errorf("read logs of pod %s/%s: %w", e.ns, pod, err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream the logs until the pod ends")
	cmd.Flags().BoolVarP(&previous, "previous", "p", false, "the logs of the container's previous instance")
	cmd.Flags().Int32Var(&attempt, "attempt", 0, "the pod of this attempt (1, 2, ...) instead of the current one")
	return cmd
}
