package e2e

import (
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// costRateOver samples the pod's counters at the start and the end of window and returns
// the achieved cost rate in units per second of wall-clock time.
func costRateOver(pod *corev1.Pod, window time.Duration) float64 {
	GinkgoHelper()
	p0, err := progress(pod)
	Expect(err).NotTo(HaveOccurred())
	t0 := time.Now()
	time.Sleep(window)
	p1, err := progress(pod)
	Expect(err).NotTo(HaveOccurred())
	Expect(p1.Phase).NotTo(Equal("done"), "the run ended inside the measuring window; make the table bigger")
	return (cost(p1) - cost(p0)) / time.Since(t0).Seconds()
}

var _ = Describe("The throttle", func() {
	It("holds a cost-bound run within 10% of costLimit/costDelay", func() {
		ns := newNamespace()
		// 5,334 heap pages at about 26 cost units each (a miss, a dirtying, a hit on the way
		// back: 140,063 units unthrottled on 870c948): about 14 s at the limit, so the 1 s wait
		// and the 6 s window fit. 40,000 rows had 70,047 units (7 s) once the visibility map
		// page stayed pinned, and the run ended inside the window.
		makeVolume(ns, "data", bloatTable{name: "t", rows: 80_000, payload: 500, deleted: 0.3})
		// 100 units per 10 ms = 10,000 units/s: ~200 pages a second, far below what the
		// machine can do, so the limit decides.
		Expect(cluster.Client.Create(suiteCtx, policy(ns, "metered", "data", vacuumv1alpha1.VacuumModeLazy, costThrottle(10*time.Millisecond, 100)))).To(Succeed())
		pod := runningPod(runOf(ns, "metered"))
		waitProgress(pod, "1 s into the heap scan", func(p runnerwire.Progress) bool { return p.ElapsedSeconds >= 1 && p.PagesScanned > 0 })

		rate := costRateOver(pod, 6*time.Second)
		GinkgoWriter.Printf("achieved cost rate %.0f units/s, configured 10000\n", rate)
		Expect(rate).To(BeNumerically("~", 10000, 1000))
	})

	It("changes a running run's rate when the policy's throttle is edited", func() {
		ns := newNamespace()
		// 5,334 pages, about 140k cost units (as above): the first 6 s at 2,500 units/s, the
		// rest at 10,000, with some 50k units left after the second window. 45,000 rows (about
		// 79k units) left only about a second's worth.
		makeVolume(ns, "data", bloatTable{name: "t", rows: 80_000, payload: 500, deleted: 0.3})
		Expect(cluster.Client.Create(suiteCtx, policy(ns, "edited", "data", vacuumv1alpha1.VacuumModeLazy, costThrottle(10*time.Millisecond, 25)))).To(Succeed())
		run := runOf(ns, "edited")
		pod := runningPod(run)
		waitProgress(pod, "1 s into the heap scan", func(p runnerwire.Progress) bool { return p.ElapsedSeconds >= 1 && p.PagesScanned > 0 })
		before := costRateOver(pod, 5*time.Second)

		kubectlRun("patch", "vacuumpolicy", "edited", "-n", ns, "--type=merge", "-p", `{"spec":{"throttle":{"costLimit":100}}}`)
		Eventually(func() *int32 { return getRun(run).Spec.Throttle.CostLimit }).WithTimeout(10*time.Second).
			Should(HaveValue(Equal(int32(100))), "the policy's edit reaches the active run")
		Eventually(func() *vacuumv1alpha1.Throttle { return getRun(run).Status.AppliedThrottle }).WithTimeout(10*time.Second).
			Should(HaveField("CostLimit", HaveValue(Equal(int32(100)))), "the operator pushes the new throttle to the runner")
		after := costRateOver(pod, 5*time.Second)
		GinkgoWriter.Printf("cost units/s over 5 s: %.0f at costLimit 25, %.0f after the edit to 100\n", before, after)
		Expect(before).To(BeNumerically("~", 2500, 500))
		Expect(after).To(BeNumerically("~", 10000, 2000))
	})
})

var _ = Describe("Two policies on one volume", func() {
	It("never run at once", func() {
		ns := newNamespace()
		makeVolume(ns, "shared",
			bloatTable{name: "a", rows: 20_000, payload: 200, deleted: 0.3},
			bloatTable{name: "b", rows: 20_000, payload: 200, deleted: 0.3})
		// A sampler watches the pods on the volume while both policies run.
		var mu sync.Mutex
		maxRunning := 0
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer GinkgoRecover()
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				var pods corev1.PodList
				if err := cluster.Client.List(suiteCtx, &pods, client.InNamespace(ns)); err != nil {
					continue
				}
				n := 0
				for _, p := range pods.Items {
					if p.Status.Phase == corev1.PodRunning {
						n++
					}
				}
				mu.Lock()
				maxRunning = max(maxRunning, n)
				mu.Unlock()
			}
		}()
		// 10,000 units/s: a few seconds per run, so overlapping runs could not go unseen.
		th := costThrottle(10*time.Millisecond, 100)
		Expect(cluster.Client.Create(suiteCtx, policy(ns, "first", "shared", vacuumv1alpha1.VacuumModeLazy, th, "a"))).To(Succeed())
		Expect(cluster.Client.Create(suiteCtx, policy(ns, "second", "shared", vacuumv1alpha1.VacuumModeFull, th))).To(Succeed())
		r1 := waitPhase(runOf(ns, "first"), vacuumv1alpha1.RunSucceeded, 3*time.Minute)
		r2 := waitPhase(runOf(ns, "second"), vacuumv1alpha1.RunSucceeded, 3*time.Minute)
		close(stop)
		wg.Wait()
		Expect(maxRunning).To(Equal(1), "runner pods on the shared volume ran at once")
		Expect(r1.Status.Totals).NotTo(BeNil())
		Expect(r2.Status.Totals).NotTo(BeNil())
	})
})
