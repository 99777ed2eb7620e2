package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// newNamespace creates a namespace for one scenario.
func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	Expect(cluster.Client.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}

// kubectlRun runs kubectl against the dev cluster and returns its output.
func kubectlRun(args ...string) string {
	GinkgoHelper()
	cmd := exec.CommandContext(suiteCtx, kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "kubectl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// runOf waits for the (first) run of a policy and returns it.
func runOf(ns, policy string) *vacuumv1alpha1.VacuumRun {
	GinkgoHelper()
	var run *vacuumv1alpha1.VacuumRun
	Eventually(func() error {
		var list vacuumv1alpha1.VacuumRunList
		if err := cluster.Client.List(suiteCtx, &list, client.InNamespace(ns), client.MatchingLabels{vacuumv1alpha1.LabelPolicy: policy}); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("policy %s/%s has no run yet", ns, policy)
		}
		run = &list.Items[0]
		return nil
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	return run
}

// getRun re-reads a run.
func getRun(run *vacuumv1alpha1.VacuumRun) *vacuumv1alpha1.VacuumRun {
	GinkgoHelper()
	var r vacuumv1alpha1.VacuumRun
	Expect(cluster.Client.Get(suiteCtx, client.ObjectKeyFromObject(run), &r)).To(Succeed())
	return &r
}

// waitPhase waits until the run reaches phase, failing early if it ends in another one.
func waitPhase(run *vacuumv1alpha1.VacuumRun, phase vacuumv1alpha1.RunPhase, timeout time.Duration) *vacuumv1alpha1.VacuumRun {
	GinkgoHelper()
	var r *vacuumv1alpha1.VacuumRun
	Eventually(func(g Gomega) {
		r = getRun(run)
		if r.Status.Phase.IsFinal() && r.Status.Phase != phase {
			StopTrying(fmt.Sprintf("run %s ended %s (%s), want %s", r.Name, r.Status.Phase, r.Status.Message, phase)).Now()
		}
		g.Expect(r.Status.Phase).To(Equal(phase), "run %s: %s", r.Name, r.Status.Message)
	}).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
	return r
}

// runningPod waits for the run's pod to run and returns it (with its pod IP).
func runningPod(run *vacuumv1alpha1.VacuumRun) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func() error {
		var list corev1.PodList
		if err := cluster.Client.List(suiteCtx, &list, client.InNamespace(run.Namespace), client.MatchingLabels{vacuumv1alpha1.LabelRun: run.Name}); err != nil {
			return err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("no running pod of run %s among %d", run.Name, len(list.Items))
	}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return pod
}

// progress reads a runner pod's GET /progress.
func progress(pod *corev1.Pod) (runnerwire.Progress, error) {
	hc, err := pinnedClient(suiteCtx, cluster.Client, pod)
	if err != nil {
		return runnerwire.Progress{}, err
	}
	p, err := runnerwire.FetchProgress(suiteCtx, hc, pod.Status.PodIP)
	if err != nil {
		return runnerwire.Progress{}, err
	}
	return *p, nil
}

// waitProgress waits until the pod's progress satisfies cond and returns it.
func waitProgress(pod *corev1.Pod, what string, cond func(runnerwire.Progress) bool) runnerwire.Progress {
	GinkgoHelper()
	var p runnerwire.Progress
	Eventually(func() error {
		var err error
		if p, err = progress(pod); err != nil {
			return err
		}
		if !cond(p) {
			return fmt.Errorf("progress not yet %s: %+v", what, p)
		}
		return nil
	}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return p
}

// runnerPid is the process id of the pod's runner, from the local node's pid file.
func runnerPid(pod *corev1.Pod) int {
	GinkgoHelper()
	dir := filepath.Join(cluster.NodeStateDir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	Expect(err).NotTo(HaveOccurred())
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	Expect(err).NotTo(HaveOccurred())
	return pid
}

// policy is a run-once VacuumPolicy on a claim; the history limits are left unset, so the API
// server defaults them (3 and 3).
func policy(ns, name, claim string, mode vacuumv1alpha1.VacuumMode, th vacuumv1alpha1.Throttle, tables ...string) *vacuumv1alpha1.VacuumPolicy {
	p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Spec.Target.PersistentVolumeClaim = claim
	p.Spec.Target.Tables = tables
	p.Spec.Mode = mode
	p.Spec.Throttle = th
	return p
}

func ptrTo[T any](v T) *T { return &v }

// costThrottle is a pure cost throttle: limit units per delay, PostgreSQL's page costs.
func costThrottle(delay time.Duration, limit int32) vacuumv1alpha1.Throttle {
	return vacuumv1alpha1.Throttle{
		CostDelay: &metav1.Duration{Duration: delay}, CostLimit: ptrTo(limit),
		PageHitCost: ptrTo(int32(1)), PageMissCost: ptrTo(int32(2)), PageDirtyCost: ptrTo(int32(20)),
	}
}

// cost is the cost units a progress snapshot's counters add up to at the page costs 1/2/20.
func cost(p runnerwire.Progress) float64 {
	return float64(p.BufferHits) + 2*float64(p.BufferMisses) + 20*float64(p.BuffersDirtied)
}

// pinnedClient is an HTTPS client for a runner pod's control port that accepts only the
// certificate in its run's token Secret, as the manager's own client does.
func pinnedClient(ctx context.Context, c client.Reader, pod *corev1.Pod) (*http.Client, error) {
	var s corev1.Secret
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Labels[vacuumv1alpha1.LabelRun] + "-token"}
	if err := c.Get(ctx, key, &s); err != nil {
		return nil, fmt.Errorf("token secret of pod %s: %w", pod.Name, err)
	}
	return runnerwire.PinnedClientFromPEM(s.Data[runnerwire.TLSCertKey], 5*time.Second)
}
