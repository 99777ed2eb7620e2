package controllers

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Maintenance windows and pause, with a fake clock: the tests play the work queue, the
// kubelet (pod status) and the runner (its termination message, PUT /pause).

// runSpecOf decodes the RunSpec a run's pod was given into a map, window keys included.
func runSpecOf(ns, pod string) map[string]any {
	var rs map[string]any
	Expect(json.Unmarshal([]byte(getPod(ns, pod).Annotations[vacuumv1alpha1.AnnotationRunSpec]), &rs)).To(Succeed())
	return rs
}

// onlyRun returns the one run of the namespace made after those listed in before.
func newRunName(ns string, before []string) string {
	var fresh []string
	for _, n := range runNames(ns) {
		if !containsString(before, n) {
			fresh = append(fresh, n)
		}
	}
	ExpectWithOffset(1, fresh).To(HaveLen(1), "runs %v, before %v", runNames(ns), before)
	return fresh[0]
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func patchRunSpec(ns, name, specJSON string) {
	run := &vacuumv1alpha1.VacuumRun{}
	run.Namespace, run.Name = ns, name
	Expect(k8sClient.Patch(suiteCtx, run, client.RawPatch(types.MergePatchType, []byte(`{"spec":`+specJSON+`}`)))).To(Succeed())
}

var _ = Describe("Maintenance windows", func() {
	var (
		ns     string
		clock  *clocktesting.FakeClock
		pr     *PolicyReconciler
		rr     *RunReconciler
		prec   *recorder
		dayOne time.Time // 00:00 UTC of a day after the policies are made
	)
	BeforeEach(func() {
		ns = newNamespace()
		dayOne = time.Now().UTC().Truncate(24 * time.Hour).Add(48 * time.Hour)
		clock = clocktesting.NewFakeClock(dayOne)
		pr, prec = newPolicyReconciler(clock)
		rr, _ = newRunReconciler(clock)
	})

	nightly := func(p *vacuumv1alpha1.VacuumPolicy) {
		p.Spec.Window = &vacuumv1alpha1.Window{Schedule: "0 2 * * *", DurationSeconds: 3600, StopGracePeriodSeconds: ptr.To[int64](30)}
	}

	It("starts a run when the window opens, stops it at the window's end, and resumes it in the next window", func() {
		newPolicy(ns, "nightly", nightly)
		clock.SetTime(dayOne.Add(90 * time.Minute))
		res := reconcilePolicy(pr, ns, "nightly")
		Expect(runNames(ns)).To(BeEmpty(), "no run before the window opens")
		Expect(getPolicy(ns, "nightly").Status.NextScheduleTime.Time).To(BeTemporally("==", dayOne.Add(2*time.Hour)))
		Expect(res.RequeueAfter).To(BeNumerically("~", 30*time.Minute, 2*time.Second))

		By("the window opens: a run with the window's end, not resuming")
		clock.SetTime(dayOne.Add(2*time.Hour + 5*time.Second))
		reconcilePolicy(pr, ns, "nightly")
		first := newRunName(ns, nil)
		run := getRun(ns, first)
		Expect(run.Spec.Window.StopAt.Time).To(BeTemporally("==", dayOne.Add(3*time.Hour)))
		Expect(run.Spec.Window.StopGracePeriodSeconds).To(BeEquivalentTo(30))
		Expect(run.Spec.Resume).To(BeFalse())
		pod := reconcileUntilPod(rr, ns, first, 1)
		rs := runSpecOf(ns, pod.Name)
		Expect(rs).To(HaveKeyWithValue("stopAt", dayOne.Add(3*time.Hour).Format(time.RFC3339)))
		Expect(rs).NotTo(HaveKey("resume"))
		setPodRunning(pod, freshIP())
		reconcileRunAnswered(rr, ns, first)
		Expect(getRun(ns, first).Status.Phase).To(Equal(vacuumv1alpha1.RunRunning))

		By("the window closes: the runner stops within the grace and reports where each table is")
		clock.SetTime(dayOne.Add(3*time.Hour + 10*time.Second))
		res = reconcileRun(rr, ns, first)
		Expect(getRun(ns, first).Status.Phase).To(Equal(vacuumv1alpha1.RunRunning), "the runner has the grace to stop by itself")
		Expect(res.RequeueAfter).To(And(BeNumerically(">", 0), BeNumerically("<=", 20*time.Second)), "polled again by the grace's end")
		setPodTerminated(pod, 0, "Completed", windowSummary(runnerwire.StopReasonWindowClosed,
			runnerwire.TableResult{Table: "orders", PagesTotal: 1000, Complete: false, BlockReached: 400},
			runnerwire.TableResult{Table: "events", PagesTotal: 80, Complete: true, BlockReached: 80}))
		reconcileRun(rr, ns, first)
		run = getRun(ns, first)
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunInterrupted))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionInterrupted)).To(Equal(vacuumv1alpha1.ReasonWindowClosed))
		Expect(meta.IsStatusConditionTrue(run.Status.Conditions, vacuumv1alpha1.ConditionInterrupted)).To(BeTrue())
		Expect(meta.IsStatusConditionFalse(run.Status.Conditions, vacuumv1alpha1.ConditionComplete)).To(BeTrue())
		Expect(meta.IsStatusConditionFalse(run.Status.Conditions, vacuumv1alpha1.ConditionProgressing)).To(BeTrue())
		Expect(run.Status.Tables).To(HaveLen(2))
		Expect(run.Status.Tables[0].Name).To(Equal("orders"))
		Expect(run.Status.Tables[0].Complete).To(HaveValue(BeFalse()))
		Expect(run.Status.Tables[0].BlockReached).To(HaveValue(BeEquivalentTo(400)))
		Expect(run.Status.Tables[0].DonePerMille).To(HaveValue(BeEquivalentTo(400)))
		Expect(run.Status.Tables[1].DonePerMille).To(HaveValue(BeEquivalentTo(1000)))

		reconcilePolicy(pr, ns, "nightly")
		p := getPolicy(ns, "nightly")
		Expect(p.Status.LastSuccessfulTime).To(BeNil(), "an interrupted run is no success")
		Expect(p.Status.Window.SpanningTables).To(Equal([]vacuumv1alpha1.SpanningTable{
			{Name: "orders", Windows: 1, BlockReached: 400, DonePerMille: 400, EstimatedWindowsLeft: 2}}))
		Expect(p.Status.Window.EstimatedWindowsLeft).To(BeEquivalentTo(2))

		By("the next window's run resumes and completes")
		clock.SetTime(dayOne.Add(26*time.Hour + 5*time.Second))
		reconcilePolicy(pr, ns, "nightly")
		second := newRunName(ns, []string{first})
		Expect(getRun(ns, second).Spec.Resume).To(BeTrue())
		pod = reconcileUntilPod(rr, ns, second, 1)
		Expect(runSpecOf(ns, pod.Name)).To(HaveKeyWithValue("resume", true))
		Expect(runSpecOf(ns, pod.Name)).To(HaveKeyWithValue("stopAt", dayOne.Add(27*time.Hour).Format(time.RFC3339)))
		setPodRunning(pod, freshIP())
		reconcileRunAnswered(rr, ns, second)
		setPodTerminated(pod, 0, "Completed", windowSummary("",
			runnerwire.TableResult{Table: "orders", PagesTotal: 1000, Complete: true, BlockReached: 1000, ResumedFromBlock: 400},
			runnerwire.TableResult{Table: "events", PagesTotal: 80, Complete: true, BlockReached: 80}))
		reconcileRun(rr, ns, second)
		run = getRun(ns, second)
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(run.Status.Tables[0].ResumedFromBlock).To(HaveValue(BeEquivalentTo(400)))
		reconcilePolicy(pr, ns, "nightly")
		p = getPolicy(ns, "nightly")
		Expect(p.Status.Window.SpanningTables).To(BeEmpty())
		Expect(p.Status.Window.EstimatedWindowsLeft).To(BeZero())
		Expect(p.Status.LastSuccessfulTime).NotTo(BeNil())
	})

	It("stops a runner that has not stopped by the end of the grace, and ends the run Interrupted", func() {
		stopAt := clock.Now().Add(time.Minute)
		newRun(ns, "late", "data", func(r *vacuumv1alpha1.VacuumRun) {
			r.Spec.Window = &vacuumv1alpha1.RunWindow{StopAt: metav1.NewTime(stopAt), StopGracePeriodSeconds: 10}
		})
		pod := reconcileUntilPod(rr, ns, "late", 1)
		setPodRunning(pod, freshIP())
		res := reconcileRunAnswered(rr, ns, "late")
		Expect(res.RequeueAfter).To(BeNumerically("<=", time.Minute), "polled again by the window's end")
		clock.SetTime(stopAt.Add(11 * time.Second))
		reconcileRun(rr, ns, "late") // stops the pod
		Expect(podsOf(ns, "late")).To(BeEmpty())
		reconcileRun(rr, ns, "late")
		run := getRun(ns, "late")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunInterrupted))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionInterrupted)).To(Equal(vacuumv1alpha1.ReasonWindowClosed))
		Expect(run.Status.Message).To(ContainSubstring("did not stop within stopGracePeriodSeconds (10)"))
	})

	It("ends a run whose window closed before its pod started, without starting one, and retries no failed attempt", func() {
		newRun(ns, "missed", "data", func(r *vacuumv1alpha1.VacuumRun) {
			r.Spec.Window = &vacuumv1alpha1.RunWindow{StopAt: metav1.NewTime(clock.Now().Add(-time.Second))}
		})
		for range 3 {
			reconcileRun(rr, ns, "missed")
		}
		Expect(getRun(ns, "missed").Status.Phase).To(Equal(vacuumv1alpha1.RunInterrupted))
		Expect(podsOf(ns, "missed")).To(BeEmpty())

		stopAt := clock.Now().Add(time.Minute)
		newRun(ns, "failed", "data", func(r *vacuumv1alpha1.VacuumRun) {
			r.Spec.Window = &vacuumv1alpha1.RunWindow{StopAt: metav1.NewTime(stopAt)}
		})
		pod := reconcileUntilPod(rr, ns, "failed", 1)
		setPodRunning(pod, freshIP())
		reconcileRunAnswered(rr, ns, "failed")
		clock.SetTime(stopAt.Add(time.Second))
		setPodTerminated(pod, 1, "Error", "internal error")
		reconcileRun(rr, ns, "failed")
		run := getRun(ns, "failed")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunInterrupted))
		Expect(run.Status.Attempts).To(BeEquivalentTo(1), "no second attempt once the window is closed")
	})

	It("makes a tick outside the window wait for the next opening, and runs only the latest waiting tick", func() {
		newPolicy(ns, "waits", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Spec.Schedule = "0 0,1 * * *"
			nightly(p)
		})
		clock.SetTime(dayOne.Add(30 * time.Minute))
		reconcilePolicy(pr, ns, "waits")
		Expect(runNames(ns)).To(BeEmpty())
		p := getPolicy(ns, "waits")
		Expect(p.Status.Window.WaitingTick.Time).To(BeTemporally("==", dayOne))
		Expect(p.Status.NextScheduleTime.Time).To(BeTemporally("==", dayOne.Add(2*time.Hour)))
		Expect(prec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonWaitingForWindow))

		clock.SetTime(dayOne.Add(90 * time.Minute))
		reconcilePolicy(pr, ns, "waits")
		Expect(runNames(ns)).To(BeEmpty())
		Expect(getPolicy(ns, "waits").Status.Window.WaitingTick.Time).To(BeTemporally("==", dayOne.Add(time.Hour)), "the later tick replaces the earlier")

		clock.SetTime(dayOne.Add(2*time.Hour + time.Second))
		reconcilePolicy(pr, ns, "waits")
		p = getPolicy(ns, "waits")
		Expect(runNames(ns)).To(ConsistOf(scheduledRunName(p, dayOne.Add(time.Hour))))
		Expect(getRun(ns, scheduledRunName(p, dayOne.Add(time.Hour))).Spec.Window.StopAt.Time).To(BeTemporally("==", dayOne.Add(3*time.Hour)))
		Expect(p.Status.Window.WaitingTick).To(BeNil())
		Expect(p.Status.LastScheduleTime.Time).To(BeTemporally("==", dayOne.Add(time.Hour)))
	})

	It("starts each policy at its own jitter offset inside the window, the same every time, shown in status", func() {
		jittered := func(p *vacuumv1alpha1.VacuumPolicy) { nightly(p); p.Spec.Window.Jitter = true }
		newPolicy(ns, "spread", jittered)
		offset := jitterOffset(ns, "spread", time.Hour)
		Expect(offset).To(And(BeNumerically(">=", 0), BeNumerically("<", 30*time.Minute)))
		open := dayOne.Add(2 * time.Hour)
		if offset > 0 {
			clock.SetTime(open)
			reconcilePolicy(pr, ns, "spread")
			Expect(runNames(ns)).To(BeEmpty(), "no run before the policy's offset")
			p := getPolicy(ns, "spread")
			Expect(p.Status.NextScheduleTime.Time).To(BeTemporally("==", open.Add(offset)))
		}
		clock.SetTime(open.Add(offset))
		reconcilePolicy(pr, ns, "spread")
		p := getPolicy(ns, "spread")
		Expect(p.Status.Window.JitterSeconds).To(Equal(int64(offset / time.Second)))
		Expect(runNames(ns)).To(HaveLen(1))
		Expect(getRun(ns, runNames(ns)[0]).Spec.Window.StopAt.Time).To(BeTemporally("==", open.Add(time.Hour)), "the window's end stays")
	})

	It("pauses and resumes the runner through spec.paused, with the time paused in status", func() {
		newRun(ns, "pausable", "data", nil)
		pod := reconcileUntilPod(rr, ns, "pausable", 1)
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, "pausable").UID))
		defer runner.Close()
		setPodRunning(pod, ip)
		reconcileRunAnswered(rr, ns, "pausable")
		Expect(runner.pauses).NotTo(Receive(), "a fresh pod works: no pause is sent")

		patchRunSpec(ns, "pausable", `{"paused":true}`)
		reconcileRunAnswered(rr, ns, "pausable")
		Expect(runner.pauses).To(Receive(BeTrue()))
		run := getRun(ns, "pausable")
		Expect(meta.IsStatusConditionTrue(run.Status.Conditions, vacuumv1alpha1.ConditionPaused)).To(BeTrue())
		Expect(run.Status.Pause.Since).NotTo(BeNil())

		clock.Step(30 * time.Second)
		patchRunSpec(ns, "pausable", `{"paused":false}`)
		reconcileRunAnswered(rr, ns, "pausable")
		Expect(runner.pauses).To(Receive(BeFalse()))
		run = getRun(ns, "pausable")
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionPaused)).To(Equal(vacuumv1alpha1.ReasonUnpaused))
		Expect(run.Status.Pause.Since).To(BeNil())
		Expect(run.Status.Pause.PausedSeconds).To(BeEquivalentTo(30))
		Expect(runner.refused.Load()).To(BeZero(), "every PUT /pause carries the run's token")
	})

	It("honours the window for an online run: stopAt and resume reach its runner, not its identify pod", func() {
		clock.SetTime(time.Now()) // the identify pod's start timeout counts from the run's creation
		stopAt := clock.Now().Add(time.Minute)
		serveDatabase(ns, "db", "db-1", map[string]bool{"10.0.0.9": true})
		onlineRun(ns, "online", "db", func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Window = &vacuumv1alpha1.RunWindow{StopAt: metav1.NewTime(stopAt), StopGracePeriodSeconds: 5}
			run.Spec.Resume = true
		})
		idPod := reconcileUntilIdentifyPod(rr, ns, "online")
		Expect(runSpecOf(ns, idPod.Name)).NotTo(HaveKey("stopAt"), "identifying is no vacuum")
		identified(idPod, "7301234567890123999")
		pod := reconcileUntilPod(rr, ns, "online", 1)
		rs := runSpecOf(ns, pod.Name)
		Expect(rs).To(HaveKeyWithValue("stopAt", stopAt.UTC().Format(time.RFC3339)))
		Expect(rs).To(HaveKeyWithValue("resume", true))
		setPodRunning(pod, freshIP())
		reconcileRunAnswered(rr, ns, "online")
		clock.SetTime(stopAt.Add(time.Second))
		setPodTerminated(pod, 0, "Completed", windowSummary(runnerwire.StopReasonWindowClosed,
			runnerwire.TableResult{Table: "public.orders", PagesTotal: 500, Complete: false, BlockReached: 250, ResumedFromBlock: 100}))
		reconcileRun(rr, ns, "online")
		run := getRun(ns, "online")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunInterrupted))
		Expect(run.Status.Tables[0].DonePerMille).To(HaveValue(BeEquivalentTo(500)))
	})

	It("refuses a window schedule with its own time zone and a run's changed window, and lets paused change", func() {
		p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tz"}}
		p.Spec.Target.PersistentVolumeClaim = "data"
		p.Spec.Window = &vacuumv1alpha1.Window{Schedule: "CRON_TZ=UTC 0 2 * * *", DurationSeconds: 60}
		Expect(k8sClient.Create(suiteCtx, p)).To(MatchError(ContainSubstring("spec.window.schedule takes its time zone from spec.timeZone")))
		p.Spec.Window = &vacuumv1alpha1.Window{Schedule: "0 2 * * *", DurationSeconds: 0}
		Expect(k8sClient.Create(suiteCtx, p)).To(MatchError(ContainSubstring("durationSeconds")))

		newRun(ns, "fixed", "data", func(r *vacuumv1alpha1.VacuumRun) {
			r.Spec.Window = &vacuumv1alpha1.RunWindow{StopAt: metav1.NewTime(dayOne)}
		})
		run := &vacuumv1alpha1.VacuumRun{}
		run.Namespace, run.Name = ns, "fixed"
		err := k8sClient.Patch(suiteCtx, run, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"window":{"stopAt":"2030-01-01T00:00:00Z"}}}`)))
		Expect(err).To(MatchError(ContainSubstring("spec.window is immutable")))
		err = k8sClient.Patch(suiteCtx, run, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"resume":true}}`)))
		Expect(err).To(MatchError(ContainSubstring("spec.resume is immutable")))
		patchRunSpec(ns, "fixed", `{"paused":true}`)
		Expect(getRun(ns, "fixed").Spec.Paused).To(BeTrue())
	})
})
