package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// conditionStatuses maps each condition type of conds to its status.
func conditionStatuses(conds []metav1.Condition) map[string]metav1.ConditionStatus {
	m := map[string]metav1.ConditionStatus{}
	for _, c := range conds {
		m[c.Type] = c.Status
	}
	return m
}

var _ = Describe("A run's outcome", func() {
	var (
		ns    string
		clock *clocktesting.FakeClock
		r     *RunReconciler
		rec   *recorder
	)
	BeforeEach(func() { ns, clock, r, rec = runSpecStart() })

	It("ends Cancelled=True alone, then deletes the hand-made run ttlSecondsAfterFinished after its end, not before", func() {
		newRun(ns, "ttl", "data", func(run *vacuumv1alpha1.VacuumRun) { run.Spec.TTLSecondsAfterFinished = ptr.To(int32(600)) })
		pod := reconcileUntilPod(r, ns, "ttl", 1)
		setPodRunning(pod, freshIP())
		reconcileRun(r, ns, "ttl")
		run := getRun(ns, "ttl")
		run.Spec.Cancel = true
		Expect(k8sClient.Update(suiteCtx, run)).To(Succeed())
		reconcileRun(r, ns, "ttl")
		reconcileRun(r, ns, "ttl")
		run = getRun(ns, "ttl")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunCancelled))
		Expect(conditionStatuses(run.Status.Conditions)).To(Equal(map[string]metav1.ConditionStatus{
			vacuumv1alpha1.ConditionProgressing: metav1.ConditionFalse,
			vacuumv1alpha1.ConditionComplete:    metav1.ConditionFalse,
			vacuumv1alpha1.ConditionFailed:      metav1.ConditionFalse,
			vacuumv1alpha1.ConditionCancelled:   metav1.ConditionTrue,
			vacuumv1alpha1.ConditionInterrupted: metav1.ConditionFalse,
		}))

		By("waiting out the TTL, which may be shortened after the end")
		res := reconcileRun(r, ns, "ttl")
		Expect(res.RequeueAfter).To(BeNumerically("~", 600*time.Second, 2*time.Second))
		run = getRun(ns, "ttl")
		run.Spec.TTLSecondsAfterFinished = ptr.To(int32(30))
		Expect(k8sClient.Update(suiteCtx, run)).To(Succeed(), "ttlSecondsAfterFinished is mutable")
		clock.Step(20 * time.Second)
		res = reconcileRun(r, ns, "ttl")
		Expect(res.RequeueAfter).To(BeNumerically("~", 10*time.Second, 2*time.Second))
		Expect(getRun(ns, "ttl").DeletionTimestamp).To(BeNil())

		By("deleting it once the TTL has passed, through its finalizer")
		clock.Step(12 * time.Second)
		reconcileRun(r, ns, "ttl")
		reconcileRun(r, ns, "ttl")
		err := k8sClient.Get(suiteCtx, key(ns, "ttl"), &vacuumv1alpha1.VacuumRun{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "run still there: %v", err)
		Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonTTLExpired))
	})
})

var _ = Describe("A policy's view of its runs", func() {
	var (
		ns    string
		clock *clocktesting.FakeClock
		r     *PolicyReconciler
		rec   *recorder
	)
	BeforeEach(func() { ns, clock, r, rec = policySpecStart() })

	It("emits one RunSkipped event per waiting tick, not one per reconcile", func() {
		p := newPolicy(ns, "skips", func(p *vacuumv1alpha1.VacuumPolicy) { p.Spec.Schedule = "* * * * *" })
		clock.SetTime(p.CreationTimestamp.Add(2 * time.Minute))
		reconcilePolicy(r, ns, "skips")
		Expect(runNames(ns)).To(HaveLen(1))
		skipped := func() int {
			n := 0
			for _, reason := range rec.reasons() {
				if reason == vacuumv1alpha1.ReasonRunSkipped {
					n++
				}
			}
			return n
		}
		for tick := 1; tick <= 2; tick++ {
			clock.Step(time.Minute)
			for range 3 { // the active run's status changes wake the policy this often
				reconcilePolicy(r, ns, "skips")
			}
			Expect(skipped()).To(Equal(tick), "RunSkipped events after %d waiting ticks", tick)
			last := getPolicy(ns, "skips").Status.LastSkippedTime
			Expect(last).NotTo(BeNil())
			Expect(last.Time).To(BeTemporally("==", clock.Now().Truncate(time.Minute)))
		}
		Expect(runNames(ns)).To(HaveLen(1))

		By("reporting a waiting run-now request once per value of the annotation, too")
		for i, value := range []string{"first", "second"} {
			p := getPolicy(ns, "skips")
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[vacuumv1alpha1.AnnotationRunNow] = value
			Expect(k8sClient.Update(suiteCtx, p)).To(Succeed())
			for range 3 {
				reconcilePolicy(r, ns, "skips")
			}
			Expect(skipped()).To(Equal(3+i), "RunSkipped events after run-now request %q waited", value)
			Expect(getPolicy(ns, "skips").Status.RunNowSkipped).To(Equal(value))
		}
		Expect(runNames(ns)).To(HaveLen(1))
	})

	It("is not rewritten by its active run's live rate, and says in LastRunSucceeded how the run ended", func() {
		newPolicy(ns, "quiet", nil)
		reconcilePolicy(r, ns, "quiet")
		reconcilePolicy(r, ns, "quiet")
		c := meta.FindStatusCondition(getPolicy(ns, "quiet").Status.Conditions, vacuumv1alpha1.ConditionLastRunSucceeded)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(Equal(metav1.ConditionUnknown))

		By("moving the run's live figures, as each progress interval does")
		var before string
		for i, rate := range []int64{1200, 1350, 990} {
			run := getRun(ns, "quiet-once")
			base := run.DeepCopy()
			run.Status.MarkRunning(run.Generation, "vacuuming table "+string(rune('a'+i)))
			run.Status.SetRates(rate, rate*8192, rate*4096, rate*100)
			run.Status.SetPercent(int32(10 * (i + 1)))
			Expect(k8sClient.Status().Patch(suiteCtx, run, clientMergeFrom(base))).To(Succeed())
			reconcilePolicy(r, ns, "quiet")
			if i == 0 { // Pending to Running is news for the policy; the rates after it are not
				before = getPolicy(ns, "quiet").ResourceVersion
			}
		}
		p := getPolicy(ns, "quiet")
		Expect(p.ResourceVersion).To(Equal(before), "the policy's status was rewritten: %+v", p.Status.LastRun)
		Expect(p.Status.LastRun.Phase).To(Equal(vacuumv1alpha1.RunRunning))

		By("summing the run up once it has ended")
		endRun(ns, "quiet-once", vacuumv1alpha1.RunFailed, vacuumv1alpha1.ReasonDeadlineExceeded, clock.Now())
		reconcilePolicy(r, ns, "quiet")
		p = getPolicy(ns, "quiet")
		Expect(p.Status.LastRun.PagesPerSecond).To(BeEquivalentTo(990))
		c = meta.FindStatusCondition(p.Status.Conditions, vacuumv1alpha1.ConditionLastRunSucceeded)
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Reason).To(Equal(vacuumv1alpha1.ReasonDeadlineExceeded))
		Expect(c.Message).To(ContainSubstring("quiet-once"))
	})
})
