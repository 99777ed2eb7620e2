package reliability

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/devcluster"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
	"github.com/vacuumops/vacuum-operator/test/e2eutil"
)

// Each scenario starts a run on a real volume under a crawl of a throttle (100 cost units
// a second: the small table takes minutes at that pace), so that it is certainly still
// working when the fault strikes and while it lasts, however slow the machine. Once the
// fault is over the test lifts the throttle (kubectl patch vacuumrun, as a user would) so
// that the run finishes in seconds. Nothing below asserts a speed: every wait is generous.
const (
	faultTable = "t"
	// waitEnd bounds how long a run may take to end once its fault is over.
	waitEnd = 4 * time.Minute
)

var _ = Describe("The operator under faults of the API server and the node", Ordered, func() {
	It("finishes the run with its one pod when the API server restarts mid-run", func() {
		ns, dir := newVolume("apiserver")
		run := newRun(ns, "apiserver", 2)
		watch := watchLivePods(ns, run.Name)
		pod := runningPod(run)
		before := waitProgress(pod, func(p runnerwire.Progress) bool { return p.PagesScanned > 0 })

		By("killing the API server while the runner works")
		// SIGKILL, as a crash or an OOM kill does. (A graceful SIGTERM is no quicker: the API
		// server then waits up to a minute for the manager's and the node's open watches.)
		killAPIServer()
		// The runner does not need the API server: it goes on, and the manager still sees it.
		during := waitProgress(pod, func(p runnerwire.Progress) bool { return progressed(p, before) })
		Consistently(managerAlive).WithTimeout(3 * time.Second).Should(BeTrue())
		By("starting the API server again on the same etcd")
		Expect(testEnv.ControlPlane.APIServer.Start()).To(Succeed())

		// The manager reconnects and goes on folding the runner's progress into the run: the
		// run shows work the runner did after the restart.
		after := waitProgress(pod, func(p runnerwire.Progress) bool {
			return ptr.Deref(p.SleptSeconds, 0) > ptr.Deref(during.SleptSeconds, 0)
		})
		Eventually(func(g Gomega) {
			r := getRunG(g, run)
			g.Expect(r.Status.Phase).To(Equal(vacuumv1alpha1.RunRunning))
			g.Expect(r.Status.Totals).NotTo(BeNil())
			g.Expect(r.Status.Totals.TimeSlept).NotTo(BeNil())
			g.Expect(r.Status.Totals.TimeSlept.Seconds()).To(BeNumerically(">=", ptr.Deref(after.SleptSeconds, 0)-0.01))
		}).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())

		unthrottle(run)
		done := waitFinished(run, waitEnd)
		watch.stop()
		Expect(done.Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded), "run ended %s: %s", done.Status.Phase, done.Status.Message)
		Expect(done.Status.Attempts).To(Equal(int32(1)), "the restart must not cost an attempt")
		Expect(podsOf(ns, run.Name)).To(HaveLen(1))
		Expect(podsOf(ns, run.Name)[0].UID).To(Equal(pod.UID))
		Expect(watch.max()).To(Equal(1), "live runner pods at once")
		Expect(managerAlive()).To(BeTrue(), "the manager exited across the API server restart")
		expectCheckClean(dir)
		Expect(deadTuples(dir)).To(BeZero())
	})

	// Found by this spec (it failed before the fix): the local node wrote a pod's end once and
	// gave up after 10 s, so a runner that ended while the API server was down left its pod
	// Running for good. It now keeps reporting, as a kubelet does, until the API server takes it.
	It("does not lose a runner's end that happened while the API server was down", func() {
		ns, dir := newVolume("apiserver-end")
		run := newRun(ns, "apiserver-end", 2)
		watch := watchLivePods(ns, run.Name)
		pod := runningPod(run)
		waitProgress(pod, func(p runnerwire.Progress) bool { return p.PagesScanned > 0 })

		By("killing the API server, then the runner, and keeping the API server down")
		killAPIServer()
		Expect(syscall.Kill(-runnerPid(pod), syscall.SIGKILL)).To(Succeed())
		// Longer than any single status write of the node may wait: what a kubelet knows
		// about its pods must reach the API server once it is back, however long it was away.
		time.Sleep(15 * time.Second)
		Expect(testEnv.ControlPlane.APIServer.Start()).To(Succeed())
		unthrottle(run)

		done := waitFinished(run, waitEnd)
		watch.stop()
		Expect(done.Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded), "run ended %s: %s", done.Status.Phase, done.Status.Message)
		Expect(done.Status.Attempts).To(Equal(int32(2)), "the killed attempt, then the retry")
		Expect(watch.max()).To(Equal(1), "live runner pods at once")
		expectCheckClean(dir)
		Expect(deadTuples(dir)).To(BeZero())
	})

	It("retries on a fresh pod and succeeds when the node crashes mid-run and comes back", func() {
		ns, dir := newVolume("nodecrash")
		run := newRun(ns, "nodecrash", 2)
		watch := watchLivePods(ns, run.Name)
		pod := runningPod(run)
		waitProgress(pod, func(p runnerwire.Progress) bool { return p.PagesScanned > 0 })

		By("crashing the node: cut off from the API server, its runner killed, stopped")
		crashNode(pod)
		// With its node gone the pod still says Running: the manager must wait, not start a
		// second runner that could share the volume with one still alive on a lost node.
		Consistently(func(g Gomega) {
			g.Expect(getRunG(g, run).Status.Attempts).To(Equal(int32(1)))
		}).WithTimeout(5 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		unthrottle(run) // the retry runs at full speed

		By("starting the node again")
		node = startNode(true)
		done := waitFinished(run, waitEnd)
		watch.stop()
		Expect(done.Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded), "run ended %s: %s", done.Status.Phase, done.Status.Message)
		Expect(done.Status.Attempts).To(Equal(int32(2)), "one failed attempt (the crash), then one that succeeded")
		Expect(done.Status.FailedAttempts).To(Equal(int32(1)))
		Expect(reasonOf(done, vacuumv1alpha1.ConditionComplete)).To(Equal(vacuumv1alpha1.ReasonSucceeded))
		Expect(watch.max()).To(Equal(1), "live runner pods at once")
		lost := getPod(ns, pod.Name)
		Expect(lost.Status.Phase).To(Equal(corev1.PodFailed), "the restarted node marks the pod whose process it lost")
		expectCheckClean(dir)
		Expect(deadTuples(dir)).To(BeZero())
	})

	It("fails the run with a reason when the node crashes mid-run and no retry is left", func() {
		ns, dir := newVolume("nodecrash-final")
		run := newRun(ns, "nodecrash-final", 0)
		watch := watchLivePods(ns, run.Name)
		pod := runningPod(run)
		waitProgress(pod, func(p runnerwire.Progress) bool { return p.PagesScanned > 0 })

		crashNode(pod)
		node = startNode(true)
		done := waitFinished(run, waitEnd)
		watch.stop()
		Expect(done.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(reasonOf(done, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonBackoffLimitExceeded))
		Expect(done.Status.Message).To(ContainSubstring("backoffLimit 0"))
		Expect(done.Status.Attempts).To(Equal(int32(1)))
		Expect(watch.max()).To(Equal(1), "live runner pods at once")
		// A killed lazy vacuum leaves a volume that needs crash recovery: no retry is left, so
		// the runner refuses to replay it for any other opener (exit 7, NeedsRecovery), and
		// with recovery allowed the volume is consistent.
		err := exec.Command(runnerBin, "check", "--data", dir).Run()
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "check of a crashed volume: %v", err)
		Expect(exit.ExitCode()).To(Equal(7))
		e2eutil.Runner{Ctx: faultCtx, Bin: runnerBin}.ExpectCheckClean(dir, "--allow-crash-recovery")
	})
})

// newVolume makes a namespace and in it claim "data" on a fresh engine data directory with
// one bloated table of about 300 pages.
func newVolume(prefix string) (string, string) {
	GinkgoHelper()
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	Expect(k8s.Create(faultCtx, nsObj)).To(Succeed())
	dir := filepath.Join(GinkgoT().TempDir(), "data")
	runTool("init", "--data", dir)
	runTool("bloat", "--data", dir, "--table", faultTable, "--rows", "20000", "--payload-bytes", "100",
		"--dead-fraction", "0.3", "--indexes", "1", "--seed", "9")
	Expect(deadTuples(dir)).To(BeNumerically(">", 1000))
	Expect(devcluster.CreateVolume(faultCtx, k8s, nsObj.Name, "data", dir)).To(Succeed())
	return nsObj.Name, dir
}

// newRun creates a VacuumRun by hand on claim "data", throttled to a crawl.
func newRun(ns, name string, backoffLimit int32) *vacuumv1alpha1.VacuumRun {
	GinkgoHelper()
	run := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	run.Spec.Target.PersistentVolumeClaim = "data"
	run.Spec.Mode = vacuumv1alpha1.VacuumModeLazy
	run.Spec.BackoffLimit = backoffLimit
	run.Spec.Throttle = vacuumv1alpha1.Throttle{
		CostDelay: &metav1.Duration{Duration: 100 * time.Millisecond}, CostLimit: ptr.To(int32(10)),
		PageHitCost: ptr.To(int32(1)), PageMissCost: ptr.To(int32(2)), PageDirtyCost: ptr.To(int32(20)),
	}
	Expect(k8s.Create(faultCtx, run)).To(Succeed())
	return run
}

// unthrottle lifts the run's cost throttle; the manager pushes it to a running pod and a
// new attempt starts with it.
func unthrottle(run *vacuumv1alpha1.VacuumRun) {
	GinkgoHelper()
	patch := []byte(`{"spec":{"throttle":{"costDelay":"0s"}}}`)
	Eventually(func() error {
		return k8s.Patch(faultCtx, run, client.RawPatch("application/merge-patch+json", patch))
	}).WithTimeout(time.Minute).Should(Succeed())
}

// crashNode cuts the node off the API server, kills the pod's runner and stops the node.
func crashNode(pod *corev1.Pod) {
	GinkgoHelper()
	pid := runnerPid(pod)
	node.proxy.cut()
	Expect(syscall.Kill(-pid, syscall.SIGKILL)).To(Succeed())
	node.crash()
	Expect(getPod(pod.Namespace, pod.Name).Status.Phase).To(Equal(corev1.PodRunning),
		"the crashed node reported its pod's end; the scenario needs a pod lost with its node")
}

// killAPIServer SIGKILLs envtest's kube-apiserver (found by its certificate directory, which
// is ours) and lets envtest notice, so that APIServer.Start can start it again.
func killAPIServer() {
	GinkgoHelper()
	pid := apiServerPid()
	Expect(syscall.Kill(-pid, syscall.SIGKILL)).To(Succeed())
	Eventually(func() error {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
			return fmt.Errorf("kube-apiserver %d not reaped yet", pid)
		}
		// Stop is a no-op once envtest has seen the process exit; before that it fails to
		// signal the dead process group, and is tried again.
		return testEnv.ControlPlane.APIServer.Stop()
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// apiServerPid is the process id of the kube-apiserver that serves from apiCertDir.
func apiServerPid() int {
	GinkgoHelper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	Expect(err).NotTo(HaveOccurred())
	for _, f := range procs {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue // gone meanwhile, or a kernel thread
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) != "kube-apiserver" || !strings.Contains(string(b), apiCertDir) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		Expect(err).NotTo(HaveOccurred())
		return pid
	}
	Fail("no kube-apiserver process with certificate directory " + apiCertDir)
	return 0
}

// getRunG re-reads a run inside an Eventually.
func getRunG(g Gomega, run *vacuumv1alpha1.VacuumRun) *vacuumv1alpha1.VacuumRun {
	var r vacuumv1alpha1.VacuumRun
	g.Expect(k8s.Get(faultCtx, client.ObjectKeyFromObject(run), &r)).To(Succeed())
	return &r
}

// waitFinished waits until the run has ended, and then that it stays ended with no live pod.
func waitFinished(run *vacuumv1alpha1.VacuumRun, timeout time.Duration) *vacuumv1alpha1.VacuumRun {
	GinkgoHelper()
	var r *vacuumv1alpha1.VacuumRun
	Eventually(func(g Gomega) {
		r = getRunG(g, run)
		g.Expect(r.IsFinished()).To(BeTrue(), "run %s is %s: %s", r.Name, r.Status.Phase, r.Status.Message)
	}).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	Consistently(func(g Gomega) {
		g.Expect(getRunG(g, run).Status.Phase).To(Equal(r.Status.Phase))
		g.Expect(livePods(podsOf(run.Namespace, run.Name))).To(BeEmpty(), "a pod of the ended run %s still runs", run.Name)
	}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	return r
}

// reasonOf is the reason of a run's condition.
func reasonOf(run *vacuumv1alpha1.VacuumRun, typ string) string {
	c := meta.FindStatusCondition(run.Status.Conditions, typ)
	if c == nil {
		return ""
	}
	return c.Reason
}

// podsOf lists a run's runner pods.
func podsOf(ns, run string) []corev1.Pod {
	GinkgoHelper()
	var list corev1.PodList
	Expect(k8s.List(faultCtx, &list, client.InNamespace(ns), client.MatchingLabels{vacuumv1alpha1.LabelRun: run})).To(Succeed())
	return list.Items
}

func getPod(ns, name string) *corev1.Pod {
	GinkgoHelper()
	var p corev1.Pod
	Expect(k8s.Get(faultCtx, client.ObjectKey{Namespace: ns, Name: name}, &p)).To(Succeed())
	return &p
}

// livePods are the pods that may be running a runner: neither Succeeded nor Failed.
func livePods(pods []corev1.Pod) []string {
	var live []string
	for _, p := range pods {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p.Name)
		}
	}
	return live
}

// podWatch samples a run's live pods every 100 ms and keeps the largest count seen. Pods
// are only created through the API server, so sampling gaps while it is down hide nothing.
type podWatch struct {
	mu      sync.Mutex
	most    int
	seen    string
	quit    chan struct{}
	stopped chan struct{}
}

func watchLivePods(ns, run string) *podWatch {
	w := &podWatch{quit: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(w.stopped)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			var list corev1.PodList
			if err := k8s.List(faultCtx, &list, client.InNamespace(ns), client.MatchingLabels{vacuumv1alpha1.LabelRun: run}); err == nil {
				live := livePods(list.Items)
				w.mu.Lock()
				if len(live) > w.most {
					w.most, w.seen = len(live), strings.Join(live, ",")
				}
				w.mu.Unlock()
			}
			select {
			case <-w.quit:
				return
			case <-t.C:
			}
		}
	}()
	DeferCleanup(w.stop)
	return w
}

func (w *podWatch) stop() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
	<-w.stopped
}

// max is the largest number of live pods seen at once (their names are in the failure text).
func (w *podWatch) max() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.most > 1 {
		GinkgoWriter.Printf("live pods at once: %s\n", w.seen)
	}
	return w.most
}

// runningPod waits for the run's current pod to be Running with an address.
func runningPod(run *vacuumv1alpha1.VacuumRun) *corev1.Pod {
	GinkgoHelper()
	return e2eutil.RunningPod(faultCtx, k8s, run, e2eutil.Wait{Timeout: 2 * time.Minute, Poll: 200 * time.Millisecond})
}

// waitProgress waits until the pod's progress satisfies cond and returns it.
func waitProgress(pod *corev1.Pod, cond func(runnerwire.Progress) bool) runnerwire.Progress {
	GinkgoHelper()
	return e2eutil.WaitProgress(faultCtx, k8s, pod, "there", cond, 5*time.Second, e2eutil.Wait{Timeout: 2 * time.Minute, Poll: 200 * time.Millisecond})
}

// progressed says whether the runner did more work than at before.
func progressed(p, before runnerwire.Progress) bool {
	return p.PagesScanned > before.PagesScanned || p.BufferHits+p.BufferMisses > before.BufferHits+before.BufferMisses
}

// runnerPid is the runner's process id, from the local node's pid file.
func runnerPid(pod *corev1.Pod) int {
	GinkgoHelper()
	dir := filepath.Join(nodeState, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	Expect(err).NotTo(HaveOccurred())
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	Expect(err).NotTo(HaveOccurred())
	return pid
}

// runTool runs vacuum-runner and returns its stdout; it fails the spec on a non-zero exit.
func runTool(args ...string) []byte {
	GinkgoHelper()
	return e2eutil.Runner{Ctx: faultCtx, Bin: runnerBin}.Run(args...)
}

// deadTuples is the dead tuples of the test table, from `vacuum-runner stats --json`.
func deadTuples(dir string) int64 {
	GinkgoHelper()
	var s struct {
		Tables []struct {
			Name       string `json:"name"`
			DeadTuples int64  `json:"deadTuples"`
		} `json:"tables"`
	}
	Expect(json.Unmarshal(runTool("stats", "--data", dir, "--json"), &s)).To(Succeed())
	for _, t := range s.Tables {
		if t.Name == faultTable {
			return t.DeadTuples
		}
	}
	Fail("no table " + faultTable + " in " + dir)
	return 0
}

// expectCheckClean runs `vacuum-runner check --json` and expects no problems.
func expectCheckClean(dir string) {
	GinkgoHelper()
	e2eutil.Runner{Ctx: faultCtx, Bin: runnerBin}.ExpectCheckClean(dir)
}
