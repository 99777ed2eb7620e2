package e2e

import (
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
	"github.com/vacuumops/vacuum-operator/test/e2eutil"
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
	return e2eutil.RunningPod(suiteCtx, cluster.Client, run, e2eutil.Wait{Timeout: 60 * time.Second, Poll: 100 * time.Millisecond})
}

// progress reads a runner pod's GET /progress.
func progress(pod *corev1.Pod) (runnerwire.Progress, error) {
	return e2eutil.Progress(suiteCtx, pod, 2*time.Second)
}

// waitProgress waits until the pod's progress satisfies cond and returns it.
func waitProgress(pod *corev1.Pod, what string, cond func(runnerwire.Progress) bool) runnerwire.Progress {
	GinkgoHelper()
	return e2eutil.WaitProgress(suiteCtx, pod, what, cond, 2*time.Second, e2eutil.Wait{Timeout: 60 * time.Second, Poll: 100 * time.Millisecond})
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
