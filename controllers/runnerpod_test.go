package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// The runner pod options of RunnerPodOptions: what a policy or run sets reaches the pod, the
// operator's label and annotation prefixes are refused by the API server, and a priority
// class is the operator admin's to allow.

// ensurePriorityClass creates a cluster PriorityClass once (the suite's apiserver runs the
// Priority admission plugin, which refuses a pod naming a class that does not exist).
func ensurePriorityClass(name string) {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 1000}
	if err := k8sClient.Create(suiteCtx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

// podOptions are one of each option users ask for.
func podOptions() vacuumv1alpha1.RunnerPodOptions {
	return vacuumv1alpha1.RunnerPodOptions{
		PriorityClassName: "vacuum-low",
		ImagePullSecrets:  []corev1.LocalObjectReference{{Name: "registry-pull"}},
		PodLabels:         map[string]string{"team": "orders", "sidecar.istio.io/inject": "false"},
		PodAnnotations:    map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "vacuum-runner"}},
		}},
	}
}

// expectOptionsOnPod checks that every option of podOptions is on the pod, beside the
// operator's own labels and annotation.
func expectOptionsOnPod(pod *corev1.Pod, run string) {
	want := podOptions()
	Expect(pod.Spec.PriorityClassName).To(Equal(want.PriorityClassName))
	Expect(pod.Spec.ImagePullSecrets).To(Equal(want.ImagePullSecrets))
	Expect(pod.Spec.TopologySpreadConstraints).To(Equal(want.TopologySpreadConstraints))
	Expect(pod.Labels).To(HaveKeyWithValue("team", "orders"))
	Expect(pod.Labels).To(HaveKeyWithValue("sidecar.istio.io/inject", "false"))
	Expect(pod.Labels).To(HaveKeyWithValue(vacuumv1alpha1.LabelRun, run), "the operator's labels stay")
	Expect(pod.Labels).To(HaveKeyWithValue(LabelManagedBy, ManagedBy))
	Expect(pod.Annotations).To(HaveKeyWithValue("cluster-autoscaler.kubernetes.io/safe-to-evict", "false"))
	Expect(pod.Annotations).To(HaveKey(vacuumv1alpha1.AnnotationRunSpec), "the operator's annotation stays")
}

var _ = Describe("Runner pod options", func() {
	var (
		ns    string
		clock *clocktesting.FakeClock
		r     *RunReconciler
		rec   *recorder
	)
	BeforeEach(func() {
		ns = newNamespace()
		clock = clocktesting.NewFakeClock(time.Now())
		r, rec = newRunReconciler(clock)
		r.AllowedPriorityClasses = []string{"vacuum-low"}
		ensurePriorityClass("vacuum-low")
	})

	It("puts a run's priority class, pull secrets, labels, annotations and spreading on its pod", func() {
		newRun(ns, "opts", "data", func(run *vacuumv1alpha1.VacuumRun) { run.Spec.Runner.RunnerPodOptions = podOptions() })
		expectOptionsOnPod(reconcileUntilPod(r, ns, "opts", 1), "opts")
	})

	It("puts a policy's options on the pod of the run it starts", func() {
		pr, _ := newPolicyReconciler(clock)
		newPolicy(ns, "opts", func(p *vacuumv1alpha1.VacuumPolicy) {
			p.Spec.Schedule = "0 3 1 1 *"
			p.Annotations = map[string]string{vacuumv1alpha1.AnnotationRunNow: "now"}
			p.Spec.Runner.RunnerPodOptions = podOptions()
		})
		reconcilePolicy(pr, ns, "opts")
		reconcilePolicy(pr, ns, "opts")
		names := runNames(ns)
		Expect(names).To(HaveLen(1))
		expectOptionsOnPod(reconcileUntilPod(r, ns, names[0], 1), names[0])
	})

	It("fails a run whose priority class the operator does not allow, with no pod and a reason naming it", func() {
		ensurePriorityClass("preempt-everyone")
		newRun(ns, "greedy", "data", func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Runner.PriorityClassName = "preempt-everyone"
		})
		for range 3 {
			reconcileRun(r, ns, "greedy")
		}
		run := getRun(ns, "greedy")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonPriorityClassNotAllowed))
		Expect(run.Status.Message).To(ContainSubstring(`runner.priorityClassName "preempt-everyone"`))
		Expect(run.Status.Message).To(ContainSubstring("--allowed-priority-classes"))
		Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonPriorityClassNotAllowed))
		Expect(podsOf(ns, "greedy")).To(BeEmpty())

		newRun(ns, "plain", "other", nil)
		Expect(reconcileUntilPod(r, ns, "plain", 1).Spec.PriorityClassName).To(BeEmpty(), "no class named, none set")
	})

	DescribeTable("refuses the operator's label and annotation prefixes on both kinds, naming the field",
		func(field, key, message string) {
			edit := func(spec map[string]any) {
				spec["runner"] = map[string]any{field: map[string]any{key: "x"}}
			}
			err := k8sClient.Create(suiteCtx, policyObject(ns, "bad", edit))
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "policy: %v", err)
			Expect(err.Error()).To(ContainSubstring(message))

			run := policyObject(ns, "bad", edit)
			run.SetKind("VacuumRun")
			err = k8sClient.Create(suiteCtx, run)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "run: %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("a vacuum.vacuumops.io/ label", "podLabels", "vacuum.vacuumops.io/run",
			"runner.podLabels must not use the vacuum.vacuumops.io/ or app.kubernetes.io/ key prefixes"),
		Entry("an app.kubernetes.io/ label", "podLabels", "app.kubernetes.io/managed-by",
			"runner.podLabels must not use the vacuum.vacuumops.io/ or app.kubernetes.io/ key prefixes"),
		Entry("a vacuum.vacuumops.io/ annotation", "podAnnotations", "vacuum.vacuumops.io/run-spec",
			"runner.podAnnotations must not use the vacuum.vacuumops.io/ or app.kubernetes.io/ key prefixes"),
		Entry("an app.kubernetes.io/ annotation", "podAnnotations", "app.kubernetes.io/name",
			"runner.podAnnotations must not use the vacuum.vacuumops.io/ or app.kubernetes.io/ key prefixes"),
	)

	It("accepts other label and annotation keys on both kinds", func() {
		edit := func(spec map[string]any) {
			spec["runner"] = map[string]any{
				"podLabels":      map[string]any{"team": "orders", "example.com/vacuum.vacuumops.io": "x"},
				"podAnnotations": map[string]any{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
			}
		}
		Expect(k8sClient.Create(suiteCtx, policyObject(ns, "ok", edit))).To(Succeed())
		run := policyObject(ns, "ok", edit)
		run.SetKind("VacuumRun")
		Expect(k8sClient.Create(suiteCtx, run)).To(Succeed())
	})
})
