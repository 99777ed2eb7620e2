package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

var _ = Describe("An adaptive run's status", func() {
	var (
		ns    string
		clock *clocktesting.FakeClock
		r     *RunReconciler
		rec   *recorder
	)
	BeforeEach(func() {
		ns, clock, r, rec = runSpecStart()
		r.ProgressInterval = 20 * time.Millisecond // each poll below reads the fake's latest answer
		r.Metrics = NewMetrics(prometheus.NewRegistry())
	})

	bindingEvents := func() int {
		n := 0
		for _, reason := range rec.reasons() {
			if reason == vacuumv1alpha1.ReasonAdaptiveBindingChanged {
				n++
			}
		}
		return n
	}
	// poll lets the progress interval pass and folds the fake runner's answer in.
	poll := func(name string) *vacuumv1alpha1.VacuumRun {
		time.Sleep(2 * r.ProgressInterval)
		reconcileRunAnswered(r, ns, name)
		return getRun(ns, name)
	}

	It("shows the effective rate, the binding and the time bound by each, counts them in metrics, and emits one event per change", func() {
		serveDatabase(ns, "db", "db-1", map[string]bool{"10.0.0.9": true})
		onlineRun(ns, "ad", "db", func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Throttle.CostDelay = &metav1.Duration{Duration: 2 * time.Millisecond}
			run.Spec.Throttle.Adaptive = &vacuumv1alpha1.AdaptiveThrottle{
				ForegroundLatency: &vacuumv1alpha1.ForegroundLatencyTarget{Target: metav1.Duration{Duration: 5 * time.Millisecond}}}
		})
		identified(reconcileUntilIdentifyPod(r, ns, "ad"), "7301234567890123456")
		pod := reconcileUntilPod(r, ns, "ad", 1)
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, "ad").UID))
		defer runner.Close()
		p := readGolden[runnerwire.Progress](GinkgoT(), "progress.json")
		p.Adaptive = &runnerwire.AdaptiveProgress{Binding: "ForegroundLatency", BudgetPerMille: 350,
			BoundSeconds: map[string]float64{"ForegroundLatency": 3.4, "Ceiling": 1.2}}
		runner.setProgress(p)
		setPodRunning(pod, ip)

		run := poll("ad")
		Expect(run.Status.Adaptive).NotTo(BeNil())
		Expect(run.Status.Adaptive.ReportedTime).NotTo(BeNil())
		Expect(*run.Status.Adaptive).To(Equal(vacuumv1alpha1.AdaptiveStatus{Binding: "ForegroundLatency", BudgetPerMille: 350,
			Budget: "35.0%", Applies: runnerwire.ThrottleAppliesImmediately,
			BoundSeconds:    &vacuumv1alpha1.AdaptiveBoundSeconds{ForegroundLatency: 3, Ceiling: 1},
			ReportedBinding: "ForegroundLatency", ReportedTime: run.Status.Adaptive.ReportedTime}))
		Expect(bindingEvents()).To(Equal(1))
		Expect(rec.all()).To(ContainElement(
			"Normal AdaptiveBindingChanged adaptive throttle bound by ForegroundLatency at 35.0% of the ceiling (was none; applies Immediately)"))
		labels := []string{ns, "", "ad", "ForegroundLatency"}
		Expect(testutil.ToFloat64(r.Metrics.adaptiveBudget.WithLabelValues(labels...))).To(Equal(0.35))
		Expect(testutil.ToFloat64(r.Metrics.adaptiveBoundSeconds.WithLabelValues(ns, "", "ForegroundLatency"))).To(Equal(3.0))
		Expect(testutil.ToFloat64(r.Metrics.adaptiveBoundSeconds.WithLabelValues(ns, "", "Ceiling"))).To(Equal(1.0))

		By("the same binding at later polls: no second event, and only the new seconds are counted")
		p.Adaptive.BudgetPerMille, p.Adaptive.BoundSeconds["ForegroundLatency"] = 300, 6
		runner.setProgress(p)
		clock.Step(time.Minute)
		run = poll("ad")
		poll("ad")
		Expect(run.Status.Adaptive.BudgetPerMille).To(BeEquivalentTo(300))
		Expect(bindingEvents()).To(Equal(1))
		Expect(testutil.ToFloat64(r.Metrics.adaptiveBoundSeconds.WithLabelValues(ns, "", "ForegroundLatency"))).To(Equal(6.0))

		By("a new binding: one event; a change back within ten seconds of it waits until they have passed")
		p.Adaptive.Binding, p.Adaptive.BudgetPerMille, p.Adaptive.BoundSeconds["Ceiling"] = "Ceiling", 1000, 3
		runner.setProgress(p)
		poll("ad")
		Expect(bindingEvents()).To(Equal(2))
		Expect(rec.all()).To(ContainElement(
			"Normal AdaptiveBindingChanged adaptive throttle bound by Ceiling at 100.0% of the ceiling (was ForegroundLatency; applies Immediately)"))
		Expect(testutil.ToFloat64(r.Metrics.adaptiveBoundSeconds.WithLabelValues(ns, "", "Ceiling"))).To(Equal(3.0))
		Expect(testutil.ToFloat64(r.Metrics.adaptiveBudget.WithLabelValues(ns, "", "ad", "Ceiling"))).To(Equal(1.0))
		p.Adaptive.Binding, p.Adaptive.BudgetPerMille = "HardStop", 0
		runner.setProgress(p)
		clock.Step(5 * time.Second)
		run = poll("ad")
		Expect(run.Status.Adaptive.Binding).To(Equal("HardStop"))
		Expect(bindingEvents()).To(Equal(2), "within ten seconds of the last event")
		clock.Step(5 * time.Second)
		poll("ad")
		poll("ad")
		Expect(bindingEvents()).To(Equal(3))
		Expect(getRun(ns, "ad").Status.Adaptive.ReportedBinding).To(Equal("HardStop"))

		By("the run's end drops its budget gauge")
		setPodTerminated(pod, 0, "Completed", `{"phase":"Succeeded","exitCode":0,"message":"vacuumed 1 tables","totals":{},"tables":[],"tablesOmitted":0,"server":null}`)
		reconcileRun(r, ns, "ad")
		reconcileRun(r, ns, "ad")
		Expect(getRun(ns, "ad").Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(testutil.CollectAndCount(r.Metrics.adaptiveBudget)).To(Equal(0))
		Expect(getRun(ns, "ad").Status.Adaptive.BoundSeconds.HardStop).To(BeZero())
	})
})
