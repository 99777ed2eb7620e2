package controllers

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// An upgrade in the middle of a run: the run was started by the manager version before the
// pinned runner endpoint, which kept the app's replicas in an annotation, made a token Secret
// without a certificate and a runner pod serving plain HTTP.

// legacyRun makes a run as the earlier manager leaves it once its first pod runs: the app
// "app" scaled from 3 to 0 with the 3 in the run's annotation, the volume locked, the
// Secret <run>-token holding only the token, the pod <run>-1 running, status Running.
func legacyRun(r *RunReconciler, ns, name string) *corev1.Pod {
	newWorkload(ns, "Deployment", "app", 0)
	run := newRun(ns, name, "data", func(run *vacuumv1alpha1.VacuumRun) {
		quiesceDeployment(run)
		run.Annotations = map[string]string{legacyQuiesceAnnotation: "3"}
		run.Finalizers = []string{vacuumv1alpha1.FinalizerRun}
	})
	lock, err := r.acquireVolumeLock(suiteCtx, run)
	Expect(err).NotTo(HaveOccurred())
	Expect(lock.held).To(BeTrue())

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-token",
		Labels: map[string]string{vacuumv1alpha1.LabelRun: name}},
		Data: map[string][]byte{tokenSecretField: []byte(runToken(testKey, run.UID))}}
	Expect(controllerutil.SetControllerReference(run, secret, scheme)).To(Succeed())
	Expect(k8sClient.Create(suiteCtx, secret)).To(Succeed())

	pod := testPod(ns, name+"-1", map[string]string{vacuumv1alpha1.LabelRun: name, LabelManagedBy: ManagedBy})
	pod.Spec.Containers[0].Name = runnerContainer
	pod.Spec.Containers[0].Args = []string{"run", "--spec", "{}", "--listen=$(POD_IP):8080", "--control-token-file", "/var/run/vacuum/token/token"}
	Expect(controllerutil.SetControllerReference(run, pod, scheme)).To(Succeed())
	Expect(k8sClient.Create(suiteCtx, pod)).To(Succeed())
	setPodRunning(pod, freshIP()) // nothing listens there: the manager must not need it

	run = getRun(ns, name)
	run.Status.Attempts = 1
	run.Status.PodName = pod.Name
	run.Status.StartTime = &metav1.Time{Time: time.Now()}
	run.Status.MarkRunning(run.Generation, "runner pod "+pod.Name+" is vacuuming (attempt 1)")
	Expect(k8sClient.Status().Update(suiteCtx, run)).To(Succeed())
	return getPod(ns, pod.Name)
}

var _ = Describe("A run started by the earlier manager version", func() {
	var (
		ns  string
		r   *RunReconciler
		rec *recorder
	)
	BeforeEach(func() {
		ns = newNamespace()
		r, rec = newRunReconciler(clocktesting.NewFakeClock(time.Now()))
	})

	app := func() *vacuumv1alpha1.QuiesceTarget { return &vacuumv1alpha1.QuiesceTarget{Kind: "Deployment", Name: "app"} }
	appReplicas := func() int32 {
		obj := workloadTypes[app().Kind]()
		obj.SetNamespace(ns)
		obj.SetName(app().Name)
		return replicasOf(obj)
	}

	It("stops its plain-HTTP runner, fails with ManagerUpgraded and gives the app the replicas the earlier manager recorded", func() {
		pod := legacyRun(r, ns, "old")
		for range 5 {
			reconcileRun(r, ns, "old")
		}
		run := getRun(ns, "old")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
		Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionFailed)).To(Equal(vacuumv1alpha1.ReasonManagerUpgraded))
		Expect(run.Status.Message).To(ContainSubstring("started by an earlier manager version"))
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, pod.Name), &corev1.Pod{}))).To(BeTrue(), "its pod is stopped")
		Expect(appReplicas()).To(BeEquivalentTo(3), "the count the earlier manager recorded is restored")
		Expect(run.Status.Quiesced).To(BeNil(), "the record goes once restored")
		Expect(run.Annotations).NotTo(HaveKey(legacyQuiesceAnnotation), "the annotation is read once, then dropped")
		Expect(leaseExists(ns, "data")).To(BeFalse(), "the volume lock is released")
		Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonManagerUpgraded))
	})

	It("judges an attempt that ended before the upgrade as usual, and restores the app", func() {
		pod := legacyRun(r, ns, "done")
		setPodTerminated(pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		for range 5 {
			reconcileRun(r, ns, "done")
		}
		run := getRun(ns, "done")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(appReplicas()).To(BeEquivalentTo(3))
		Expect(leaseExists(ns, "data")).To(BeFalse())
	})

	It("restores the app when the run is deleted right after the upgrade", func() {
		legacyRun(r, ns, "gone")
		Expect(k8sClient.Delete(suiteCtx, getRun(ns, "gone"))).To(Succeed())
		for range 5 {
			if _, err := r.Reconcile(suiteCtx, reconcileRequest(ns, "gone")); err != nil {
				Expect(apierrors.IsNotFound(err)).To(BeTrue())
			}
		}
		Expect(apierrors.IsNotFound(k8sClient.Get(suiteCtx, key(ns, "gone"), &vacuumv1alpha1.VacuumRun{}))).To(BeTrue())
		Expect(appReplicas()).To(BeEquivalentTo(3))
		Expect(leaseExists(ns, "data")).To(BeFalse())
	})

	It("never takes the annotation's count for a run this manager started", func() {
		newWorkload(ns, "Deployment", "app", 2)
		newRun(ns, "new", "data", func(run *vacuumv1alpha1.VacuumRun) {
			quiesceDeployment(run)
			run.Annotations = map[string]string{legacyQuiesceAnnotation: "1000"}
		})
		reconcileUntilPod(r, ns, "new", 1)
		run := getRun(ns, "new")
		Expect(run.Status.Quiesced).To(HaveValue(Equal(vacuumv1alpha1.QuiescedApp{Kind: "Deployment", Name: "app", Replicas: 2})))
		Expect(run.Annotations).To(HaveKey(legacyQuiesceAnnotation), "a user's annotation is neither read nor touched")
		Expect(rec.reasons()).NotTo(ContainElement(vacuumv1alpha1.ReasonManagerUpgraded))
	})
})
