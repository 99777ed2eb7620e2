package controllers

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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

// requestLog is a client that records each request it makes as "VERB Kind" ("PATCH
// VacuumRun/status" for a status patch), for specs that count what a reconcile costs.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) add(verb string, obj any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, fmt.Sprintf("%s %T", verb, obj))
}

// take returns the requests recorded since the last take.
func (l *requestLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.reqs
	l.reqs = nil
	return out
}

// loggedClient is an uncached client recording its requests in l.
func loggedClient(l *requestLog) client.WithWatch {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, o ...client.GetOption) error {
			l.add("GET", obj)
			return c.Get(ctx, k, obj, o...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, o ...client.ListOption) error {
			l.add("LIST", list)
			return c.List(ctx, list, o...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.CreateOption) error {
			l.add("CREATE", obj)
			return c.Create(ctx, obj, o...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.UpdateOption) error {
			l.add("UPDATE", obj)
			return c.Update(ctx, obj, o...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, o ...client.PatchOption) error {
			l.add("PATCH", obj)
			return c.Patch(ctx, obj, p, o...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.DeleteOption) error {
			l.add("DELETE", obj)
			return c.Delete(ctx, obj, o...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
			l.add("PATCH/"+sub, obj)
			return c.SubResource(sub).Patch(ctx, obj, p, o...)
		},
	})
}

var _ = Describe("A policy's run", func() {
	It("is born with the run finalizer, so its first reconcile goes from the run's read to its pod without a metadata patch", func() {
		ns, clock, pr, _ := policySpecStart()
		newPolicy(ns, "once", nil) // no schedule: it makes its one run at once
		reconcilePolicy(pr, ns, "once")
		name := getPolicy(ns, "once").OnceRunName()
		Expect(getRun(ns, name).Finalizers).To(ContainElement(vacuumv1alpha1.FinalizerRun),
			"the finalizer is on before any reconcile of the run makes a Lease, a Secret or a pod")

		log := &requestLog{}
		r, _ := newRunReconciler(clock)
		r.Client = loggedClient(log)
		r.APIReader = r.Client
		reconcileRun(r, ns, name)
		Expect(log.take()).To(ConsistOf(
			"GET *v1alpha1.VacuumRun",
			"CREATE *v1.Lease", "GET *v1.PersistentVolumeClaim", "CREATE *v1.Secret", // at once
			"GET *v1.Pod", "GET *v1.Pod", // cache reads in the manager: is the pod there already?
			"CREATE *v1.Pod",
			"PATCH/status *v1alpha1.VacuumRun", // attempt 1 and the token Secret its pod mounts, recorded together
		), "no finalizer patch, no Lease read, one write of each object")
		run := getRun(ns, name)
		Expect(run.Status.PodName).To(Equal(name + "-1"))
		Expect(run.Status.TokenSecret).NotTo(BeNil())
		Expect(getPod(ns, name+"-1").Spec.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", run.Status.TokenSecret.Name)))
	})
})

var _ = Describe("A policy that made a run", func() {
	It("writes nothing when the run's creation wakes it", func() {
		ns, clock, pr, _ := policySpecStart()
		newPolicy(ns, "once", nil)
		reconcilePolicy(pr, ns, "once")
		p := getPolicy(ns, "once")
		Expect(p.Status.LastRun).NotTo(BeNil())
		Expect(p.Status.LastRun.Name).To(Equal(p.OnceRunName()), "the new run is summed up as it is made")
		Expect(p.Status.LastRun.Phase).To(Equal(vacuumv1alpha1.RunPending), "a run not started yet is waiting to start")

		log := &requestLog{}
		pr.Client = loggedClient(log)
		clock.Step(time.Second)
		reconcilePolicy(pr, ns, "once")
		Expect(log.take()).To(ConsistOf("GET *v1alpha1.VacuumPolicy", "LIST *v1alpha1.VacuumRunList"),
			"no status patch: the creating reconcile wrote what this one would")

		By("writing nothing either once the run's first reconcile has marked it Pending")
		rr, _ := newRunReconciler(clock)
		reconcileRun(rr, ns, p.OnceRunName())
		Expect(getRun(ns, p.OnceRunName()).Status.Phase).To(Equal(vacuumv1alpha1.RunPending))
		reconcilePolicy(pr, ns, "once")
		Expect(log.take()).To(ConsistOf("GET *v1alpha1.VacuumPolicy", "LIST *v1alpha1.VacuumRunList"),
			"the run's Pending is the phase the policy wrote at its creation")
	})
})

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

	It("writes nothing on its next reconcile while its pod has not changed", func() {
		ns, clock, r, _ := runSpecStart()
		log := &requestLog{}
		r.Client = loggedClient(log)
		r.APIReader = r.Client
		newRun(ns, "quiet", "data", nil)
		reconcileRun(r, ns, "quiet")
		Expect(getRun(ns, "quiet").Status.Message).To(Equal("waiting for runner pod quiet-1 to start: not scheduled yet"))
		log.take()
		clock.Step(time.Second)
		reconcileRun(r, ns, "quiet")
		Expect(log.take()).To(ConsistOf("GET *v1alpha1.VacuumRun", "GET *v1.Pod"),
			"the pending message written with the pod is the one its first event would write")
	})

	It("leaves its new pod's passing waiting causes unwritten for a progress interval, then writes the cause that stays", func() {
		ns, clock, r, _ := runSpecStart()
		newRun(ns, "booting", "data", nil)
		pod := reconcileUntilPod(r, ns, "booting", 1)
		first := "waiting for runner pod booting-1 to start: not scheduled yet"
		Expect(getRun(ns, "booting").Status.Message).To(Equal(first))
		clock.SetTime(pod.CreationTimestamp.Time) // the manager's clock at the pod's creation

		log := &requestLog{}
		r.Client = loggedClient(log)
		r.APIReader = r.Client
		setPodWaiting(pod, waitingContainer("ContainerCreating", ""))
		res := reconcileRun(r, ns, "booting")
		Expect(log.take()).To(ConsistOf("GET *v1alpha1.VacuumRun", "GET *v1.Pod"), "no patch for a cause that may pass")
		Expect(getRun(ns, "booting").Status.Message).To(Equal(first))
		Expect(res.RequeueAfter).To(BeNumerically("<=", DefaultProgressInterval), "woken when the hold ends")

		clock.Step(DefaultProgressInterval)
		reconcileRun(r, ns, "booting")
		Expect(log.take()).To(ContainElement("PATCH/status *v1alpha1.VacuumRun"))
		Expect(getRun(ns, "booting").Status.Message).To(Equal("waiting for runner pod booting-1 to start: ContainerCreating"))
	})

	It("adopts the pod it made from the cache when a stale copy of it does not show the pod's record", func() {
		ns, _, r, _ := runSpecStart()
		newRun(ns, "stale", "data", nil)
		reconcileRun(r, ns, "stale")
		fresh := getRun(ns, "stale")
		Expect(fresh.Status.Attempts).To(BeEquivalentTo(1))
		By("showing the next reconcile the run as it was before the pod's record, as a lagging cache does")
		stale := fresh.DeepCopy()
		stale.Status.Attempts, stale.Status.PodName = 0, ""
		Expect(k8sClient.Status().Update(suiteCtx, stale)).To(Succeed())

		log := &requestLog{}
		r.Client = loggedClient(log)
		r.APIReader = r.Client
		reconcileRun(r, ns, "stale")
		reqs := log.take()
		Expect(reqs).NotTo(ContainElement("CREATE *v1.Pod"), "no creation the API server refuses, and no read after it")
		Expect(reqs).To(ContainElement("GET *v1.Pod")) // from the cache, in the manager
		run := getRun(ns, "stale")
		Expect(run.Status.Attempts).To(BeEquivalentTo(1))
		Expect(run.Status.PodName).To(Equal("stale-1"))
		Expect(podsOf(ns, "stale")).To(HaveLen(1))
	})

	It("writes its status three times over a life whose pod starts at once: pod with its token, start with figures, end", func() {
		ns, clock, r, _ := runSpecStart()
		log := &requestLog{}
		r.Client = loggedClient(log)
		r.APIReader = r.Client
		newRun(ns, "life", "data", func(run *vacuumv1alpha1.VacuumRun) {
			run.Finalizers = []string{vacuumv1alpha1.FinalizerRun} // as a policy makes it
		})
		reconcileRun(r, ns, "life")
		pod := getPod(ns, "life-1")
		clock.SetTime(pod.CreationTimestamp.Time)
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, "life").UID))
		defer runner.Close()
		By("playing the node: bound, ContainerCreating, running, each step a reconcile")
		setPodWaiting(pod, func(st *corev1.PodStatus) {})
		reconcileRun(r, ns, "life")
		setPodWaiting(pod, waitingContainer("ContainerCreating", ""))
		reconcileRun(r, ns, "life")
		clock.Step(time.Second)
		setPodRunning(pod, ip)
		reconcileRunAnswered(r, ns, "life")
		setPodTerminated(pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		reconcileRun(r, ns, "life")
		reconcileRun(r, ns, "life") // releases the Lease
		Expect(getRun(ns, "life").Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		patches := 0
		for _, req := range log.take() {
			if req == "PATCH/status *v1alpha1.VacuumRun" {
				patches++
			}
		}
		Expect(patches).To(Equal(3))
	})

	It("records its pod and the token Secret the pod mounts on a fresh copy when the run changed under its first reconcile", func() {
		ns, _, r, _ := runSpecStart()
		newRun(ns, "edited", "data", func(run *vacuumv1alpha1.VacuumRun) {
			run.Finalizers = []string{vacuumv1alpha1.FinalizerRun}
		})
		edited := false
		r.Client = interceptor.NewClient(apiClient(), interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.CreateOption) error {
				err := c.Create(ctx, obj, o...)
				if _, ok := obj.(*corev1.Pod); ok && err == nil && !edited {
					By("labelling the run by hand between its pod's creation and the pod's record")
					edited = true
					run := getRun(ns, "edited")
					run.Labels = map[string]string{"edited": "by-hand"}
					Expect(k8sClient.Update(ctx, run)).To(Succeed())
				}
				return err
			},
		})
		reconcileRun(r, ns, "edited")
		Expect(edited).To(BeTrue())
		run := getRun(ns, "edited")
		Expect(run.Labels).To(HaveKeyWithValue("edited", "by-hand"), "the user's edit stays")
		Expect(run.Status.Attempts).To(BeEquivalentTo(1))
		Expect(run.Status.PodName).To(Equal("edited-1"))
		Expect(run.Status.TokenSecret).NotTo(BeNil(), "recorded although the first patch conflicted")
		Expect(getPod(ns, "edited-1").Spec.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", run.Status.TokenSecret.Name)))
		Expect(tokenSecretsOf(ns, "edited")).To(ConsistOf(run.Status.TokenSecret.Name), "one Secret, the recorded one")
	})

	It("waits for its pod's record when a stale copy shows none, then deletes the token Secret it made if the pod it adopts mounts another", func() {
		ns, clock, r, _ := runSpecStart()
		newRun(ns, "lagging", "data", func(run *vacuumv1alpha1.VacuumRun) {
			run.Finalizers = []string{vacuumv1alpha1.FinalizerRun}
		})
		before := getRun(ns, "lagging") // no token, no attempt: what a lagging cache shows next
		reconcileRun(r, ns, "lagging")
		recorded := *getRun(ns, "lagging").Status.TokenSecret

		stale := interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, o ...client.GetOption) error {
				if run, ok := obj.(*vacuumv1alpha1.VacuumRun); ok && k.Name == "lagging" {
					before.DeepCopyInto(run)
					return nil
				}
				return c.Get(ctx, k, obj, o...)
			},
		}
		clock.SetTime(getPod(ns, "lagging-1").CreationTimestamp.Time)
		log := &requestLog{}
		r.Client = interceptor.NewClient(loggedClient(log), interceptor.Funcs{Get: stale.Get})
		res := reconcileRun(r, ns, "lagging")
		Expect(log.take()).To(ConsistOf("GET *v1.Pod"), "while the pod is new, no Secret: the record's own update wakes the run")
		Expect(res.RequeueAfter).To(BeNumerically(">", 0))

		By("going on once the pod is recordLagWait old, as after a manager died before the record")
		clock.Step(recordLagWait)
		_, err := r.Reconcile(suiteCtx, ctrl.Request{NamespacedName: key(ns, "lagging")})
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "the stale copy's record conflicts: %v", err)
		run := getRun(ns, "lagging")
		Expect(*run.Status.TokenSecret).To(Equal(recorded), "the record stays the one the pod mounts")
		Expect(run.Status.Attempts).To(BeEquivalentTo(1))
		Expect(podsOf(ns, "lagging")).To(HaveLen(1))
		Expect(tokenSecretsOf(ns, "lagging")).To(ConsistOf(recorded.Name), "the stale copy's Secret is deleted")
	})

	It("records its start and its first progress in one status patch", func() {
		ns, _, r, _ := runSpecStart()
		newRun(ns, "starting", "data", nil)
		pod := reconcileUntilPod(r, ns, "starting", 1)
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, "starting").UID))
		defer runner.Close()
		setPodRunning(pod, ip)

		log := &requestLog{}
		r.Client = loggedClient(log)
		r.APIReader = r.Client
		res := reconcileRun(r, ns, "starting")
		Expect(log.take()).To(ConsistOf("GET *v1alpha1.VacuumRun", "GET *v1.Pod"),
			"no patch while the first poll is in flight")
		Expect(res.RequeueAfter).To(BeNumerically(">", 0), "a requeue in case the poll's wake-up is lost")
		Expect(getRun(ns, "starting").Status.Phase).To(Equal(vacuumv1alpha1.RunPending))
		r.runners.wait()
		reconcileRun(r, ns, "starting")
		Expect(log.take()).To(ConsistOf("GET *v1alpha1.VacuumRun", "GET *v1.Pod", "PATCH/status *v1alpha1.VacuumRun"))
		run := getRun(ns, "starting")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunRunning))
		Expect(run.Status.StartTime).NotTo(BeNil())
		Expect(run.Status.Progress).To(Equal("63%"), "the golden progress, in the same patch as the start")
	})

	It("records its start when its first poll fails, without figures", func() {
		ns, _, r, _ := runSpecStart()
		newRun(ns, "silent", "data", nil)
		pod := reconcileUntilPod(r, ns, "silent", 1)
		setPodRunning(pod, freshIP()) // nothing listens there: the poll is refused
		reconcileRun(r, ns, "silent")
		r.runners.wait()
		reconcileRun(r, ns, "silent")
		run := getRun(ns, "silent")
		Expect(run.Status.Phase).To(Equal(vacuumv1alpha1.RunRunning))
		Expect(run.Status.StartTime).NotTo(BeNil())
		Expect(run.Status.Progress).To(BeEmpty())
	})

	It("makes and records its token Secret while its volume is busy, and its pod mounts that Secret once the volume is free", func() {
		ns, _, r, _ := runSpecStart()
		newRun(ns, "holder", "shared", nil)
		reconcileRun(r, ns, "holder")
		newRun(ns, "waiter", "shared", nil)
		reconcileRun(r, ns, "waiter")
		waiter := getRun(ns, "waiter")
		Expect(conditionReason(waiter.Status.Conditions, vacuumv1alpha1.ConditionProgressing)).To(Equal(vacuumv1alpha1.ReasonVolumeBusy))
		Expect(waiter.Status.TokenSecret).NotTo(BeNil(), "made beside the Lease's creation, and recorded")
		Expect(podsOf(ns, "waiter")).To(BeEmpty(), "no pod without the volume")
		recorded := *waiter.Status.TokenSecret

		setPodTerminated(getPod(ns, "holder-1"), 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		Eventually(func() []corev1.Pod {
			reconcileRun(r, ns, "holder")
			reconcileRun(r, ns, "waiter")
			return podsOf(ns, "waiter")
		}).WithTimeout(20 * time.Second).Should(HaveLen(1))
		Expect(*getRun(ns, "waiter").Status.TokenSecret).To(Equal(recorded), "no second Secret")
		Expect(podsOf(ns, "waiter")[0].Spec.Volumes).To(ContainElement(HaveField("VolumeSource.Secret.SecretName", recorded.Name)))
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

// tokenSecretsOf names the Secrets labelled as the run's that are not being deleted.
func tokenSecretsOf(ns, run string) []string {
	var list corev1.SecretList
	Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(ns), client.MatchingLabels{vacuumv1alpha1.LabelRun: run})).To(Succeed())
	var names []string
	for _, s := range list.Items {
		if s.DeletionTimestamp.IsZero() {
			names = append(names, s.Name)
		}
	}
	return names
}

// apiClient is an uncached client of the suite's API server, for interceptors to wrap.
func apiClient() client.WithWatch {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}
