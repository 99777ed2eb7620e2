package controllers

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// leaseReads is an APIReader counting its reads of Leases.
type leaseReads struct {
	client.Reader
	mu sync.Mutex
	n  int
}

func (l *leaseReads) Get(ctx context.Context, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*coordinationv1.Lease); ok {
		l.mu.Lock()
		l.n++
		l.mu.Unlock()
	}
	return l.Reader.Get(ctx, k, obj, opts...)
}

func (l *leaseReads) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

var _ = Describe("A new run", func() {
	It("makes its pod in its first reconcile: finalizer, volume Lease, token Secret and pod at once", func() {
		ns, _, r, _ := runSpecStart()
		newRun(ns, "quick", "data", nil)
		reconcileRun(r, ns, "quick")
		run := getRun(ns, "quick")
		Expect(run.Finalizers).To(ContainElement(vacuumv1alpha1.FinalizerRun))
		Expect(run.Status.TokenSecret).NotTo(BeNil())
		Expect(run.Status.Attempts).To(Equal(int32(1)))
		Expect(run.Status.PodName).To(Equal("quick-1"))
		pod := getPod(ns, "quick-1")
		Expect(metav1.IsControlledBy(pod, run)).To(BeTrue())
		var lease coordinationv1.Lease
		Expect(k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &lease)).To(Succeed())
		Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).To(Equal(string(run.UID)))
	})
})

var _ = Describe("A run's volume Lease", func() {
	It("is created unread by a fresh run, not read on each reconcile while held, renewed on time and released unread", func() {
		ns, clock, r, _ := runSpecStart()
		reads := &leaseReads{Reader: k8sClient}
		r.APIReader = reads
		newRun(ns, "held", "data", nil)
		reconcileRun(r, ns, "held")
		taken := reads.count()
		Expect(taken).To(BeZero(), "a fresh run creates the Lease without reading it first")
		var lease coordinationv1.Lease
		Expect(k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &lease)).To(Succeed())
		Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).To(Equal(string(getRun(ns, "held").UID)))
		renewed := lease.Spec.RenewTime.Time

		By("reconciling the pending run again and again without reading the Lease")
		for range 5 {
			clock.Step(time.Second)
			reconcileRun(r, ns, "held")
		}
		Expect(reads.count()).To(Equal(taken))
		Expect(k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &lease)).To(Succeed())
		Expect(lease.Spec.RenewTime.Time).To(BeTemporally("==", renewed), "not renewed before leaseRenewEvery")

		By("renewing it once leaseRenewEvery has passed, still without a read")
		clock.Step(leaseRenewEvery)
		reconcileRun(r, ns, "held")
		Expect(reads.count()).To(Equal(taken))
		Expect(k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &lease)).To(Succeed())
		Expect(lease.Spec.RenewTime.Time).To(BeTemporally(">", renewed))

		By("reading and retaking it when someone deleted it behind the manager's back")
		Expect(k8sClient.Delete(suiteCtx, &lease)).To(Succeed())
		clock.Step(leaseRenewEvery)
		reconcileRun(r, ns, "held")
		Expect(reads.count()).To(Equal(taken+1), "the renewal found the Lease gone; the next reconcile read and recreated it")
		var again coordinationv1.Lease
		Expect(k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &again)).To(Succeed())
		Expect(again.UID).NotTo(Equal(lease.UID))
		Expect(ptr.Deref(again.Spec.HolderIdentity, "")).To(Equal(string(getRun(ns, "held").UID)))

		By("releasing it at the run's end without reading it")
		before := reads.count()
		setPodTerminated(getPod(ns, "held-1"), 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		Eventually(func() error {
			reconcileRun(r, ns, "held")
			return k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &again)
		}).WithTimeout(20 * time.Second).Should(Satisfy(apierrors.IsNotFound))
		Expect(reads.count()).To(Equal(before))

		By("reconciling the ended run again without reading the Lease it released")
		for range 3 {
			clock.Step(time.Second)
			reconcileRun(r, ns, "held")
		}
		Expect(reads.count()).To(Equal(before))
	})

	It("is read again when it changed since the manager wrote it", func() {
		ns, clock, r, _ := runSpecStart()
		reads := &leaseReads{Reader: k8sClient}
		r.APIReader = reads
		newRun(ns, "edited", "data", nil)
		reconcileUntilPod(r, ns, "edited", 1)
		var lease coordinationv1.Lease
		Expect(k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &lease)).To(Succeed())
		lease.Labels["edited"] = "by-hand"
		Expect(k8sClient.Update(suiteCtx, &lease)).To(Succeed())
		taken := reads.count()

		clock.Step(leaseRenewEvery)
		reconcileRun(r, ns, "edited") // the renewal conflicts: the copy is dropped, the Lease read and renewed
		reconcileRun(r, ns, "edited") // the new copy serves
		Expect(reads.count()).To(Equal(taken + 1))
		Expect(k8sClient.Get(suiteCtx, key(ns, leaseName("data")), &lease)).To(Succeed())
		Expect(lease.Labels).To(HaveKeyWithValue("edited", "by-hand"))
		Expect(ptr.Deref(lease.Spec.HolderIdentity, "")).To(Equal(string(getRun(ns, "edited").UID)))
		Expect(lease.Spec.RenewTime.Time).To(BeTemporally("~", clock.Now(), time.Second))
	})
})
