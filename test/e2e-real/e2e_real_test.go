package e2ereal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/kubectlvacuum"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
	"github.com/vacuumops/vacuum-operator/test/e2eutil"
)

// slowLazyRun is a lazy VacuumRun of the slow-data volume under slowThrottle, as the runner's
// UID's group (so it can write the volume).
func slowLazyRun(ns, name string) *vacuumv1alpha1.VacuumRun {
	fsGroup := int64(runnerUID)
	return &vacuumv1alpha1.VacuumRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: vacuumv1alpha1.VacuumRunSpec{VacuumSpec: vacuumv1alpha1.VacuumSpec{
			Target:   vacuumv1alpha1.Target{PersistentVolumeClaim: "slow-data"},
			Mode:     vacuumv1alpha1.VacuumModeLazy,
			Throttle: slowThrottle(),
			Runner:   vacuumv1alpha1.RunnerSpec{PodSecurityContext: &vacuumv1alpha1.RunnerPodSecurityContext{FSGroup: &fsGroup}},
		}},
	}
}

// A cost-bound throttle slow enough that a run of a few thousand pages lasts tens of seconds:
// long enough to watch it, poll it and kill its pod mid-run.
func slowThrottle() vacuumv1alpha1.Throttle {
	limit := int32(10)
	return vacuumv1alpha1.Throttle{CostDelay: &metav1.Duration{Duration: 50 * time.Millisecond}, CostLimit: &limit}
}

// Ordered: the specs share a namespace and the second volume; ContinueOnFailure: one failure
// does not hide what the others would show.
var _ = Describe("The operator on a real single-node cluster", Ordered, ContinueOnFailure, func() {
	var ns string
	BeforeAll(func(ctx SpecContext) {
		ns = newNamespace(ctx, "e2e-real")
	})

	It("reads a schedule in timeZone Europe/Paris with the image's own time-zone data (no /usr/share/zoneinfo)", func(ctx SpecContext) {
		p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paris"},
			Spec: vacuumv1alpha1.VacuumPolicySpec{Schedule: "0 3 1 1 *", TimeZone: "Europe/Paris", // next: January 1st, no run during the test
				VacuumSpec: vacuumv1alpha1.VacuumSpec{Target: vacuumv1alpha1.Target{PersistentVolumeClaim: "no-such-claim"}}}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			var got vacuumv1alpha1.VacuumPolicy
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
			c := meta.FindStatusCondition(got.Status.Conditions, vacuumv1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Ready: %s %s", c.Reason, c.Message)
			g.Expect(got.Status.NextScheduleTime).NotTo(BeNil())
			g.Expect(got.Status.NextScheduleTime.In(time.UTC).Hour()).To(Equal(2), "03:00 in Paris in January is 02:00 UTC")
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
	})

	It("vacuums a bloated volume in a real runner container when the sample policy is applied with kubectl", func(ctx SpecContext) {
		vol := makeVolume(ctx, ns, "orders-data",
			bloat{table: "orders", rows: 200000, deadFraction: "0.3"},
			bloat{table: "events", rows: 100000, deadFraction: "0.4"})
		env.kubectlRun(ctx, nil, "apply", "-n", ns, "-f",
			filepath.Join(env.repoRoot, "config", "samples", "vacuum_v1alpha1_vacuumpolicy_lazy.yaml"))

		w := watchRun(ctx, ns, runOfPolicy(ctx, ns, "orders-lazy"), vacuumv1alpha1.RunSucceeded, 5*time.Minute)
		GinkgoWriter.Printf("run %s: seen running with progress: %v, /progress polled from the host: %d times\n",
			w.run.Name, w.sawProgressInStatus, w.hostPolls)

		By("taking the figures from the termination message")
		Expect(w.run.Status.Totals).NotTo(BeNil())
		Expect(w.run.Status.Totals.TuplesRemoved).To(Equal(vol.totalDead()),
			"tuplesRemoved should be every dead tuple bloat made (both tables are over minDeadTuplePercent)")
		Expect(w.summary).NotTo(BeNil(), "the pod's termination message was never seen")
		Expect(w.summary.Phase).To(Equal("Succeeded"))
		Expect(w.summary.ExitCode).To(Equal(0))
		Expect(w.summary.Totals.TuplesRemoved).To(Equal(vol.totalDead()))
		Expect(w.run.Status.Tables).To(ConsistOf(
			HaveField("Name", "orders"), HaveField("Name", "events")))

		By("checking the volume on the host")
		vol.expectClean(ctx)
	})

	It("shows the sample policy's run with kubectl vacuum status and explain, and prints its runner pod's log with kubectl vacuum logs", func(ctx SpecContext) {
		name := runOfPolicy(ctx, ns, "orders-lazy")
		code, out, errOut := kubectlVacuum(ctx, ns, "logs", name)
		Expect(code).To(Equal(kubectlvacuum.ExitOK), "stderr: %s", errOut)
		Expect(out).To(ContainSubstring("vacuum-runner run: exit 0: "), "the runner's last log line, read through pods/log")
		code, out, errOut = kubectlVacuum(ctx, ns, "status", "orders-lazy")
		Expect(code).To(Equal(kubectlvacuum.ExitOK), "stderr: %s", errOut)
		Expect(out).To(MatchRegexp(`(?m)^` + name + `\s+orders-lazy\s+Succeeded\s+Succeeded\s`))
		code, out, errOut = kubectlVacuum(ctx, ns, "explain", name)
		Expect(code).To(Equal(kubectlvacuum.ExitOK), "stderr: %s", errOut)
		Expect(out).To(ContainSubstring("the runner's last exit code was 0"))
	})

	It("polls /progress over the pod network, runs the container non-root, read-only and without capabilities, and retries a runner pod deleted mid-run", func(ctx SpecContext) {
		vol := makeVolume(ctx, ns, "slow-data", bloat{table: "big", rows: 30000, deadFraction: "0.5"})
		fsGroup := int64(runnerUID)
		policy := &vacuumv1alpha1.VacuumPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"},
			Spec: vacuumv1alpha1.VacuumPolicySpec{VacuumSpec: vacuumv1alpha1.VacuumSpec{
				Target:       vacuumv1alpha1.Target{PersistentVolumeClaim: "slow-data"},
				Mode:         vacuumv1alpha1.VacuumModeLazy,
				Throttle:     slowThrottle(),
				BackoffLimit: 3,
				// The user-chosen fsGroup: the kubelet hands the volume and the token to it.
				Runner: vacuumv1alpha1.RunnerSpec{PodSecurityContext: &vacuumv1alpha1.RunnerPodSecurityContext{FSGroup: &fsGroup}},
			}},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		runName := runOfPolicy(ctx, ns, "slow")

		By("waiting for the runner to work, polling /progress from the host over the pod network")
		first := runningPod(ctx, ns, runName, "")
		By("dialing the control port: HTTPS with the run's pinned certificate, nothing else")
		Eventually(func(g Gomega) {
			_, err := getProgress(ctx, first)
			g.Expect(err).NotTo(HaveOccurred())
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
		other, err := runnerwire.RunCertificate("not this run's token")
		Expect(err).NotTo(HaveOccurred())
		_, err = runnerwire.FetchProgress(ctx, runnerwire.PinnedClient(other.DER, 5*time.Second), first.Status.PodIP)
		Expect(err).To(MatchError(ContainSubstring(runnerwire.ErrCertificateMismatch.Error())),
			"a client pinned to another certificate must be refused")
		if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(
			"http://" + net.JoinHostPort(first.Status.PodIP, strconv.Itoa(runnerwire.ControlPort)) + "/progress"); err == nil {
			_ = resp.Body.Close()
			Expect(resp.StatusCode).NotTo(Equal(http.StatusOK), "the control port answered plain HTTP")
		}
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(runnerwire.MetricsURL(first.Status.PodIP))
		Expect(err).NotTo(HaveOccurred(), "plain /metrics on the metrics port")
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Eventually(func(g Gomega) {
			p, err := getProgress(ctx, first)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(runnerwire.Phases()).To(ContainElement(p.Phase))
			g.Expect(p.TablesTotal).To(Equal(int64(1)))
			g.Expect(p.PagesScanned).To(BeNumerically(">", 0))
		}).WithContext(ctx).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
		Eventually(func(g Gomega) {
			run := getRun(ctx, ns, runName)
			g.Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunRunning))
			g.Expect(run.Status.VacuumPhase).NotTo(BeEmpty(), "the operator has not folded /progress into status")
			g.Expect(run.Status.Table).To(Equal("big"))
			g.Expect(run.Status.PagesPerSecond).To(BeNumerically(">", 0), "no rate from /progress in status")
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())

		By("asserting the container's security from the pod's status and from /proc on the host")
		cs := first.Status.ContainerStatuses[0]
		Expect(cs.State.Running).NotTo(BeNil())
		// status.containerStatuses[].user is filled only by runtimes that report it (containerd
		// 1.6 does not); the UID is then asserted from /proc below.
		if cs.User != nil && cs.User.Linux != nil {
			Expect(cs.User.Linux.UID).To(Equal(int64(runnerUID)))
		} else {
			GinkgoWriter.Printf("the runtime does not report containerStatuses[].user\n")
		}
		sc := first.Spec.Containers[0].SecurityContext
		Expect(sc).NotTo(BeNil())
		Expect(sc.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(sc.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(sc.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		Expect(sc.Capabilities.Drop).To(ContainElement(corev1.Capability("ALL")))
		p := containerProcess(ctx, first, cs.Name)
		GinkgoWriter.Printf("runner process on the host: %s\n", p)
		Expect(p.exe).To(Equal("/vacuum-runner"))
		Expect(p.status["Uid"]).To(Equal(fmt.Sprintf("%[1]d %[1]d %[1]d %[1]d", runnerUID)), "real, effective, saved and fs UID")
		Expect(p.status["Gid"]).To(Equal(fmt.Sprintf("%[1]d %[1]d %[1]d %[1]d", runnerUID)))
		for _, set := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			Expect(p.status[set]).To(Equal("0000000000000000"), "%s must be empty", set)
		}
		Expect(p.status["NoNewPrivs"]).To(Equal("1"))
		Expect(p.status["Seccomp"]).To(Equal("2"), "seccomp filter mode (RuntimeDefault)")
		Expect(p.rootRO).To(BeTrue(), "the container's root filesystem must be mounted read-only")

		By("deleting the runner pod mid-run")
		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		second := runningPod(ctx, ns, runName, first.Name)
		Expect(getRun(ctx, ns, runName).Status.Attempts).To(BeNumerically(">=", 2))

		By("lifting the throttle of the running retry so it finishes")
		patch := []byte(`{"spec":{"throttle":{"costDelay":"0s"}}}`)
		Expect(k8sClient.Patch(ctx, &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: runName}},
			client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		w := watchRun(ctx, ns, runName, vacuumv1alpha1.RunSucceeded, 5*time.Minute)
		Expect(w.run.Status.FailedAttempts).To(BeNumerically(">=", 1))
		Expect(w.run.Status.PodName).To(Equal(second.Name))
		lifted := HaveField("CostDelay", HaveValue(Equal(metav1.Duration{})))
		Expect(w.run.Spec.Throttle).To(lifted, "the patched spec.throttle was reverted")
		Expect(w.run.Status.AppliedThrottle).To(HaveValue(lifted), "the lifted throttle was never pushed to the pod")
		vol.expectClean(ctx)
	})

	It("stops and removes a run's pod when the VacuumRun is deleted", func(ctx SpecContext) {
		run := slowLazyRun(ns, "gc-me")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		pod := runningPod(ctx, ns, run.Name, "")
		Expect(pod.OwnerReferences).To(ContainElement(And(
			HaveField("UID", run.UID), HaveField("Controller", HaveValue(BeTrue())))))

		Expect(k8sClient.Delete(ctx, run)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))
		}).WithContext(ctx).WithTimeout(90*time.Second).Should(BeTrue(), "the run's pod outlived it")
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), &vacuumv1alpha1.VacuumRun{}))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeTrue())
	})

	// The operator's finalizer deletes a run's pods itself; only with the operator stopped and the
	// finalizer gone is it Kubernetes' garbage collector, following owner references, that does.
	It("garbage-collects a run's pod and token Secret through owner references, with the operator stopped", func(ctx SpecContext) {
		run := slowLazyRun(ns, "gc-orphan")
		Expect(k8sClient.Create(ctx, run)).To(Succeed())
		pod := runningPod(ctx, ns, run.Name, "")
		owned := ContainElement(And(HaveField("UID", run.UID), HaveField("Controller", HaveValue(BeTrue()))))
		Expect(pod.OwnerReferences).To(owned)
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: e2eutil.TokenSecretName(pod)}, secret)).To(Succeed())
		Expect(secret.OwnerReferences).To(owned)

		By("stopping the operator")
		scaleOperator(ctx, 0)
		DeferCleanup(scaleOperator, int32(1))

		By("deleting the run without its finalizer")
		Expect(k8sClient.Patch(ctx, &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: run.Name}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
		Expect(k8sClient.Delete(ctx, run)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(run), &vacuumv1alpha1.VacuumRun{}))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(BeTrue())
		start := time.Now()
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})) &&
				apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{}))
		}).WithContext(ctx).WithTimeout(90*time.Second).Should(BeTrue(), "the run's pod or token Secret outlived it")
		GinkgoWriter.Printf("pod and Secret garbage-collected %s after their owner was gone\n", time.Since(start).Round(100*time.Millisecond))
	})
})

// scaleOperator sets the manager Deployment's replicas and waits until that many manager pods
// exist and, when more than zero, the Deployment is available.
func scaleOperator(ctx context.Context, replicas int32) {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: operatorNS, Name: operatorDeploy}, d)).To(Succeed())
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	Expect(k8sClient.Patch(ctx, d, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	Expect(d.Spec.Selector).NotTo(BeNil())
	Eventually(func(g Gomega) {
		pods := &corev1.PodList{}
		g.Expect(k8sClient.List(ctx, pods, client.InNamespace(operatorNS),
			client.MatchingLabels(d.Spec.Selector.MatchLabels))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(int(replicas)))
	}).WithContext(ctx).WithTimeout(2*time.Minute).Should(Succeed(), "manager pods never became %d", replicas)
	if replicas > 0 {
		env.kubectlRun(ctx, nil, "-n", operatorNS, "rollout", "status", "deployment/"+operatorDeploy, "--timeout=180s")
	}
}

func getRun(ctx context.Context, ns, name string) *vacuumv1alpha1.VacuumRun {
	GinkgoHelper()
	run := &vacuumv1alpha1.VacuumRun{}
	Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, run)).To(Succeed())
	return run
}

// runOfPolicy waits for the policy's first run and returns its name.
func runOfPolicy(ctx context.Context, ns, policy string) string {
	GinkgoHelper()
	var name string
	Eventually(func(g Gomega) {
		runs := &vacuumv1alpha1.VacuumRunList{}
		g.Expect(k8sClient.List(ctx, runs, client.InNamespace(ns),
			client.MatchingLabels{vacuumv1alpha1.LabelPolicy: policy})).To(Succeed())
		g.Expect(runs.Items).NotTo(BeEmpty())
		name = runs.Items[0].Name
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed(), "policy %s made no run", policy)
	return name
}

// runningPod waits until the run's current pod (other than notName) is Running with an IP.
func runningPod(ctx context.Context, ns, runName, notName string) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{}
	Eventually(func(g Gomega) {
		run := getRun(ctx, ns, runName)
		g.Expect(run.Status.PodName).NotTo(BeEmpty())
		g.Expect(run.Status.PodName).NotTo(Equal(notName))
		g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: run.Status.PodName}, pod)).To(Succeed())
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
		g.Expect(pod.Status.PodIP).NotTo(BeEmpty())
	}).WithContext(ctx).WithTimeout(2*time.Minute).WithPolling(500*time.Millisecond).Should(Succeed(),
		"run %s has no running pod", runName)
	return pod
}

// runWatch is what watchRun saw.
type runWatch struct {
	run                 *vacuumv1alpha1.VacuumRun
	summary             *runnerwire.Summary // the runner's termination message
	sawProgressInStatus bool                // the run was Running with a vacuum phase in status
	hostPolls           int                 // successful GET /progress from the host
}

// watchRun polls a run until it reaches phase, polling its pod's /progress from the host and
// keeping the pod's termination message when it appears.
func watchRun(ctx context.Context, ns, name string, phase vacuumv1alpha1.RunPhase, timeout time.Duration) runWatch {
	GinkgoHelper()
	var w runWatch
	Eventually(func(g Gomega) {
		w.run = getRun(ctx, ns, name)
		st := w.run.Status
		if st.Phase == vacuumv1alpha1.RunRunning && st.VacuumPhase != "" {
			w.sawProgressInStatus = true
		}
		if st.PodName != "" {
			pod := &corev1.Pod{}
			if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: st.PodName}, pod); err == nil {
				if pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
					if _, err := getProgress(ctx, pod); err == nil {
						w.hostPolls++
					}
				}
				for _, cs := range pod.Status.ContainerStatuses {
					if t := cs.State.Terminated; t != nil && t.Message != "" {
						s := &runnerwire.Summary{}
						g.Expect(json.Unmarshal([]byte(t.Message), s)).To(Succeed(), "termination message %q", t.Message)
						w.summary = s
					}
				}
			}
		}
		for _, other := range terminalOtherThan(phase) {
			if st.Phase == other {
				StopTrying(fmt.Sprintf("run %s ended %s, not %s: %s", name, st.Phase, phase, st.Message)).Now()
			}
		}
		g.Expect(st.Phase).To(Equal(phase))
	}).WithContext(ctx).WithTimeout(timeout).WithPolling(250 * time.Millisecond).Should(Succeed())
	return w
}

func terminalOtherThan(p vacuumv1alpha1.RunPhase) []vacuumv1alpha1.RunPhase {
	var out []vacuumv1alpha1.RunPhase
	for _, t := range []vacuumv1alpha1.RunPhase{vacuumv1alpha1.RunSucceeded, vacuumv1alpha1.RunFailed, vacuumv1alpha1.RunCancelled} {
		if t != p {
			out = append(out, t)
		}
	}
	return out
}

// getProgress is GET /progress on a runner pod, from the host, over the pod network, over
// HTTPS pinned to the run's certificate (e2eutil.Progress, as the other suites read it).
func getProgress(ctx context.Context, pod *corev1.Pod) (runnerwire.Progress, error) {
	return e2eutil.Progress(ctx, k8sClient, pod, 2*time.Second)
}

// kubectlVacuum runs the kubectl plugin in-process against the real cluster, in namespace ns.
func kubectlVacuum(ctx context.Context, ns string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: bytes.NewReader(nil), Out: &out, ErrOut: &errOut}
	code := kubectlvacuum.Main(ctx, append(args, "--kubeconfig", env.kubeconfig, "-n", ns), streams)
	return code, out.String(), errOut.String()
}
