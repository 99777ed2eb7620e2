package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

func newStatefulSet(ns, name string, replicas int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}},
			},
		},
	}
	Expect(k8sClient.Create(suiteCtx, sts)).To(Succeed())
	return sts
}

func getStatefulSet(ns, name string) *appsv1.StatefulSet {
	var sts appsv1.StatefulSet
	Expect(k8sClient.Get(suiteCtx, key(ns, name), &sts)).To(Succeed())
	return &sts
}

var _ = Describe("Quiesce", func() {
	It("scales the app to 0, waits for its pods to go, and restores it after the run, even from a restarted manager", func() {
		ns := newNamespace()
		clock := clocktesting.NewFakeClock(time.Now())
		r, _ := newRunReconciler(clock)
		newStatefulSet(ns, "orders-db", 3)
		appPod := testPod(ns, "orders-db-0", map[string]string{"app": "orders-db"})
		Expect(k8sClient.Create(suiteCtx, appPod)).To(Succeed())
		newRun(ns, "quiet", "data", func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: "StatefulSet", Name: "orders-db"}
		})

		By("scaling the StatefulSet to 0 and recording its replicas before anything else")
		reconcileRun(r, ns, "quiet")
		reconcileRun(r, ns, "quiet")
		sts := getStatefulSet(ns, "orders-db")
		Expect(*sts.Spec.Replicas).To(BeZero())
		Expect(sts.Annotations).To(HaveKeyWithValue(vacuumv1alpha1.AnnotationRestoreReplicas, "3"))
		Expect(sts.Annotations).To(HaveKeyWithValue(vacuumv1alpha1.AnnotationQuiescedBy, "quiet"))

		By("waiting while the app's pods still run")
		reconcileRun(r, ns, "quiet")
		Expect(podsOf(ns, "quiet")).To(BeEmpty())
		run := getRun(ns, "quiet")
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionProgressing)).To(Equal(vacuumv1alpha1.ReasonQuiescing))

		By("starting the runner once they are gone")
		Expect(k8sClient.Delete(suiteCtx, appPod)).To(Succeed())
		pod := reconcileUntilPod(r, ns, "quiet", 1)

		By("restoring the replicas after the run, from a manager that restarted in between")
		setPodTerminated(pod, 4, "Error", "")
		restarted, _ := newRunReconciler(clock)
		reconcileRun(restarted, ns, "quiet")
		reconcileRun(restarted, ns, "quiet")
		Expect(getRun(ns, "quiet").Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		sts = getStatefulSet(ns, "orders-db")
		Expect(*sts.Spec.Replicas).To(BeEquivalentTo(3))
		Expect(sts.Annotations).NotTo(HaveKey(vacuumv1alpha1.AnnotationRestoreReplicas))
		Expect(sts.Annotations).NotTo(HaveKey(vacuumv1alpha1.AnnotationQuiescedBy))
	})
})
