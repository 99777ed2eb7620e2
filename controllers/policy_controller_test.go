package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

func newPolicy(ns, name string, edit func(*vacuumv1alpha1.VacuumPolicy)) *vacuumv1alpha1.VacuumPolicy {
	p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	p.Spec.Target.PersistentVolumeClaim = "data"
	p.Spec.BackoffLimit = 2
	if edit != nil {
		edit(p)
	}
	ensureClaim(ns, p.Spec.Target.PersistentVolumeClaim)
	Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
	return getPolicy(ns, name)
}

func getPolicy(ns, name string) *vacuumv1alpha1.VacuumPolicy {
	var p vacuumv1alpha1.VacuumPolicy
	Expect(k8sClient.Get(suiteCtx, key(ns, name), &p)).To(Succeed())
	return &p
}

func runNames(ns string) []string {
	var list vacuumv1alpha1.VacuumRunList
	Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns))).To(Succeed())
	var names []string
	for _, r := range list.Items {
		names = append(names, r.Name)
	}
	return names
}

// endRun plays the run controller: the run ends in phase (with reason for Failed).
// giveRunPodAndSecret plays an earlier run controller: the run gets a pod it controls and a
// recorded token Secret; beside them a pod carrying its label and a Secret named as the
// token Secret used to be are someone else's.
func giveRunPodAndSecret(ns, name string) {
	run := getRun(ns, name)
	own := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-own-token"}}
	Expect(k8sClient.Create(suiteCtx, own)).To(Succeed())
	Expect(k8sClient.Create(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-token"}})).To(Succeed())
	pod := testPod(ns, name+"-1", map[string]string{vacuumv1alpha1.LabelRun: name})
	Expect(controllerutil.SetControllerReference(run, pod, scheme)).To(Succeed())
	Expect(k8sClient.Create(suiteCtx, pod)).To(Succeed())
	Expect(k8sClient.Create(suiteCtx, testPod(ns, name+"-stranger", map[string]string{vacuumv1alpha1.LabelRun: name}))).To(Succeed())
	base := run.DeepCopy()
	run.Status.TokenSecret = &vacuumv1alpha1.OwnedObject{Name: own.Name, UID: own.UID}
	Expect(k8sClient.Status().Patch(suiteCtx, run, clientMergeFrom(base))).To(Succeed())
}

func endRun(ns, name string, phase vacuumv1alpha1.RunPhase, reason string, at time.Time) {
	run := getRun(ns, name)
	base := run.DeepCopy()
	now := metav1.NewTime(at)
	switch phase {
	case vacuumv1alpha1.RunSucceeded:
		run.Status.MarkSucceeded(run.Generation, now, "done")
	case vacuumv1alpha1.RunFailed:
		run.Status.MarkFailed(run.Generation, now, reason, "failed")
	default:
		run.Status.MarkCancelled(run.Generation, now, "cancelled")
	}
	Expect(k8sClient.Status().Patch(suiteCtx, run, clientMergeFrom(base))).To(Succeed())
}

var _ = Describe("VacuumPolicy controller", func() {
	var (
		ns    string
		clock *clocktesting.FakeClock
		r     *PolicyReconciler
		rec   *recorder
	)
	BeforeEach(func() { ns, clock, r, rec = policySpecStart() })

	It("makes one run named <policy>-once for a policy without schedule, and never recreates it", func() {
		newPolicy(ns, "once", nil)
		reconcilePolicy(r, ns, "once")
		Expect(runNames(ns)).To(ConsistOf("once-once"))
		run := getRun(ns, "once-once")
		Expect(run.Spec.PolicyName).To(Equal("once"))
		Expect(metav1.IsControlledBy(run, getPolicy(ns, "once"))).To(BeTrue())

		Expect(k8sClient.Delete(suiteCtx, run)).To(Succeed())
		removeFinalizers(ns, "once-once")
		reconcilePolicy(r, ns, "once")
		Expect(runNames(ns)).To(BeEmpty())
		p := getPolicy(ns, "once")
		Expect(p.Status.IsReady()).To(BeTrue())
		Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
	})

	It("starts only the most recent missed tick, warns about the others, and requeues for the next one", func() {
		p := newPolicy(ns, "hourly", func(p *vacuumv1alpha1.VacuumPolicy) { p.Spec.Schedule = "0 * * * *" })
		created := p.CreationTimestamp.Time
		clock.SetTime(created.Add(3*time.Hour + 10*time.Minute))
		res := reconcilePolicy(r, ns, "hourly")

		lastTick := clock.Now().Truncate(time.Hour)
		Expect(runNames(ns)).To(ConsistOf(scheduledRunName(p, lastTick)), "events %v, status %+v", rec.all(), getPolicy(ns, "hourly").Status)
		Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonMissedSchedules))
		Expect(res.RequeueAfter).To(BeNumerically("~", lastTick.Add(time.Hour).Sub(clock.Now()), 2*time.Second))
		p = getPolicy(ns, "hourly")
		Expect(p.Status.LastScheduleTime.Time).To(BeTemporally("==", lastTick))
		Expect(p.Status.NextScheduleTime.Time).To(BeTemporally("==", lastTick.Add(time.Hour)))
		Expect(p.Status.Active).To(ConsistOf(scheduledRunName(p, lastTick)))

		By("never duplicating the tick's run on a retry")
		reconcilePolicy(r, ns, "hourly")
		Expect(runNames(ns)).To(HaveLen(1))
	})

	It("skips a tick missed by more than startingDeadlineSeconds", func() {
		p := newPolicy(ns, "deadline", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Spec.Schedule, p.Spec.StartingDeadlineSeconds = "0 * * * *", ptr.To(int64(300))
		})
		tick := p.CreationTimestamp.Time.Truncate(time.Hour).Add(time.Hour)
		clock.SetTime(tick.Add(10 * time.Minute))
		reconcilePolicy(r, ns, "deadline")
		Expect(runNames(ns)).To(BeEmpty())
		clock.SetTime(tick.Add(time.Hour + time.Minute))
		reconcilePolicy(r, ns, "deadline")
		Expect(runNames(ns)).To(ConsistOf(scheduledRunName(p, tick.Add(time.Hour))))
	})

	It("starts nothing while suspended", func() {
		p := newPolicy(ns, "suspended", func(p *vacuumv1alpha1.VacuumPolicy) { p.Spec.Schedule, p.Spec.Suspend = "* * * * *", true })
		clock.SetTime(p.CreationTimestamp.Add(10 * time.Minute))
		reconcilePolicy(r, ns, "suspended")
		Expect(runNames(ns)).To(BeEmpty())
		Expect(conditionReason(getPolicy(ns, "suspended").Status.Conditions, vacuumv1alpha1.ConditionReady)).To(Equal(vacuumv1alpha1.ReasonSuspended))
	})

	It("with Forbid, lets a due tick wait while a run is active", func() {
		p := newPolicy(ns, "forbid", func(p *vacuumv1alpha1.VacuumPolicy) { p.Spec.Schedule = "* * * * *" })
		clock.SetTime(p.CreationTimestamp.Add(2 * time.Minute))
		reconcilePolicy(r, ns, "forbid")
		first := runNames(ns)
		Expect(first).To(HaveLen(1))
		clock.Step(time.Minute)
		reconcilePolicy(r, ns, "forbid")
		Expect(runNames(ns)).To(Equal(first))
		Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonRunSkipped))
		endRun(ns, first[0], vacuumv1alpha1.RunSucceeded, "", clock.Now())
		reconcilePolicy(r, ns, "forbid")
		Expect(runNames(ns)).To(HaveLen(2))
	})

	It("with Replace, cancels the active run and starts the new one", func() {
		p := newPolicy(ns, "replace", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Spec.Schedule, p.Spec.ConcurrencyPolicy = "* * * * *", vacuumv1alpha1.ReplaceConcurrent
		})
		clock.SetTime(p.CreationTimestamp.Add(2 * time.Minute))
		reconcilePolicy(r, ns, "replace")
		old := runNames(ns)[0]
		clock.Step(time.Minute)
		reconcilePolicy(r, ns, "replace")
		Expect(runNames(ns)).To(HaveLen(2))
		Expect(getRun(ns, old).Spec.Cancel).To(BeTrue())
		Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonRunReplaced))
	})

	It("keeps history within its limits, deleting old runs with their pods and Secrets, by the run's finalizer where it has one", func() {
		p := newPolicy(ns, "history", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Spec.Schedule, p.Spec.SuccessfulRunsHistoryLimit, p.Spec.FailedRunsHistoryLimit = "* * * * *", ptr.To(int32(1)), ptr.To(int32(1))
		})
		clock.SetTime(p.CreationTimestamp.Add(time.Minute))
		log := &requestLog{}
		r.Client = loggedClient(log)
		var made []string
		for i := range 4 {
			clock.Step(time.Minute)
			reconcilePolicy(r, ns, "history")
			names := runNames(ns)
			newest := names[len(names)-1]
			for _, n := range names {
				if !contains(made, n) {
					newest = n
				}
			}
			made = append(made, newest)
			// Each run has a pod and a token Secret that must go with it, and a pod and a
			// Secret of the same names' shape that are not its own and must stay.
			giveRunPodAndSecret(ns, newest)
			phase := vacuumv1alpha1.RunSucceeded
			if i%2 == 1 {
				phase = vacuumv1alpha1.RunFailed
			}
			endRun(ns, newest, phase, vacuumv1alpha1.ReasonBadInput, clock.Now())
			if i == 0 {
				removeFinalizers(ns, newest) // by hand: its policy deletes its pod and Secret itself
			}
		}
		reconcilePolicy(r, ns, "history")
		reqs := log.take()
		Expect(reqs).To(ContainElements("DELETE *v1.Pod", "DELETE *v1.Secret"))
		Expect(count(reqs, "DELETE *v1.Pod")).To(Equal(1), "the pod of the run without a finalizer only")
		Expect(count(reqs, "DELETE *v1.Secret")).To(Equal(1), "the Secret of the run without a finalizer only")
		Expect(count(reqs, "DELETE *v1alpha1.VacuumRun")).To(Equal(2))
		By("letting the run controller's finalizer delete the other run's pod and Secret")
		rr, _ := newRunReconciler(clock)
		Eventually(func() []string {
			reconcileRun(rr, ns, made[1])
			return runNames(ns)
		}).WithTimeout(20 * time.Second).Should(ConsistOf(made[2], made[3]))
		for _, n := range made[:2] {
			Expect(podsOf(ns, n)).To(ConsistOf(HaveField("Name", n+"-stranger")), "only the run's own pod is deleted")
			var s corev1.Secret
			Expect(k8sClient.Get(suiteCtx, key(ns, n+"-own-token"), &s)).NotTo(Succeed())
			Expect(k8sClient.Get(suiteCtx, key(ns, n+"-token"), &s)).To(Succeed(), "a Secret the run did not record is left")
		}
	})

	It("reports an invalid schedule as Ready=False, reason InvalidSchedule, with a warning event", func() {
		newPolicy(ns, "badcron", func(p *vacuumv1alpha1.VacuumPolicy) { p.Spec.Schedule = "61 25 * * *" })
		reconcilePolicy(r, ns, "badcron")
		p := getPolicy(ns, "badcron")
		c := meta.FindStatusCondition(p.Status.Conditions, vacuumv1alpha1.ConditionReady)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(c.Reason).To(Equal(vacuumv1alpha1.ReasonInvalidSchedule))
		Expect(c.ObservedGeneration).To(Equal(p.Generation))
		Expect(rec.all()).To(ContainElement(HavePrefix("Warning InvalidSchedule")))
		Expect(runNames(ns)).To(BeEmpty())
	})

	It("starts a run when the run-now annotation gets a new value, whatever the schedule", func() {
		newPolicy(ns, "manual", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Spec.Schedule = "0 3 1 1 *"
			p.Annotations = map[string]string{vacuumv1alpha1.AnnotationRunNow: "first"}
		})
		reconcilePolicy(r, ns, "manual")
		reconcilePolicy(r, ns, "manual")
		Expect(runNames(ns)).To(HaveLen(1))
		Expect(getPolicy(ns, "manual").Status.RunNowHandled).To(Equal("first"))
	})

	It("halts the schedule when a run finds corruption, until the user acknowledges it", func() {
		p := newPolicy(ns, "corrupt", func(p *vacuumv1alpha1.VacuumPolicy) { p.Spec.Schedule = "* * * * *" })
		clock.SetTime(p.CreationTimestamp.Add(2 * time.Minute))
		reconcilePolicy(r, ns, "corrupt")
		bad := runNames(ns)[0]
		endRun(ns, bad, vacuumv1alpha1.RunFailed, vacuumv1alpha1.ReasonCorruptionFound, clock.Now())
		clock.Step(5 * time.Minute)
		reconcilePolicy(r, ns, "corrupt")
		Expect(runNames(ns)).To(ConsistOf(bad))
		p = getPolicy(ns, "corrupt")
		Expect(p.Status.CorruptionRun).To(Equal(bad))
		Expect(meta.IsStatusConditionTrue(p.Status.Conditions, vacuumv1alpha1.ConditionDegraded)).To(BeTrue())
		Expect(conditionReason(p.Status.Conditions, vacuumv1alpha1.ConditionDegraded)).To(Equal(vacuumv1alpha1.ReasonCorruptionFound))
		Expect(rec.all()).To(ContainElement(HavePrefix("Warning CorruptionFound")))

		p.Annotations = map[string]string{vacuumv1alpha1.AnnotationCorruptionAcknowledged: bad}
		Expect(k8sClient.Update(suiteCtx, p)).To(Succeed())
		reconcilePolicy(r, ns, "corrupt")
		Expect(runNames(ns)).To(HaveLen(2))
		Expect(meta.IsStatusConditionTrue(getPolicy(ns, "corrupt").Status.Conditions, vacuumv1alpha1.ConditionDegraded)).To(BeFalse())
	})

	It("carries a throttle edit to its active runs", func() {
		newPolicy(ns, "throttle", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Spec.Throttle.MaxWALBytesPerSecond = quantity("10Mi")
		})
		reconcilePolicy(r, ns, "throttle")
		p := getPolicy(ns, "throttle")
		p.Spec.Throttle.CostDelay = &metav1.Duration{Duration: 30 * time.Millisecond}
		p.Spec.Throttle.MaxWALBytesPerSecond = nil
		Expect(k8sClient.Update(suiteCtx, p)).To(Succeed())
		reconcilePolicy(r, ns, "throttle")
		run := getRun(ns, "throttle-once")
		Expect(run.Spec.Throttle.CostDelay.Duration).To(Equal(30 * time.Millisecond))
		Expect(run.Spec.Throttle.MaxWALBytesPerSecond).To(BeNil())
	})
})

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// removeFinalizers plays the run controller's finalizer for runs a test deletes.
func removeFinalizers(ns, name string) {
	var run vacuumv1alpha1.VacuumRun
	if k8sClient.Get(suiteCtx, key(ns, name), &run) != nil {
		return
	}
	base := run.DeepCopy()
	run.Finalizers = nil
	Expect(client.IgnoreNotFound(k8sClient.Patch(suiteCtx, &run, clientMergeFrom(base)))).To(Succeed())
}

func testPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}

// count says how many times s occurs in list.
func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}
