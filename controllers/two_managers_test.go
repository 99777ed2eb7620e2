package controllers

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Several managers against one API server, as in a cluster with more than one replica of
// the operator: each has its own cache, client and work queues.

// livePods counts the runner pods of the namespace that have not ended.
func livePods(ns string) int {
	var pods corev1.PodList
	Expect(k8sClient.List(suiteCtx, &pods, client.InNamespace(ns), client.HasLabels{vacuumv1alpha1.LabelRun})).To(Succeed())
	n := 0
	for i := range pods.Items {
		if !podEnded(&pods.Items[i]) {
			n++
		}
	}
	return n
}

// watchLivePods samples livePods until stopped and returns the most seen at once.
func watchLivePods(ns string) (stop func() int) {
	var most atomic.Int32
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(finished)
		for {
			if n := int32(livePods(ns)); n > most.Load() {
				most.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int { close(done); <-finished; return int(most.Load()) }
}

// elected says whether a manager has won leader election.
func elected(m *testManager) func() bool {
	return func() bool {
		select {
		case <-m.mgr.Elected():
			return true
		default:
			return false
		}
	}
}

// metricValue reads one series of a registry: a counter's or gauge's value, a histogram's
// sample count. found is false when the series does not exist.
func metricValue(reg *prometheus.Registry, name string, labels map[string]string) (value float64, found bool) {
	families, err := reg.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if !maps.Equal(got, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// mustMetric is metricValue for a series that must exist.
func mustMetric(reg *prometheus.Registry, name string, labels map[string]string) float64 {
	v, found := metricValue(reg, name, labels)
	Expect(found).To(BeTrue(), "no series %s%v", name, labels)
	return v
}

var _ = Describe("Two managers", Ordered, func() {
	It("never run two pods on one volume when they race on two policies of one PVC; the later run waits VolumeBusy", func() {
		ns := newNamespace()
		sampled := watchLivePods(ns)
		first := runManager(managerOptions{progressInterval: 300 * time.Millisecond})
		defer first.stop()
		second := runManager(managerOptions{progressInterval: 300 * time.Millisecond})
		defer second.stop()

		var wg sync.WaitGroup
		for _, name := range []string{"alpha", "beta"} {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				newPolicy(ns, name, nil) // both on the PVC "data"
			}()
		}
		wg.Wait()

		var holder, waiter string
		Eventually(func() bool {
			a, b := len(podsOf(ns, "alpha-once")), len(podsOf(ns, "beta-once"))
			switch {
			case a == 1 && b == 0:
				holder, waiter = "alpha-once", "beta-once"
			case b == 1 && a == 0:
				holder, waiter = "beta-once", "alpha-once"
			default:
				return false
			}
			return conditionReason(getRun(ns, waiter).Status.Conditions, vacuumv1alpha1.ConditionProgressing) == vacuumv1alpha1.ReasonVolumeBusy
		}).WithTimeout(30*time.Second).Should(BeTrue(), "one run with a pod, the other Pending VolumeBusy")
		Consistently(func() []corev1.Pod { return podsOf(ns, waiter) }).WithTimeout(3 * time.Second).Should(BeEmpty())
		Expect(getRun(ns, waiter).Status.Phase).To(Equal(vacuumv1alpha1.RunPending))

		By("letting the waiting run start once the first has ended and released the volume")
		pod := podsOf(ns, holder)[0]
		setPodTerminated(&pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		Eventually(runPhase(ns, holder)).WithTimeout(15 * time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))
		Eventually(func() []corev1.Pod { return podsOf(ns, waiter) }).WithTimeout(30 * time.Second).Should(HaveLen(1))
		Expect(sampled()).To(Equal(1), "two runner pods were alive at once on one volume")
	})

	It("with leader election: only the leader reconciles; when it stops, the other takes over and finishes the run", func() {
		ns := newNamespace()
		leaseNS := newNamespace()
		opts := managerOptions{progressInterval: 300 * time.Millisecond, leaderElectionID: "vacuum-operator-test", leaderElectionNS: leaseNS}
		leader := runManager(opts)
		defer leader.stop()
		Eventually(elected(leader)).WithTimeout(20 * time.Second).Should(BeTrue())
		standby := runManager(opts)
		defer standby.stop()

		newPolicy(ns, "elected", nil)
		const run = "elected-once"
		Eventually(func() []corev1.Pod { return podsOf(ns, run) }).WithTimeout(20 * time.Second).Should(HaveLen(1))
		pod := podsOf(ns, run)[0]
		setPodRunning(&pod, freshIP())
		Eventually(runPhase(ns, run)).WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunRunning))
		Expect(leader.rec.reasons()).To(ContainElements(vacuumv1alpha1.ReasonRunCreated, vacuumv1alpha1.ReasonPodCreated))
		Expect(elected(standby)()).To(BeFalse())
		Expect(standby.rec.all()).To(BeEmpty(), "a manager that is not the leader reconciled")

		By("stopping the leader: the standby takes over and finishes the run")
		leader.stop()
		Eventually(elected(standby)).WithTimeout(30 * time.Second).Should(BeTrue())
		setPodTerminated(&pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		Eventually(runPhase(ns, run)).WithTimeout(15 * time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(standby.rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonSucceeded))
		Expect(podsOf(ns, run)).To(HaveLen(1), "the new leader made no second pod")
	})
})

var _ = Describe("Manager metrics", Ordered, func() {
	It("count each ended run exactly once, by policy and result, with its duration, pages, bytes and last success", func() {
		m := runManager(managerOptions{progressInterval: 300 * time.Millisecond})
		defer m.stop()
		ns := newNamespace()
		newPolicy(ns, "metered", nil)
		const run = "metered-once"
		runner := runningUnderManager(ns, run)
		defer runner.Close()
		summary := readGolden[runnerwire.Summary](GinkgoT(), "summary-succeeded.json")
		pod := podsOf(ns, run)[0]
		setPodTerminated(&pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		Eventually(runPhase(ns, run)).WithTimeout(15 * time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))

		succeeded := map[string]string{"namespace": ns, "policy": "metered", "result": "Succeeded"}
		count := func(labels map[string]string) func() float64 {
			return func() float64 { v, _ := metricValue(m.reg, "vacuum_runs_total", labels); return v }
		}
		Eventually(count(succeeded)).WithTimeout(5 * time.Second).Should(Equal(1.0))
		Consistently(count(succeeded)).WithTimeout(2*time.Second).Should(Equal(1.0), "one run ended, counted once")
		Expect(mustMetric(m.reg, "vacuum_run_duration_seconds", succeeded)).To(Equal(1.0), "one duration observed")
		Expect(mustMetric(m.reg, "vacuum_processed_pages_total", map[string]string{"namespace": ns, "policy": "metered"})).
			To(BeEquivalentTo(summary.Totals.PagesScanned))
		for kind, want := range map[string]int64{"read": summary.Totals.BytesRead, "written": summary.Totals.BytesWritten, "wal": summary.Totals.WALBytes} {
			Expect(mustMetric(m.reg, "vacuum_processed_bytes_total", map[string]string{"namespace": ns, "policy": "metered", "kind": kind})).
				To(BeEquivalentTo(want), "bytes %s", kind)
		}
		ended := getRun(ns, run).Status.CompletionTime
		Eventually(func() float64 {
			v, _ := metricValue(m.reg, "vacuum_last_success_timestamp_seconds", map[string]string{"namespace": ns, "policy": "metered"})
			return v
		}).WithTimeout(5*time.Second).Should(BeEquivalentTo(ended.Unix()), "from the policy's status.lastSuccessfulTime")

		By("counting a second, failed run of the policy under its own result")
		p := getPolicy(ns, "metered")
		base := p.DeepCopy()
		p.Annotations = map[string]string{vacuumv1alpha1.AnnotationRunNow: "again"}
		Expect(k8sClient.Patch(suiteCtx, p, client.MergeFrom(base))).To(Succeed())
		var again string
		Eventually(func() int {
			for _, n := range runNames(ns) {
				if n != run {
					again = n
				}
			}
			if again == "" {
				return 0
			}
			return len(podsOf(ns, again))
		}).WithTimeout(20 * time.Second).Should(Equal(1))
		failedPod := podsOf(ns, again)[0]
		setPodTerminated(&failedPod, 2, "Error", "")
		Eventually(runPhase(ns, again)).WithTimeout(15 * time.Second).Should(Equal(vacuumv1alpha1.RunFailed))
		failed := map[string]string{"namespace": ns, "policy": "metered", "result": "Failed"}
		Eventually(count(failed)).WithTimeout(5 * time.Second).Should(Equal(1.0))
		Consistently(count(failed)).WithTimeout(2 * time.Second).Should(Equal(1.0))
		Expect(count(succeeded)()).To(Equal(1.0))
		Expect(mustMetric(m.reg, "vacuum_processed_pages_total", map[string]string{"namespace": ns, "policy": "metered"})).
			To(BeEquivalentTo(summary.Totals.PagesScanned), "a run that processed nothing adds no pages")
	})
})
