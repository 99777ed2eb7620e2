package controllers

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Pod IPs of the fake runners: a range of loopback addresses of our own, one per test.
var nextIP atomic.Int32

// freshIP is the next of them: 127.x.77.y, x this process's (loopbackNet), so that two
// runs of the suite on one machine (two worktrees, say) do not bind the same address.
func freshIP() string { return fmt.Sprintf("127.%d.77.%d", loopbackNet, 10+nextIP.Add(1)) }

// loopbackNet is the second byte of this process's loopback addresses: 1 to 250, from its
// process id.
var loopbackNet = 1 + os.Getpid()%250

func conditionReason(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return c.Reason
	}
	return ""
}

var _ = Describe("VacuumRun controller", func() {
	var (
		ns    string
		clock *clocktesting.FakeClock
		r     *RunReconciler
		rec   *recorder
	)
	BeforeEach(func() { ns, clock, r, rec = runSpecStart() })

	It("runs one pod, folds its /progress into status, and ends Succeeded from its termination message", func() {
		newRun(ns, "happy", "data", nil)
		pod := reconcileUntilPod(r, ns, "happy", 1)

		By("making a restricted pod, owned by the run, with its token Secret and the volume's Lease")
		Expect(metav1.IsControlledBy(pod, getRun(ns, "happy"))).To(BeTrue())
		Expect(checkRunnerPodSecurity(pod)).To(Succeed())
		var secret corev1.Secret
		ref := getRun(ns, "happy").Status.TokenSecret
		Expect(ref).NotTo(BeNil())
		Expect(k8sClient.Get(suiteCtx, key(ns, ref.Name), &secret)).To(Succeed())
		Expect(secret.UID).To(Equal(ref.UID))
		Expect(metav1.IsControlledBy(&secret, getRun(ns, "happy"))).To(BeTrue())
		Expect(string(secret.Data["token"])).To(Equal(runToken(testKey, getRun(ns, "happy").UID)))
		var lease coordinationv1.Lease
		Expect(k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &lease)).To(Succeed())
		Expect(getRun(ns, "happy").Status.Phase).To(Equal(vacuumv1alpha1.RunPending))

		By("folding the runner's /progress while the pod runs")
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, "happy").UID))
		defer runner.Close()
		setPodRunning(pod, ip)
		res := reconcileRunAnswered(r, ns, "happy")
		Expect(res.RequeueAfter).To(Equal(DefaultProgressInterval))
		run := getRun(ns, "happy")
		progress := readGolden[runnerwire.Progress](GinkgoT(), "progress.json")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunRunning))
		Expect(run.Status.Table).To(Equal(progress.Table))
		Expect(run.Status.VacuumPhase).To(BeEquivalentTo(progress.Phase))
		Expect(run.Status.Progress).To(Equal("63%"))
		Expect(run.Status.PagesPerSecond).To(BeEquivalentTo(progress.PagesPerSecond))
		Expect(run.Status.ReadRate).To(Equal("12.5MiB/s"))
		Expect(run.Status.Totals.TuplesRemoved).To(Equal(progress.TuplesRemoved))
		Expect(run.Status.Tables).To(HaveLen(len(progress.Tables)))
		Expect(run.Status.StartTime).NotTo(BeNil())
		Expect(run.Status.ObservedGeneration).To(Equal(run.Generation))

		By("taking the final figures from the termination message")
		summary := goldenBytes("summary-succeeded.json")
		setPodTerminated(pod, 0, "Completed", string(summary))
		reconcileRun(r, ns, "happy")
		run = getRun(ns, "happy")
		var want runnerwire.Summary
		Expect(json.Unmarshal(summary, &want)).To(Succeed())
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(meta.IsStatusConditionTrue(run.Status.Conditions, vacuumv1alpha1.ConditionComplete)).To(BeTrue())
		Expect(run.Status.Totals.TuplesRemoved).To(Equal(want.Totals.TuplesRemoved))
		Expect(run.Status.Totals.PagesRemoved).To(Equal(want.Totals.PagesRemoved))
		Expect(run.Status.Message).To(Equal(want.Message))
		Expect(run.Status.CompletionTime).NotTo(BeNil())

		By("releasing the volume's Lease once it has ended")
		reconcileRun(r, ns, "happy")
		err := k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &lease)
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "lease still held: %v", err)
	})

	It("retries when its pod is deleted mid-run, then fails past backoffLimit", func() {
		newRun(ns, "flaky", "data", func(run *vacuumv1alpha1.VacuumRun) { run.Spec.BackoffLimit = 1 })
		pod := reconcileUntilPod(r, ns, "flaky", 1)
		setPodRunning(pod, freshIP())
		reconcileRun(r, ns, "flaky")
		Expect(k8sClient.Delete(suiteCtx, pod)).To(Succeed())

		pod2 := reconcileUntilPod(r, ns, "flaky", 2)
		run := getRun(ns, "flaky")
		Expect(run.Status.Attempts).To(BeEquivalentTo(2))
		Expect(run.Status.FailedAttempts).To(BeEquivalentTo(1))
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunPending))
		Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonAttemptFailed))

		Expect(k8sClient.Delete(suiteCtx, pod2)).To(Succeed())
		reconcileRun(r, ns, "flaky")
		run = getRun(ns, "flaky")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonBackoffLimitExceeded))
		Expect(podsOf(ns, "flaky")).To(BeEmpty())
	})

	DescribeTable("decides the outcome from the runner's exit code",
		func(code int32, reason string, wantPhase vacuumv1alpha1.RunPhase, wantReason string, wantAttempts int32) {
			newRun(ns, "exit", "data", func(run *vacuumv1alpha1.VacuumRun) { run.Spec.BackoffLimit = 2 })
			pod := reconcileUntilPod(r, ns, "exit", 1)
			setPodRunning(pod, freshIP())
			reconcileRun(r, ns, "exit")
			setPodTerminated(pod, code, reason, "")
			reconcileRun(r, ns, "exit")
			reconcileRun(r, ns, "exit")
			run := getRun(ns, "exit")
			Expect(run.Status.Phase).To(Equal(wantPhase))
			Expect(run.Status.Attempts).To(Equal(wantAttempts))
			cond := vacuumv1alpha1.ConditionFailed
			if wantPhase != vacuumv1alpha1.RunFailed {
				cond = vacuumv1alpha1.ConditionProgressing
			}
			Expect(conditionReason(run.Status.Conditions, cond)).To(Equal(wantReason))
			Expect(*run.Status.ExitCode).To(Equal(code))
		},
		Entry("0: Succeeded", int32(0), "Completed", vacuumv1alpha1.RunSucceeded, vacuumv1alpha1.ReasonSucceeded, int32(1)),
		Entry("1: a failed attempt, retried", int32(1), "Error", vacuumv1alpha1.RunPending, vacuumv1alpha1.ReasonPodPending, int32(2)),
		Entry("2: Failed, no retry", int32(2), "Error", vacuumv1alpha1.RunFailed, vacuumv1alpha1.ReasonBadInput, int32(1)),
		Entry("3: a failed attempt, retried", int32(3), "Error", vacuumv1alpha1.RunPending, vacuumv1alpha1.ReasonPodPending, int32(2)),
		Entry("4: Failed, no retry, corruption", int32(4), "Error", vacuumv1alpha1.RunFailed, vacuumv1alpha1.ReasonCorruptionFound, int32(1)),
		Entry("5 without cancel: a failed attempt", int32(5), "Error", vacuumv1alpha1.RunPending, vacuumv1alpha1.ReasonPodPending, int32(2)),
		Entry("6: Failed, no retry", int32(6), "Error", vacuumv1alpha1.RunFailed, vacuumv1alpha1.ReasonNoSpace, int32(1)),
		Entry("OOM: a failed attempt", int32(137), "OOMKilled", vacuumv1alpha1.RunPending, vacuumv1alpha1.ReasonPodPending, int32(2)),
	)

	It("keeps a second run on the same volume Pending with VolumeBusy, even with two managers racing", func() {
		newRun(ns, "first", "shared", nil)
		newRun(ns, "second", "shared", nil)
		other, _ := newRunReconciler(clock)
		other.Key = []byte("another-manager-key-0123456789abc")
		// Both managers add finalizers, then race for the volume.
		reconcileRun(r, ns, "first")
		reconcileRun(other, ns, "second")
		// Twice: the run holding the volume makes its token Secret, then its pod.
		for range 2 {
			var wg sync.WaitGroup
			for _, pair := range []struct {
				rr   *RunReconciler
				name string
			}{{r, "first"}, {other, "second"}, {other, "first"}, {r, "second"}} {
				wg.Add(1)
				go func() {
					defer GinkgoRecover()
					defer wg.Done()
					_, err := pair.rr.Reconcile(suiteCtx, reconcileRequest(ns, pair.name))
					Expect(err).NotTo(HaveOccurred())
				}()
			}
			wg.Wait()
		}
		first, second := getRun(ns, "first"), getRun(ns, "second")
		running := len(podsOf(ns, "first")) + len(podsOf(ns, "second"))
		Expect(running).To(Equal(1), "exactly one run may have a pod on the volume")
		busy := first
		if len(podsOf(ns, "first")) == 1 {
			busy = second
		}
		Expect(busy.Status.Phase).To(Equal(vacuumv1alpha1.RunPending))
		Expect(conditionReason(busy.Status.Conditions, vacuumv1alpha1.ConditionProgressing)).To(Equal(vacuumv1alpha1.ReasonVolumeBusy))
		Expect(len(podsOf(ns, busy.Name))).To(BeZero())
	})

	It("pushes a changed throttle to the running pod with the run's token", func() {
		newRun(ns, "rethrottle", "data", nil)
		pod := reconcileUntilPod(r, ns, "rethrottle", 1)
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, "rethrottle").UID))
		defer runner.Close()
		setPodRunning(pod, ip)
		reconcileRun(r, ns, "rethrottle")
		Expect(runner.throttles).To(BeEmpty(), "an unchanged throttle is not pushed")

		run := getRun(ns, "rethrottle")
		run.Spec.Throttle.CostDelay = &metav1.Duration{Duration: 20 * time.Millisecond}
		run.Spec.Throttle.MaxReadBytesPerSecond = quantity("10Mi")
		Expect(k8sClient.Update(suiteCtx, run)).To(Succeed())
		reconcileRunAnswered(r, ns, "rethrottle")

		var got runnerwire.Throttle
		Eventually(runner.throttles).WithTimeout(10 * time.Second).Should(Receive(&got))
		Expect(got.CostDelay.Duration).To(Equal(20 * time.Millisecond))
		Expect(got.MaxReadBytesPerSecond.String()).To(Equal("10Mi"))
		Expect(*got.CostLimit).To(BeEquivalentTo(200))
		Expect(runner.refused.Load()).To(BeZero())
		Expect(getRun(ns, "rethrottle").Status.AppliedThrottle.CostDelay.Duration).To(Equal(20 * time.Millisecond))
		Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonThrottleApplied))
		for _, e := range rec.all() {
			Expect(e).NotTo(ContainSubstring(runner.token), "the token must not appear in events")
		}
	})

	It("stops the pod and ends Cancelled when spec.cancel is set", func() {
		newRun(ns, "cancelme", "data", nil)
		pod := reconcileUntilPod(r, ns, "cancelme", 1)
		setPodRunning(pod, freshIP())
		reconcileRun(r, ns, "cancelme")
		run := getRun(ns, "cancelme")
		run.Spec.Cancel = true
		Expect(k8sClient.Update(suiteCtx, run)).To(Succeed())
		reconcileRun(r, ns, "cancelme")
		reconcileRun(r, ns, "cancelme")
		run = getRun(ns, "cancelme")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunCancelled))
		Expect(podsOf(ns, "cancelme")).To(BeEmpty())
	})

	It("ends Cancelled with the runner's summary when a cancelled runner exits 5", func() {
		newRun(ns, "sigterm", "data", nil)
		pod := reconcileUntilPod(r, ns, "sigterm", 1)
		setPodRunning(pod, freshIP())
		reconcileRun(r, ns, "sigterm")
		run := getRun(ns, "sigterm")
		run.Spec.Cancel = true
		Expect(k8sClient.Update(suiteCtx, run)).To(Succeed())
		setPodTerminated(pod, 5, "Error", string(goldenBytes("summary-cancelled.json")))
		reconcileRun(r, ns, "sigterm")
		run = getRun(ns, "sigterm")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunCancelled))
		Expect(run.Status.Message).To(Equal("cancelled by SIGTERM"))
		Expect(run.Status.Totals).NotTo(BeNil())
	})

	It("makes no second pod when a restarted manager reconciles a run mid-attempt", func() {
		newRun(ns, "restart", "data", nil)
		reconcileUntilPod(r, ns, "restart", 1)
		// The old manager died after creating the pod, before recording the attempt.
		run := getRun(ns, "restart")
		base := run.DeepCopy()
		run.Status.Attempts, run.Status.PodName = 0, ""
		Expect(k8sClient.Status().Patch(suiteCtx, run, clientMergeFrom(base))).To(Succeed())

		restarted, _ := newRunReconciler(clock)
		reconcileRun(restarted, ns, "restart")
		reconcileRun(restarted, ns, "restart")
		Expect(podsOf(ns, "restart")).To(HaveLen(1))
		Expect(getRun(ns, "restart").Status.Attempts).To(BeEquivalentTo(1))
	})

	It("fails the run with DeadlineExceeded once activeDeadlineSeconds has passed", func() {
		newRun(ns, "slow", "data", func(run *vacuumv1alpha1.VacuumRun) { run.Spec.ActiveDeadlineSeconds = ptr.To(int64(60)) })
		pod := reconcileUntilPod(r, ns, "slow", 1)
		setPodRunning(pod, freshIP())
		res := reconcileRunAnswered(r, ns, "slow") // the start is recorded with the first poll's outcome
		Expect(res.RequeueAfter).To(BeNumerically("<=", DefaultProgressInterval))
		Expect(getRun(ns, "slow").Status.StartTime).NotTo(BeNil())
		clock.Step(61 * time.Second)
		reconcileRun(r, ns, "slow")
		reconcileRun(r, ns, "slow")
		run := getRun(ns, "slow")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonDeadlineExceeded))
		Expect(podsOf(ns, "slow")).To(BeEmpty())
	})

	It("cleans up when the run is deleted: pod stopped, Lease released, token Secret deleted", func() {
		newRun(ns, "doomed", "data", nil)
		pod := reconcileUntilPod(r, ns, "doomed", 1)
		secretName := getRun(ns, "doomed").Status.TokenSecret.Name
		setPodRunning(pod, freshIP())
		reconcileRun(r, ns, "doomed")
		Expect(k8sClient.Delete(suiteCtx, getRun(ns, "doomed"))).To(Succeed())
		reconcileRun(r, ns, "doomed")
		reconcileRun(r, ns, "doomed")
		var run vacuumv1alpha1.VacuumRun
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, "doomed"), &run))).To(BeTrue())
		Expect(podsOf(ns, "doomed")).To(BeEmpty())
		var s corev1.Secret
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, secretName), &s))).To(BeTrue())
		var l coordinationv1.Lease
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &l))).To(BeTrue())
	})
})

var _ = Describe("Manager key", func() {
	It("is created on first start and read back afterwards", func() {
		ns := newNamespace()
		k1, err := EnsureManagerKey(suiteCtx, k8sClient, k8sClient, ns, DefaultKeySecretName)
		Expect(err).NotTo(HaveOccurred())
		k2, err := EnsureManagerKey(suiteCtx, k8sClient, k8sClient, ns, DefaultKeySecretName)
		Expect(err).NotTo(HaveOccurred())
		Expect(k1).To(HaveLen(32))
		Expect(k2).To(Equal(k1))
	})
})
