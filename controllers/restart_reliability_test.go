package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Operator under faults: the manager stops (a crash, a rolling update) in the middle of a
// run and a new one takes over from what the API server holds. Whatever happened while no
// manager was watching, the run must end in the right terminal phase, and at no moment may
// two runner pods share the volume.

// onePodAtMost fails if the run ever has more than one pod while fn's condition is awaited.
func onePodAtMost(ns, run string) func() int {
	return func() int {
		n := len(podsOf(ns, run))
		Expect(n).To(BeNumerically("<=", 1), "two runner pods of %s on one volume", run)
		return n
	}
}

func runPhase(ns, run string) func() vacuumv1alpha1.RunPhase {
	return func() vacuumv1alpha1.RunPhase { return getRun(ns, run).Status.Phase }
}

var _ = Describe("The operator under faults", Ordered, func() {
	It("keeps the one runner pod and finishes the run when the manager restarts mid-run", func() {
		stop := startManager(300 * time.Millisecond)
		ns := newNamespace()
		newPolicy(ns, "restart", nil)
		const run = "restart-once"
		Eventually(func() []corev1.Pod { return podsOf(ns, run) }).WithTimeout(20 * time.Second).Should(HaveLen(1))
		pod := podsOf(ns, run)[0]
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, run).UID))
		defer runner.Close()
		setPodRunning(&pod, ip)
		Eventually(runPhase(ns, run)).WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunRunning))

		stop() // the manager dies mid-run
		stop = startManager(300 * time.Millisecond)
		defer func() { stop() }()
		Consistently(onePodAtMost(ns, run)).WithTimeout(2 * time.Second).Should(Equal(1))
		Expect(podsOf(ns, run)[0].UID).To(Equal(pod.UID), "the new manager replaced a healthy runner pod")

		setPodTerminated(&pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		Eventually(runPhase(ns, run)).WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(onePodAtMost(ns, run)()).To(BeNumerically("<=", 1))
	})

	It("finishes the run from the pod's final status when the runner ended while no manager ran", func() {
		stop := startManager(300 * time.Millisecond)
		ns := newNamespace()
		newPolicy(ns, "gap", nil)
		const run = "gap-once"
		Eventually(func() []corev1.Pod { return podsOf(ns, run) }).WithTimeout(20 * time.Second).Should(HaveLen(1))
		pod := podsOf(ns, run)[0]
		setPodRunning(&pod, freshIP())
		Eventually(runPhase(ns, run)).WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunRunning))

		stop()
		setPodTerminated(&pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		stop = startManager(300 * time.Millisecond)
		defer func() { stop() }()
		Eventually(runPhase(ns, run)).WithTimeout(15 * time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(onePodAtMost(ns, run)()).To(BeNumerically("<=", 1))
	})

	It("never leaves the run Running when its pod was deleted while no manager ran", func() {
		stop := startManager(300 * time.Millisecond)
		ns := newNamespace()
		newPolicy(ns, "lost", nil)
		const run = "lost-once"
		Eventually(func() []corev1.Pod { return podsOf(ns, run) }).WithTimeout(20 * time.Second).Should(HaveLen(1))
		pod := podsOf(ns, run)[0]
		setPodRunning(&pod, freshIP())
		Eventually(runPhase(ns, run)).WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunRunning))

		stop()
		Expect(k8sClient.Delete(suiteCtx, &pod, client.GracePeriodSeconds(0))).To(Succeed())
		stop = startManager(300 * time.Millisecond)
		defer func() { stop() }()
		// Either a retry (a new pod, alone on the volume) or a terminal phase with a reason.
		Eventually(func() bool {
			onePodAtMost(ns, run)()
			r := getRun(ns, run)
			if r.IsFinished() {
				return true
			}
			pods := podsOf(ns, run)
			return len(pods) == 1 && pods[0].UID != pod.UID
		}).WithTimeout(20*time.Second).Should(BeTrue(), "run stuck %s after its pod vanished", getRun(ns, run).Status.Phase)
		if pods := podsOf(ns, run); len(pods) == 1 && !getRun(ns, run).IsFinished() {
			setPodTerminated(&pods[0], 0, "Completed", string(goldenBytes("summary-succeeded.json")))
			Eventually(runPhase(ns, run)).WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))
		}
		Expect(getRun(ns, run).Status.Phase).NotTo(Equal(vacuumv1alpha1.RunRunning))
	})
})
