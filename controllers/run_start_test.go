package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Runs that cannot start: the API server refuses their pod, or the pod never runs. Either
// way the run ends, its app gets its replicas back and the volume is free again.

// leaseExists says whether a volume's lock is held by anyone.
func leaseExists(ns, pvc string) bool {
	var lease coordinationv1.Lease
	err := k8sClient.Get(suiteCtx, key(ns, leaseName(pvc)), &lease)
	if apierrors.IsNotFound(err) {
		return false
	}
	Expect(err).NotTo(HaveOccurred())
	return true
}

// quiesceDeployment makes the run quiesce the Deployment "app".
func quiesceDeployment(run *vacuumv1alpha1.VacuumRun) {
	run.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: "Deployment", Name: "app"}
}

// setPodWaiting plays the kubelet or the scheduler for a pod that does not start.
func setPodWaiting(pod *corev1.Pod, edit func(*corev1.PodStatus)) {
	pod = getPod(pod.Namespace, pod.Name)
	pod.Status.Phase = corev1.PodPending
	edit(&pod.Status)
	Expect(k8sClient.Status().Update(suiteCtx, pod)).To(Succeed())
}

// exhaustQuota makes a ResourceQuota of no pods in ns, with the status the quota controller
// would write (envtest runs none), so the API server's ResourceQuota admission plugin
// refuses every new pod of the namespace as Forbidden ("exceeded quota").
func exhaustQuota(ns string) {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	Expect(k8sClient.Create(suiteCtx, q)).To(Succeed())
	q.Status.Hard = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	q.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	Expect(k8sClient.Status().Update(suiteCtx, q)).To(Succeed())
}

func waitingContainer(reason, msg string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: runnerContainer, Image: "x", ImageID: "",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}
}

var _ = Describe("A run that cannot start", func() {
	var (
		ns    string
		clock *clocktesting.FakeClock
		r     *RunReconciler
	)
	BeforeEach(func() { ns, clock, r, _ = runSpecStart() })

	DescribeTable("fails at once when the API server refuses its pod, without ever scaling its app down",
		func(setup func(ns string), edit func(*vacuumv1alpha1.VacuumRun), wantMsg string) {
			app := newWorkload(ns, "Deployment", "app", 3)
			if setup != nil {
				setup(ns)
			}
			newRun(ns, "refused", "data", func(run *vacuumv1alpha1.VacuumRun) {
				quiesceDeployment(run)
				edit(run)
			})
			for range 4 {
				reconcileRun(r, ns, "refused")
			}
			run := getRun(ns, "refused")
			Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
			Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonPodRejected))
			Expect(run.Status.Message).To(ContainSubstring(wantMsg))
			Expect(replicasOf(app)).To(BeEquivalentTo(3), "the pod was refused by a dry run, before the app was scaled down")
			Expect(podsOf(ns, "refused")).To(BeEmpty())
			Expect(leaseExists(ns, "data")).To(BeFalse(), "the volume lock is released")
		},
		Entry("a node selector value that is not a label value (invalid)", nil, func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Runner.NodeSelector = map[string]string{"disk": "not a label value!"}
		}, "spec.nodeSelector"),
		Entry("resources whose request exceeds their limit (invalid)", nil, func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Runner.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			run.Spec.Runner.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		}, "must be less than or equal to cpu limit"),
		Entry("a ResourceQuota that allows no more pods (forbidden)", exhaustQuota, func(*vacuumv1alpha1.VacuumRun) {}, "exceeded quota: no-pods"),
	)

	It("fails at once when a retry's pod is forbidden by a quota filled meanwhile, and gives the app its replicas back", func() {
		app := newWorkload(ns, "Deployment", "app", 3)
		newRun(ns, "quota", "data", quiesceDeployment)
		pod := reconcileUntilPod(r, ns, "quota", 1)
		Expect(replicasOf(app)).To(BeZero())

		By("failing attempt 1 with a retried exit code once the namespace's pod quota is used up")
		exhaustQuota(ns)
		setPodTerminated(pod, 1, "Error", "")
		for range 4 {
			reconcileRun(r, ns, "quota")
		}
		run := getRun(ns, "quota")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonPodRejected))
		Expect(run.Status.Message).To(ContainSubstring("quota-2"))
		Expect(run.Status.Message).To(ContainSubstring("exceeded quota: no-pods"))
		Expect(run.Status.Attempts).To(BeEquivalentTo(1), "no second pod exists")
		Expect(replicasOf(app)).To(BeEquivalentTo(3), "the app is restored")
		Expect(leaseExists(ns, "data")).To(BeFalse(), "the volume lock is released")
	})

	It("fails at once when the pod is refused at creation, with no app to protect by a dry run", func() {
		newRun(ns, "invalid", "data", func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Runner.NodeSelector = map[string]string{"disk": "not a label value!"}
		})
		for range 4 {
			reconcileRun(r, ns, "invalid")
		}
		run := getRun(ns, "invalid")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonPodRejected))
		Expect(podsOf(ns, "invalid")).To(BeEmpty())
		Expect(leaseExists(ns, "data")).To(BeFalse())
	})

	DescribeTable("fails a pod that never starts after podStartTimeoutSeconds with PodNotStarted naming the cause, and restores the app",
		func(status func(*corev1.PodStatus), cause string) {
			app := newWorkload(ns, "Deployment", "app", 2)
			newRun(ns, "stuck", "data", func(run *vacuumv1alpha1.VacuumRun) {
				quiesceDeployment(run)
				run.Spec.PodStartTimeoutSeconds = ptr.To(int64(120))
			})
			pod := reconcileUntilPod(r, ns, "stuck", 1)
			Expect(replicasOf(app)).To(BeZero())
			setPodWaiting(pod, status)

			By("waiting, Pending with the cause, while the timeout has not passed")
			clock.Step(100 * time.Second)
			res := reconcileRun(r, ns, "stuck")
			run := getRun(ns, "stuck")
			Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunPending))
			Expect(run.Status.Message).To(ContainSubstring(cause))
			Expect(res.RequeueAfter).To(BeNumerically("<=", 20*time.Second), "woken up when the timeout passes")

			By("failing once it has passed, and giving the app its replicas back")
			clock.Step(21 * time.Second)
			reconcileRun(r, ns, "stuck")
			run = getRun(ns, "stuck")
			Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
			Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonPodNotStarted))
			Expect(run.Status.Message).To(ContainSubstring(cause))
			Expect(run.Status.Message).To(ContainSubstring("podStartTimeoutSeconds (120)"))
			for range 3 {
				reconcileRun(r, ns, "stuck")
			}
			Expect(replicasOf(app)).To(BeEquivalentTo(2))
			Expect(leaseExists(ns, "data")).To(BeFalse())
			Expect(livePods(ns)).To(BeZero(), "the pending pod is deleted")
		},
		Entry("an image that cannot be pulled", waitingContainer("ImagePullBackOff", `Back-off pulling image "typo/runner"`), "ImagePullBackOff"),
		Entry("an image that is not present with imagePullPolicy Never", waitingContainer("ErrImageNeverPull", "image not present"), "ErrImageNeverPull"),
		Entry("a pod that no node can take", func(s *corev1.PodStatus) {
			s.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "0/3 nodes are available: 3 Insufficient memory."}}
		}, "Unschedulable: 0/3 nodes are available"),
		Entry("a volume still attached elsewhere (Multi-Attach)", waitingContainer("ContainerCreating", ""), "ContainerCreating"),
	)

	It("waits for a missing claim without scaling its app down, and fails after podStartTimeoutSeconds", func() {
		app := newWorkload(ns, "Deployment", "app", 2)
		// No claim dta: the typo's claim does not exist.
		createRun(ns, "typo", vacuumv1alpha1.Target{PersistentVolumeClaim: "dta"}, func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.PodStartTimeoutSeconds = ptr.To(int64(60))
			quiesceDeployment(run)
		})
		for range 3 {
			reconcileRun(r, ns, "typo")
		}
		got := getRun(ns, "typo")
		Expect(got.Status.Phase).To(Equal(vacuumv1alpha1.RunPending))
		Expect(conditionReason(got.Status.Conditions, vacuumv1alpha1.ConditionProgressing)).To(Equal(vacuumv1alpha1.ReasonClaimNotFound))
		Expect(got.Status.Message).To(ContainSubstring("PersistentVolumeClaim dta"))
		Expect(replicasOf(app)).To(BeEquivalentTo(2), "the app is not scaled down for a claim that does not exist")

		clock.Step(61 * time.Second)
		reconcileRun(r, ns, "typo")
		reconcileRun(r, ns, "typo")
		got = getRun(ns, "typo")
		Expect(got.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(conditionReason(got.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonPodNotStarted))
		Expect(got.Status.Message).To(ContainSubstring("PersistentVolumeClaim dta"))
		Expect(replicasOf(app)).To(BeEquivalentTo(2))
		Expect(leaseExists(ns, "dta")).To(BeFalse())
		Expect(podsOf(ns, "typo")).To(BeEmpty())
	})

	It("defaults podStartTimeoutSeconds to 600 and passes allowCrashRecovery to the runner", func() {
		newRun(ns, "defaults", "data", func(run *vacuumv1alpha1.VacuumRun) { run.Spec.AllowCrashRecovery = true })
		run := getRun(ns, "defaults")
		Expect(run.Spec.PodStartTimeoutSeconds).To(HaveValue(BeEquivalentTo(600)))
		pod := reconcileUntilPod(r, ns, "defaults", 1)
		Expect(pod.Annotations[vacuumv1alpha1.AnnotationRunSpec]).To(ContainSubstring(`"allowCrashRecovery":true`),
			"the RunSpec the pod's spec file holds")

		var p vacuumv1alpha1.VacuumPolicy
		p.Namespace, p.Name = ns, "defaults"
		p.Spec.Target.PersistentVolumeClaim = "data"
		Expect(k8sClient.Create(suiteCtx, &p)).To(Succeed())
		Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(&p), &p)).To(Succeed())
		Expect(p.Spec.PodStartTimeoutSeconds).To(HaveValue(BeEquivalentTo(600)))
		Expect(p.Spec.AllowCrashRecovery).To(BeFalse())
	})
})
