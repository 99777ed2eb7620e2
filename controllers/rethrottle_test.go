package controllers

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Live re-throttle through a real manager: `kubectl patch vacuumrun NAME --type merge -p
// '{"spec":{"throttle":...}}'` must reach the runner pod and stay, whoever else watches the
// run (its policy's controller is woken by every change of it).

// patchRunThrottle is what kubectl patch sends.
func patchRunThrottle(ns, name, throttleJSON string) {
	run := &vacuumv1alpha1.VacuumRun{}
	run.Namespace, run.Name = ns, name
	body := []byte(`{"spec":{"throttle":` + throttleJSON + `}}`)
	Expect(k8sClient.Patch(suiteCtx, run, client.RawPatch(types.MergePatchType, body))).To(Succeed())
}

// runningUnderManager waits for the run's first pod, stands a fake runner in for it and
// waits until the run is Running.
func runningUnderManager(ns, name string) *fakeRunner {
	Eventually(func() []corev1.Pod { return podsOf(ns, name) }).WithTimeout(20 * time.Second).Should(HaveLen(1))
	pod := podsOf(ns, name)[0]
	ip := freshIP()
	runner := startFakeRunner(ip, runToken(testKey, getRun(ns, name).UID))
	setPodRunning(&pod, ip)
	Eventually(runPhase(ns, name)).WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunRunning))
	return runner
}

// costLimitOf is the run's spec.throttle.costLimit.
func costLimitOf(ns, name string) func() int32 {
	return func() int32 { return ptr.Deref(getRun(ns, name).Spec.Throttle.CostLimit, 0) }
}

// nothingPushed fails if the runner was sent another throttle.
func nothingPushed(runner *fakeRunner) func() bool {
	return func() bool {
		select {
		case t := <-runner.throttles:
			Fail(describeWire(t))
		default:
		}
		return true
	}
}

func describeWire(t runnerwire.Throttle) string {
	return fmt.Sprintf("the runner was sent another throttle, costLimit %d", ptr.Deref(t.CostLimit, 0))
}

var _ = Describe("Live re-throttle", Ordered, func() {
	var m *testManager
	BeforeAll(func() { m = runManager(managerOptions{progressInterval: 300 * time.Millisecond}) })
	AfterAll(func() { m.stop() })

	It("keeps a hand-made run's patched throttle and pushes it to the pod with the run's token", func() {
		ns := newNamespace()
		newRun(ns, "byhand", "data", nil)
		runner := runningUnderManager(ns, "byhand")
		defer runner.Close()

		patchRunThrottle(ns, "byhand", `{"costLimit":50,"maxWriteBytesPerSecond":"5Mi"}`)
		var got runnerwire.Throttle
		Eventually(runner.throttles).WithTimeout(10 * time.Second).Should(Receive(&got))
		Expect(got.CostLimit).To(HaveValue(BeEquivalentTo(50)))
		Expect(got.MaxWriteBytesPerSecond.String()).To(Equal("5Mi"))
		Expect(runner.refused.Load()).To(BeZero(), "every PUT /throttle carries the run's token")

		Consistently(costLimitOf(ns, "byhand")).WithTimeout(3 * time.Second).Should(BeEquivalentTo(50))
		Consistently(nothingPushed(runner)).WithTimeout(time.Second).Should(BeTrue())
		Expect(getRun(ns, "byhand").Status.AppliedThrottle.CostLimit).To(HaveValue(BeEquivalentTo(50)))
	})

	It("keeps a hand edit of a policy's run, and carries a later edit of the policy's throttle onto it", func() {
		ns := newNamespace()
		newPolicy(ns, "owned", nil)
		const run = "owned-once"
		runner := runningUnderManager(ns, run)
		defer runner.Close()
		Expect(getRun(ns, run).Annotations).To(HaveKey(vacuumv1alpha1.AnnotationPolicyThrottle))

		By("patching the run by hand: the policy's controller leaves it alone")
		patchRunThrottle(ns, run, `{"costLimit":50}`)
		var got runnerwire.Throttle
		Eventually(runner.throttles).WithTimeout(10 * time.Second).Should(Receive(&got))
		Expect(got.CostLimit).To(HaveValue(BeEquivalentTo(50)))
		Consistently(costLimitOf(ns, run)).WithTimeout(3 * time.Second).Should(BeEquivalentTo(50))
		Consistently(nothingPushed(runner)).WithTimeout(time.Second).Should(BeTrue())

		By("editing the policy's throttle: its active run follows, and so does the pod")
		p := getPolicy(ns, "owned")
		base := p.DeepCopy()
		p.Spec.Throttle.CostLimit = ptr.To(int32(120))
		Expect(k8sClient.Patch(suiteCtx, p, client.MergeFrom(base))).To(Succeed())
		Eventually(costLimitOf(ns, run)).WithTimeout(10 * time.Second).Should(BeEquivalentTo(120))
		Eventually(runner.throttles).WithTimeout(10 * time.Second).Should(Receive(&got))
		Expect(got.CostLimit).To(HaveValue(BeEquivalentTo(120)))
		Expect(runner.refused.Load()).To(BeZero())
		Expect(m.rec.all()).NotTo(ContainElement(ContainSubstring(runner.token)), "the token must not appear in events")

		By("patching the run by hand again: that edit stays too")
		patchRunThrottle(ns, run, `{"costLimit":70}`)
		Eventually(runner.throttles).WithTimeout(10 * time.Second).Should(Receive(&got))
		Expect(got.CostLimit).To(HaveValue(BeEquivalentTo(70)))
		Consistently(costLimitOf(ns, run)).WithTimeout(2 * time.Second).Should(BeEquivalentTo(70))
	})
})
