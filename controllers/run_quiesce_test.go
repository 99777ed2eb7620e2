package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// newWorkload creates the app holding a volume: a Deployment or a StatefulSet with replicas.
func newWorkload(ns, kind, name string, replicas int32) client.Object {
	labels := map[string]string{"app": name}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db"}}},
	}
	var obj client.Object
	switch kind {
	case "StatefulSet":
		obj = &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.StatefulSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: template},
		}
	default:
		obj = &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: template},
		}
	}
	Expect(k8sClient.Create(suiteCtx, obj)).To(Succeed())
	return obj
}

// replicasOf reads the workload's desired replicas through its scale subresource.
func replicasOf(obj client.Object) int32 {
	var scale autoscalingv1.Scale
	Expect(k8sClient.SubResource("scale").Get(suiteCtx, obj, &scale)).To(Succeed())
	return scale.Spec.Replicas
}

// playWorkloadController stands in for the controller-manager (envtest runs none): the
// app's pods exist while its replicas are above 0 and are deleted once they hit 0.
func playWorkloadController(obj client.Object, pods []*corev1.Pod) {
	if replicasOf(obj) > 0 {
		return
	}
	for _, p := range pods {
		Expect(client.IgnoreNotFound(k8sClient.Delete(suiteCtx, p, client.GracePeriodSeconds(0)))).To(Succeed())
	}
}

var _ = Describe("Quiesce", func() {
	DescribeTable("scales the app to 0 through its scale subresource, waits for its pods to go, and restores it after the run, even from restarted managers",
		func(kind string) {
			ns := newNamespace()
			clock := clocktesting.NewFakeClock(time.Now())
			r, rec := newRunReconciler(clock)
			app := newWorkload(ns, kind, "orders-db", 3)
			var appPods []*corev1.Pod
			for i := range 3 {
				p := testPod(ns, fmt.Sprintf("orders-db-%d", i), map[string]string{"app": "orders-db"})
				Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
				appPods = append(appPods, p)
			}
			newRun(ns, "quiet", "data", func(run *vacuumv1alpha1.VacuumRun) {
				run.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: kind, Name: "orders-db"}
			})

			By("recording the replica count in the run's status, then scaling the app to 0")
			reconcileRun(r, ns, "quiet") // finalizer
			reconcileRun(r, ns, "quiet") // lock, token Secret
			reconcileRun(r, ns, "quiet") // dry-run pod, record, scale
			Expect(getRun(ns, "quiet").Status.Quiesced).To(HaveValue(Equal(vacuumv1alpha1.QuiescedApp{Kind: kind, Name: "orders-db", Replicas: 3})))
			Expect(replicasOf(app)).To(BeZero())
			Expect(rec.reasons()).To(ContainElement(vacuumv1alpha1.ReasonQuiescing))

			By("waiting, without a runner pod, while the app's pods still run")
			reconcileRun(r, ns, "quiet")
			Expect(podsOf(ns, "quiet")).To(BeEmpty())
			run := getRun(ns, "quiet")
			Expect(conditionReason(run.Status.Conditions, vacuumv1alpha1.ConditionProgressing)).To(Equal(vacuumv1alpha1.ReasonQuiescing))
			Expect(run.Status.Message).To(ContainSubstring("waiting for 3 pods"))

			By("starting the runner from a restarted manager once the app's pods are gone")
			playWorkloadController(app, appPods)
			second, _ := newRunReconciler(clock)
			pod := reconcileUntilPod(second, ns, "quiet", 1)
			Expect(getRun(ns, "quiet").Status.Quiesced).To(HaveValue(HaveField("Replicas", BeEquivalentTo(3))),
				"the count recorded before the restart is kept, not re-read from the scaled-down app")

			By("restoring the replicas after the run, from another manager that restarted in between")
			setPodTerminated(pod, 4, "Error", "")
			third, _ := newRunReconciler(clock)
			reconcileRun(third, ns, "quiet")
			reconcileRun(third, ns, "quiet")
			run = getRun(ns, "quiet")
			Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunFailed))
			Expect(replicasOf(app)).To(BeEquivalentTo(3))
			Expect(run.Status.Quiesced).To(BeNil())

			By("leaving the workload object itself untouched but for its replicas")
			fresh, ok := app.DeepCopyObject().(client.Object)
			Expect(ok).To(BeTrue())
			Expect(k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(app), fresh)).To(Succeed())
			Expect(fresh.GetAnnotations()).NotTo(HaveKey(ContainSubstring("vacuum.vacuumops.io")))
		},
		Entry("a StatefulSet", "StatefulSet"),
		Entry("a Deployment", "Deployment"),
	)

	It("restores the count recorded before a crash that came before the scale-down", func() {
		ns := newNamespace()
		clock := clocktesting.NewFakeClock(time.Now())
		r, _ := newRunReconciler(clock)
		app := newWorkload(ns, "Deployment", "web", 2)
		// The previous manager recorded 2 on the run and died before scaling the app.
		newRun(ns, "crashed", "data", func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: "Deployment", Name: "web"}
		})
		reconcileRun(r, ns, "crashed") // finalizer
		crashed := getRun(ns, "crashed")
		base := crashed.DeepCopy()
		crashed.Status.Quiesced = &vacuumv1alpha1.QuiescedApp{Kind: "Deployment", Name: "web", Replicas: 2}
		Expect(k8sClient.Status().Patch(suiteCtx, crashed, clientMergeFrom(base))).To(Succeed())
		pod := reconcileUntilPod(r, ns, "crashed", 1)
		Expect(replicasOf(app)).To(BeZero())
		setPodTerminated(pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		reconcileRun(r, ns, "crashed")
		reconcileRun(r, ns, "crashed")
		Expect(getRun(ns, "crashed").Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(replicasOf(app)).To(BeEquivalentTo(2))
	})

	It("waits while another run holds the same app quiesced", func() {
		ns := newNamespace()
		clock := clocktesting.NewFakeClock(time.Now())
		r, _ := newRunReconciler(clock)
		app := newWorkload(ns, "StatefulSet", "shared-db", 2)
		quiesceIt := func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: "StatefulSet", Name: "shared-db"}
		}
		newRun(ns, "first", "data-a", quiesceIt)
		first := reconcileUntilPod(r, ns, "first", 1)
		newRun(ns, "second", "data-b", quiesceIt)
		reconcileRun(r, ns, "second") // finalizer
		reconcileRun(r, ns, "second") // lock, token Secret
		reconcileRun(r, ns, "second") // waits for the other run
		Expect(podsOf(ns, "second")).To(BeEmpty())
		Expect(getRun(ns, "second").Status.Quiesced).To(BeNil())
		Expect(getRun(ns, "second").Status.Message).To(ContainSubstring("quiesced by run first"))

		setPodTerminated(first, 0, "Completed", "")
		reconcileRun(r, ns, "first")
		reconcileRun(r, ns, "first")
		Expect(replicasOf(app)).To(BeEquivalentTo(2))
		reconcileRun(r, ns, "second")
		Expect(getRun(ns, "second").Status.Quiesced).To(HaveValue(HaveField("Replicas", BeEquivalentTo(2))))
		Expect(replicasOf(app)).To(BeZero())
	})
	It("asks the API server only for the runs holding that app, however many runs the namespace keeps", func() {
		ns := newNamespace()
		clock := clocktesting.NewFakeClock(time.Now())
		r, _ := newRunReconciler(clock)
		lists := &runLists{Reader: r.APIReader}
		r.APIReader = lists
		newWorkload(ns, "StatefulSet", "shared-db", 2)
		for i := range 12 { // the namespace's history: runs that quiesce nothing
			newRun(ns, fmt.Sprintf("old-%d", i), "data-old", nil)
		}
		for i := range 3 { // runs holding another app of the namespace
			recordQuiesced(newRun(ns, fmt.Sprintf("other-%d", i), fmt.Sprintf("data-other-%d", i), nil),
				vacuumv1alpha1.QuiescedApp{Kind: "StatefulSet", Name: "other-db", Replicas: 1})
		}
		recordQuiesced(newRun(ns, "first", "data-a", nil),
			vacuumv1alpha1.QuiescedApp{Kind: "StatefulSet", Name: "shared-db", Replicas: 2})
		newRun(ns, "second", "data-b", func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: "StatefulSet", Name: "shared-db"}
		})

		for range 3 {
			reconcileRun(r, ns, "second")
		}
		Expect(getRun(ns, "second").Status.Message).To(ContainSubstring("quiesced by run first"))
		Expect(podsOf(ns, "second")).To(BeEmpty())
		Expect(lists.sizes()).NotTo(BeEmpty())
		Expect(lists.sizes()).To(HaveEach(1), "each check reads the one holder, not the namespace's 17 runs")
	})

	It("lists every run of the namespace when the API server refuses the field selector, as Kubernetes 1.30 does", func() {
		ns := newNamespace()
		clock := clocktesting.NewFakeClock(time.Now())
		r, _ := newRunReconciler(clock)
		lists := &runLists{Reader: r.APIReader, refuseFields: true}
		r.APIReader = lists
		newWorkload(ns, "Deployment", "web", 1)
		recordQuiesced(newRun(ns, "first", "data-a", nil), vacuumv1alpha1.QuiescedApp{Kind: "Deployment", Name: "web", Replicas: 1})
		newRun(ns, "second", "data-b", func(run *vacuumv1alpha1.VacuumRun) {
			run.Spec.Target.Quiesce = &vacuumv1alpha1.QuiesceTarget{Kind: "Deployment", Name: "web"}
		})
		for range 3 {
			reconcileRun(r, ns, "second")
		}
		Expect(getRun(ns, "second").Status.Message).To(ContainSubstring("quiesced by run first"))
		Expect(lists.refused()).To(Equal(1), "refused once, then never asked again")
		Expect(lists.sizes()).To(HaveEach(2), "each check reads both runs of the namespace")
	})
})

// recordQuiesced writes a count in a run's status, as the run's own reconcile records it
// before scaling the app down.
func recordQuiesced(run *vacuumv1alpha1.VacuumRun, app vacuumv1alpha1.QuiescedApp) {
	base := run.DeepCopy()
	run.Status.Quiesced = &app
	Expect(k8sClient.Status().Patch(suiteCtx, run, clientMergeFrom(base))).To(Succeed())
}

// runLists is an APIReader recording how many runs each of its lists of VacuumRuns
// returned; with refuseFields it answers a list with a field selector as an API server
// that does not know the field does (400 Bad Request).
type runLists struct {
	client.Reader
	refuseFields bool
	mu           sync.Mutex
	n            []int
	refusals     int
}

func (l *runLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	runs, ok := list.(*vacuumv1alpha1.VacuumRunList)
	if !ok {
		return l.Reader.List(ctx, list, opts...)
	}
	if l.refuseFields && (&client.ListOptions{}).ApplyOptions(opts).FieldSelector != nil {
		l.mu.Lock()
		l.refusals++
		l.mu.Unlock()
		return apierrors.NewBadRequest(`Unable to find "vacuum.vacuumops.io/v1alpha1, Resource=vacuumruns" that match label selector "", field selector "status.quiesced.name=web": field label not supported: status.quiesced.name`)
	}
	if err := l.Reader.List(ctx, runs, opts...); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n = append(l.n, len(runs.Items))
	return nil
}

func (l *runLists) sizes() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.n)
}

func (l *runLists) refused() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refusals
}
