package kubectlvacuum

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

var _ = Describe("kubectl vacuum run-now --wait", func() {
	DescribeTable("prints the run the policy makes and exits with the code of its end",
		func(runnerExit int32, message string, wantCode int, wantPhase vacuumv1alpha1.RunPhase) {
			ns := newNamespace()
			ensureClaim(ns, "data")
			p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"}}
			p.Spec.Target.PersistentVolumeClaim = "data"
			p.Spec.Schedule = "0 3 1 1 *" // once a year: no tick during the spec
			Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())

			done := make(chan result, 1)
			go func() {
				defer GinkgoRecover()
				done <- plugin(ns, "run-now", "nightly", "--wait", "--timeout", "60s")
			}()
			var runs vacuumv1alpha1.VacuumRunList
			Eventually(func() []vacuumv1alpha1.VacuumRun {
				Expect(k8sClient.List(suiteCtx, &runs, client.InNamespace(ns))).To(Succeed())
				return runs.Items
			}).WithTimeout(20 * time.Second).Should(HaveLen(1))
			name := runs.Items[0].Name
			Expect(runs.Items[0].Spec.PolicyName).To(Equal("nightly"))
			pod := podOf(ns, name)
			Consistently(done).WithTimeout(500*time.Millisecond).ShouldNot(Receive(), "--wait returned before the run ended")
			setPodStatus(pod, terminalPhase(runnerExit), "", terminated(runnerExit, message))

			var res result
			Eventually(done).WithTimeout(30 * time.Second).Should(Receive(&res))
			Expect(res.out).To(Equal("vacuumrun/"+name+"\n"), "stderr: %s", res.errOut)
			Expect(res.code).To(Equal(wantCode), "stderr: %s", res.errOut)
			Expect(getRun(ns, name).Status.Phase).To(Equal(wantPhase))
			Expect(res.errOut).To(ContainSubstring(name+": "+string(wantPhase)), "the last progress line is the end")
		},
		Entry("exit 0 on a Succeeded run", int32(0), string(golden("summary-succeeded.json")), ExitOK, vacuumv1alpha1.RunSucceeded),
		Entry("exit 2 on a Failed run", int32(2), "bad input: table nosuch does not exist", ExitFailed, vacuumv1alpha1.RunFailed),
	)

	It("times out with exit 5 while the run goes on", func() {
		ns := newNamespace()
		ensureClaim(ns, "data")
		p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}}
		p.Spec.Target.PersistentVolumeClaim = "data"
		p.Spec.Schedule = "0 3 1 1 *"
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		res := plugin(ns, "run-now", "slow", "--wait", "--timeout", "2s")
		Expect(res.code).To(Equal(ExitTimeout), "stderr: %s", res.errOut)
		Expect(res.errOut).To(ContainSubstring("did not end within 2s"))
	})
})

func terminalPhase(code int32) corev1.PodPhase {
	if code == 0 {
		return corev1.PodSucceeded
	}
	return corev1.PodFailed
}

var _ = Describe("kubectl vacuum explain", func() {
	It("names the run holding the volume's lock, and the image pull the holder's pod waits for", func() {
		ns := newNamespace()
		newRun(ns, "first", "data")
		pod := podOf(ns, "first")
		setPodStatus(pod, corev1.PodPending, "", corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
			Reason: "ImagePullBackOff", Message: `Back-off pulling image "vacuum-operator:test"`}})
		newRun(ns, "second", "data")
		Eventually(func() string {
			c := meta.FindStatusCondition(getRun(ns, "second").Status.Conditions, vacuumv1alpha1.ConditionProgressing)
			if c == nil {
				return ""
			}
			return c.Reason
		}).WithTimeout(20 * time.Second).Should(Equal(vacuumv1alpha1.ReasonVolumeBusy))

		res := plugin(ns, "explain", "second")
		Expect(res.code).To(Equal(ExitOK), "stderr: %s", res.errOut)
		Expect(res.out).To(ContainSubstring("vacuumrun " + ns + "/second is Pending (VolumeBusy)"))
		Expect(res.out).To(MatchRegexp(`waits for the lock of volume data \(Lease vacuum-pvc-data\): held by run first \(Pending, 0%, since \S+ ago\)`))

		Eventually(func() string { return plugin(ns, "explain", "first").out }).WithTimeout(10 * time.Second).Should(And(
			ContainSubstring(`pod first-1 container runner is waiting: ImagePullBackOff: Back-off pulling image "vacuum-operator:test"`),
			ContainSubstring("the run fails with PodNotStarted after podStartTimeoutSeconds (600)"),
		))
	})
})

var _ = Describe("kubectl vacuum on a running run", func() {
	It("shows its live progress, and cancel, throttle, pause and resume change it", func() {
		ns := newNamespace()
		newRun(ns, "live", "data")
		pod := podOf(ns, "live")
		ip := freshIP()
		runner := startFakeRunner(ip, getRun(ns, "live"))
		defer runner.Close()
		setPodStatus(pod, corev1.PodRunning, ip, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
		Eventually(func() int64 { return getRun(ns, "live").Status.PagesPerSecond }).WithTimeout(20 * time.Second).Should(Equal(int64(1610)))

		By("status: the table, and -o json")
		res := plugin(ns, "status")
		Expect(res.code).To(Equal(ExitOK), "stderr: %s", res.errOut)
		Expect(res.out).To(MatchRegexp(`(?m)^RUN\s+POLICY\s+PHASE\s+REASON\s+TABLE\s+PROGRESS\s+PAGES/S\s+THROTTLE\s+FG-P99\s+WINDOW\s+AGE$`))
		Expect(res.out).To(MatchRegexp(`(?m)^live\s+-\s+Running\s+Running\s+events\s+63% vacuuming indexes\s+1610\s+2ms/200\s+2.65ms\s+-\s+\S+$`))
		res = plugin(ns, "status", "-o", "json")
		Expect(res.code).To(Equal(ExitOK), "stderr: %s", res.errOut)
		var rep StatusReport
		Expect(json.Unmarshal([]byte(res.out), &rep)).To(Succeed())
		Expect(rep.Runs).To(HaveLen(1))
		Expect(rep.Runs[0].Percent).To(BeNumerically("==", 63))
		Expect(rep.Runs[0].PagesPerSecond).To(Equal(int64(1610)))
		Expect(rep.Runs[0].Table).To(Equal("events"))

		By("throttle: a patch of spec.throttle, pushed to the runner")
		res = plugin(ns, "throttle", "live", "--cost-delay", "10ms", "--cost-limit", "500", "--max-read-rate", "20Mi")
		Expect(res.code).To(Equal(ExitOK), "stderr: %s", res.errOut)
		Expect(res.out).To(Equal("vacuumrun/live throttle 10ms/500 read<=20Mi/s\n"))
		t := getRun(ns, "live").Spec.Throttle
		Expect(t.CostDelay.Duration).To(Equal(10 * time.Millisecond))
		Expect(*t.CostLimit).To(Equal(int32(500)))
		Expect(t.MaxReadBytesPerSecond.String()).To(Equal("20Mi"))
		Expect(t.PageMissCost).NotTo(BeNil(), "the fields not given are kept")
		Eventually(runner.puts["/throttle"].Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 1))
		Expect(plugin(ns, "throttle", "live").code).To(Equal(ExitError), "no flag is an error")
		Expect(plugin(ns, "throttle", "live", "--cost-delay", "1s").errOut).To(ContainSubstring("throttle.costDelay must be a duration between 0 and 100ms"))

		By("pause and resume: spec.paused, sent to the runner")
		Expect(plugin(ns, "pause", "live").out).To(Equal("vacuumrun/live pause requested\n"))
		Expect(getRun(ns, "live").Spec.Paused).To(BeTrue())
		Eventually(runner.puts["/pause"].Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 1))
		Expect(plugin(ns, "resume", "live").out).To(Equal("vacuumrun/live resume requested\n"))
		Expect(getRun(ns, "live").Spec.Paused).To(BeFalse())

		By("cancel: spec.cancel, and the run ends Cancelled")
		Expect(plugin(ns, "cancel", "live").out).To(Equal("vacuumrun/live cancel requested\n"))
		Expect(getRun(ns, "live").Spec.Cancel).To(BeTrue())
		Eventually(func() vacuumv1alpha1.RunPhase { return getRun(ns, "live").Status.Phase }).WithTimeout(20 * time.Second).Should(Equal(vacuumv1alpha1.RunCancelled))
		res = plugin(ns, "cancel", "live")
		Expect(res.code).To(Equal(ExitError))
		Expect(res.errOut).To(ContainSubstring("already ended Cancelled"))
	})
})
