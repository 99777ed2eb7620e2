package kubectlvacuum

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/controllers"
)

// maxEvents is how many of a run's latest events explain lists.
const maxEvents = 6

func (e *env) explainCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "explain RUN|POLICY",
		Short: "Say why a run is Pending, failed to start or is slow (or why a policy starts no run)",
		Long: `explain reads the run's status and conditions, the lock it waits for (and the run holding
it), the app it quiesces, its runner pod's status, its throttle, window and pause, and its
latest events, and says in a few lines what holds it. Given a policy's name instead (when no
run has it), it says why the policy starts no run: suspended, halted, waiting for a window or
for its active run.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var run vacuumv1alpha1.VacuumRun
			err := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: args[0]}, &run)
			if apierrors.IsNotFound(err) {
				var p vacuumv1alpha1.VacuumPolicy
				if perr := e.c.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: args[0]}, &p); perr == nil {
					return writeLines(e.streams.Out, explainPolicy(&p, time.Now()))
				}
			}
			if err != nil {
				return fmt.Errorf("get vacuumrun %s/%s: %w", e.ns, args[0], err)
			}
			lines, err := e.explainRun(ctx, &run, time.Now())
			if err != nil {
				return err
			}
			return writeLines(e.streams.Out, lines)
		},
	}
}

func writeLines(w io.Writer, lines []string) error {
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// explainRun is what explain prints for a run: a headline, then one line per cause found.
func (e *env) explainRun(ctx context.Context, run *vacuumv1alpha1.VacuumRun, now time.Time) ([]string, error) {
	row := runRow(run)
	head := fmt.Sprintf("vacuumrun %s/%s is %s", run.Namespace, run.Name, row.Phase)
	if c := reasonOf(run); c != nil {
		head += fmt.Sprintf(" (%s): %s", c.Reason, c.Message)
	}
	lines := []string{head}
	add := func(format string, args ...any) { lines = append(lines, "- "+fmt.Sprintf(format, args...)) }

	progressing := meta.FindStatusCondition(run.Status.Conditions, vacuumv1alpha1.ConditionProgressing)
	reason := ""
	if progressing != nil && progressing.Status == metav1.ConditionTrue {
		reason = progressing.Reason
	}
	if run.Spec.Cancel && !run.IsFinished() {
		add("cancel requested (spec.cancel): the runner pod is being stopped")
	}
	if !run.IsFinished() {
		switch reason {
		case vacuumv1alpha1.ReasonVolumeBusy, vacuumv1alpha1.ReasonServerBusy:
			s, err := e.lockHolder(ctx, run, now)
			if err != nil {
				return nil, err
			}
			add("%s", s)
		case vacuumv1alpha1.ReasonQuiescing:
			s, err := e.quiesceState(ctx, run)
			if err != nil {
				return nil, err
			}
			add("%s", s)
		case vacuumv1alpha1.ReasonClaimNotFound:
			add("waits for its PersistentVolumeClaim %s to exist", run.Spec.Target.PersistentVolumeClaim)
		}
	}
	if run.Status.Phase == vacuumv1alpha1.RunPending || run.Status.Phase == "" ||
		(run.IsFinished() && conditionReason(run) == vacuumv1alpha1.ReasonPodNotStarted) {
		pl, err := e.podState(ctx, run, now)
		if err != nil {
			return nil, err
		}
		for _, l := range pl {
			add("%s", l)
		}
	}
	if !run.IsFinished() {
		lines = append(lines, pauseAndWindow(run, now)...)
	}
	if run.Status.Phase == vacuumv1alpha1.RunRunning {
		lines = append(lines, throttleLines(run, now)...)
	}
	if run.IsFinished() && run.Status.ExitCode != nil {
		add("the runner's last exit code was %d", *run.Status.ExitCode)
	}
	ev, err := e.events(ctx, run, now)
	if err != nil {
		return nil, err
	}
	return append(lines, ev...), nil
}

func conditionReason(run *vacuumv1alpha1.VacuumRun) string {
	if c := run.Status.Outcome(); c != nil {
		return c.Reason
	}
	return ""
}

// lockHolder names the run holding the lock a run waits for, from the lock's Lease.
func (e *env) lockHolder(ctx context.Context, run *vacuumv1alpha1.VacuumRun, now time.Time) (string, error) {
	what := "volume " + run.Spec.Target.PersistentVolumeClaim
	if run.Spec.Target.Server != nil {
		what = "server " + run.Spec.Target.Server.Service
	}
	name := controllers.LockLeaseName(run)
	if name == "" {
		return "waits for the lock of " + what + " (its server is not identified yet)", nil
	}
	var lease coordinationv1.Lease
	err := e.c.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: name}, &lease)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("waits for the lock of %s (Lease %s): released meanwhile, taken at the next retry", what, name), nil
	}
	if err != nil {
		return "", fmt.Errorf("get lease %s/%s: %w", run.Namespace, name, err)
	}
	holder := lease.Labels[vacuumv1alpha1.LabelRun]
	since := ""
	if t := lease.Spec.AcquireTime; t != nil {
		since = ", since " + duration.HumanDuration(now.Sub(t.Time)) + " ago"
	}
	var h vacuumv1alpha1.VacuumRun
	err = e.c.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: holder}, &h)
	switch {
	case apierrors.IsNotFound(err) || err == nil && string(h.UID) != ptr.Deref(lease.Spec.HolderIdentity, ""):
		return fmt.Sprintf("waits for the lock of %s (Lease %s): held by run %s, which no longer exists; the lock is taken over at the next retry", what, name, holder), nil
	case err != nil:
		return "", fmt.Errorf("get lock holder vacuumrun %s/%s: %w", run.Namespace, holder, err)
	case h.IsFinished():
		return fmt.Sprintf("waits for the lock of %s (Lease %s): held by run %s, which ended %s; the lock is taken over at the next retry", what, name, holder, h.Status.Phase), nil
	}
	hr := runRow(&h)
	return fmt.Sprintf("waits for the lock of %s (Lease %s): held by run %s (%s, %d%%%s)", what, name, holder, hr.Phase, hr.Percent, since), nil
}

// quiesceState says how far the scale-down of the run's app is.
func (e *env) quiesceState(ctx context.Context, run *vacuumv1alpha1.VacuumRun) (string, error) {
	q := run.Spec.Target.Quiesce
	if q == nil {
		return "waits for its app to stop", nil
	}
	key := client.ObjectKey{Namespace: run.Namespace, Name: q.Name}
	var replicas, spec int32
	var err error
	switch q.Kind {
	case "StatefulSet":
		var s appsv1.StatefulSet
		err = e.c.Get(ctx, key, &s)
		replicas, spec = s.Status.Replicas, ptr.Deref(s.Spec.Replicas, 1)
	default:
		var d appsv1.Deployment
		err = e.c.Get(ctx, key, &d)
		replicas, spec = d.Status.Replicas, ptr.Deref(d.Spec.Replicas, 1)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("waits for %s %s, which does not exist", q.Kind, q.Name), nil
	}
	if err != nil {
		return "", fmt.Errorf("get %s %s/%s: %w", q.Kind, run.Namespace, q.Name, err)
	}
	return fmt.Sprintf("waits for %s %s to stop: scaled to %d, %d pod(s) still running", q.Kind, q.Name, spec, replicas), nil
}

// podState says why the run's pod has not started: its scheduling, its containers' waiting
// reasons (ImagePullBackOff, ...) and the time left before podStartTimeoutSeconds.
func (e *env) podState(ctx context.Context, run *vacuumv1alpha1.VacuumRun, now time.Time) ([]string, error) {
	timeout := int64(vacuumv1alpha1.DefaultPodStartTimeoutSeconds)
	if t := run.Spec.PodStartTimeoutSeconds; t != nil {
		timeout = *t
	}
	if run.Status.PodName == "" {
		if run.IsFinished() {
			return nil, nil
		}
		return []string{fmt.Sprintf("no runner pod yet; once it holds its lock the run fails with PodNotStarted if its pod has not started within podStartTimeoutSeconds (%d)", timeout)}, nil
	}
	var pod corev1.Pod
	err := e.c.Get(ctx, client.ObjectKey{Namespace: run.Namespace, Name: run.Status.PodName}, &pod)
	if apierrors.IsNotFound(err) {
		return []string{"runner pod " + run.Status.PodName + " no longer exists"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", run.Namespace, run.Status.PodName, err)
	}
	var out []string
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			out = append(out, fmt.Sprintf("pod %s is not scheduled (%s): %s", pod.Name, c.Reason, c.Message))
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			out = append(out, fmt.Sprintf("pod %s container %s is waiting: %s: %s", pod.Name, cs.Name, w.Reason, w.Message))
		}
	}
	if pod.Status.Phase == corev1.PodPending && !run.IsFinished() {
		out = append(out, fmt.Sprintf("pod %s is Pending for %s; the run fails with PodNotStarted after podStartTimeoutSeconds (%d)",
			pod.Name, duration.HumanDuration(now.Sub(pod.CreationTimestamp.Time)), timeout))
	}
	return out, nil
}

// pauseAndWindow says whether the user's pause or the run's window holds it.
func pauseAndWindow(run *vacuumv1alpha1.VacuumRun, now time.Time) []string {
	var out []string
	switch {
	case run.Status.IsPaused():
		since := ""
		if p := run.Status.Pause; p != nil && p.Since != nil {
			since = " for " + duration.HumanDuration(now.Sub(p.Since.Time))
		}
		out = append(out, fmt.Sprintf("- paused (spec.paused)%s; `kubectl vacuum resume %s` lets it go on; the pause counts against activeDeadlineSeconds and the window", since, run.Name))
	case run.Spec.Paused:
		out = append(out, "- pause requested (spec.paused): the runner pauses at its next delay point")
	}
	if w := run.Spec.Window; w != nil {
		if d := w.StopAt.Sub(now); d > 0 {
			out = append(out, fmt.Sprintf("- its window closes in %s (%s): the runner then stops and the run ends Interrupted; the next window's run resumes", duration.HumanDuration(d), w.StopAt.UTC().Format(time.RFC3339)))
		} else {
			out = append(out, fmt.Sprintf("- its window closed %s ago: the runner is stopping", duration.HumanDuration(-d)))
		}
	}
	return out
}

// throttleLines compare a running run's rate with what its throttle allows.
func throttleLines(run *vacuumv1alpha1.VacuumRun, now time.Time) []string {
	t := run.Status.AppliedThrottle
	if t == nil {
		t = &run.Spec.Throttle
	}
	var out []string
	delay := 2 * time.Millisecond
	if t.CostDelay != nil {
		delay = t.CostDelay.Duration
	}
	limit := ptr.Deref(t.CostLimit, 200)
	miss := ptr.Deref(t.PageMissCost, 2)
	dirty := ptr.Deref(t.PageDirtyCost, 20)
	pps := run.Status.PagesPerSecond
	if delay > 0 {
		perSecond := float64(limit) / delay.Seconds()
		out = append(out, fmt.Sprintf("- throttle %s allows %.0f cost units/s: at most %.0f pages/s read from storage (pageMissCost %d), %.0f if each is also dirtied (pageDirtyCost %d); it does %d pages/s",
			formatThrottle(t), perSecond, perSecond/float64(max(miss, 1)), miss, perSecond/float64(max(miss+dirty, 1)), dirty, pps))
	} else {
		out = append(out, fmt.Sprintf("- throttle %s: cost throttling is off (costDelay 0); it does %d pages/s", formatThrottle(t), pps))
	}
	if tot := run.Status.Totals; tot != nil && run.Status.StartTime != nil {
		elapsed := now.Sub(run.Status.StartTime.Time)
		if elapsed > 0 && tot.TimeSlept != nil && tot.TimeSlept.Duration > 0 {
			share := 100 * tot.TimeSlept.Seconds() / elapsed.Seconds()
			s := fmt.Sprintf("- it slept %s for the throttle in %s of running (%.0f%%)", tot.TimeSlept.Round(time.Millisecond), elapsed.Round(time.Second), share)
			if share >= 50 {
				s += fmt.Sprintf(": the throttle is what limits it (kubectl vacuum throttle %s --cost-limit N or --cost-delay D)", run.Name)
			}
			out = append(out, s)
		}
	}
	for _, c := range []struct {
		name string
		cap  int64
		rate int64
	}{{"read", quantityValue(t.MaxReadBytesPerSecond), run.Status.ReadBytesPerSecond},
		{"write", quantityValue(t.MaxWriteBytesPerSecond), run.Status.WriteBytesPerSecond},
		{"WAL", quantityValue(t.MaxWALBytesPerSecond), run.Status.WALBytesPerSecond}} {
		if c.cap > 0 && c.rate*10 >= c.cap*9 {
			out = append(out, fmt.Sprintf("- its %s rate (%d B/s) is at its cap (%d B/s)", c.name, c.rate, c.cap))
		}
	}
	if f := run.Status.Foreground; f != nil && f.P99 != "" {
		s := "- the foreground's p99 is " + f.P99
		if f.BaselineP99 != "" {
			s += fmt.Sprintf(" (%s before the vacuum, %s)", f.BaselineP99, dash(f.P99VsBaseline))
		}
		out = append(out, s)
	}
	return out
}

func quantityValue(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.Value()
}

// events are the run's latest events, oldest first.
func (e *env) events(ctx context.Context, run *vacuumv1alpha1.VacuumRun, now time.Time) ([]string, error) {
	list, err := e.kube.CoreV1().Events(run.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(run.UID)).String()})
	if err != nil {
		return nil, fmt.Errorf("list events of vacuumrun %s/%s: %w", run.Namespace, run.Name, err)
	}
	items := list.Items
	when := func(ev *corev1.Event) time.Time {
		switch {
		case !ev.EventTime.IsZero():
			return ev.EventTime.Time
		case !ev.LastTimestamp.IsZero():
			return ev.LastTimestamp.Time
		}
		return ev.CreationTimestamp.Time
	}
	sort.Slice(items, func(i, j int) bool { return when(&items[i]).Before(when(&items[j])) })
	if len(items) > maxEvents {
		items = items[len(items)-maxEvents:]
	}
	if len(items) == 0 {
		return nil, nil
	}
	out := []string{"Events:"}
	for i := range items {
		ev := &items[i]
		out = append(out, fmt.Sprintf("  %s ago\t%s\t%s\t%s", duration.HumanDuration(now.Sub(when(ev))), ev.Type, ev.Reason, ev.Message))
	}
	return out, nil
}

// explainPolicy says why a policy starts no run now.
func explainPolicy(p *vacuumv1alpha1.VacuumPolicy, now time.Time) []string {
	lines := []string{fmt.Sprintf("vacuumpolicy %s/%s", p.Namespace, p.Name)}
	add := func(format string, args ...any) { lines = append(lines, "- "+fmt.Sprintf(format, args...)) }
	if c := meta.FindStatusCondition(p.Status.Conditions, vacuumv1alpha1.ConditionReady); c != nil {
		add("Ready=%s (%s): %s", c.Status, c.Reason, c.Message)
	}
	if p.HaltedByCorruption() {
		add("halted: run %s found corruption; annotate the policy %s=%s once handled", p.Status.CorruptionRun, vacuumv1alpha1.AnnotationCorruptionAcknowledged, p.Status.CorruptionRun)
	}
	if p.Spec.Suspend {
		add("suspended (spec.suspend): no run starts on schedule; run-now still does")
	}
	if len(p.Status.Active) > 0 {
		add("active run(s): %s; under concurrencyPolicy %s a due tick waits for them", strings.Join(p.Status.Active, ", "), p.Spec.ConcurrencyPolicy)
	}
	if t := p.Status.LastSkippedTime; t != nil {
		add("the tick of %s waited for an active run (RunSkipped)", t.UTC().Format(time.RFC3339))
	}
	if w := p.Status.Window; w != nil && w.WaitingTick != nil {
		add("the tick of %s fell outside its window (%s) and waits for the next opening", w.WaitingTick.UTC().Format(time.RFC3339), p.Spec.Window.Schedule)
	}
	if v, ok := p.RunNowRequested(); ok {
		add("a run-now request (%s) is not handled yet: it makes run %s", v, controllers.RunNowRunName(p.Name, v))
	}
	if t := p.Status.NextScheduleTime; t != nil {
		add("next run %s (%s)", until(t, now), t.UTC().Format(time.RFC3339))
	}
	if lr := p.Status.LastRun; lr != nil {
		add("last run %s: %s %s", lr.Name, lr.Phase, lr.Message)
	}
	return lines
}
