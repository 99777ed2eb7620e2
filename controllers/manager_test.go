package controllers

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// managerOptions configure a test manager; the zero value is cmd/manager's setup with
// leader election off.
type managerOptions struct {
	progressInterval time.Duration
	// leaderElectionID turns leader election on, with short leases, in leaderElectionNS.
	leaderElectionID string
	leaderElectionNS string
	// watchNamespaces restricts the manager to these namespaces (--watch-namespaces).
	watchNamespaces []string
}

// testManager is one running manager: its own cache, client, work queues, events and
// metrics registry.
type testManager struct {
	mgr  ctrl.Manager
	rec  *recorder
	reg  *prometheus.Registry
	stop func()
	// live counts the run controller's uncached pod lists, by label selector.
	live *liveLists
}

// liveLists is the run controller's APIReader, counting its pod lists.
type liveLists struct {
	client.Reader
	mu sync.Mutex
	n  map[string]int
}

func (l *liveLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		o := (&client.ListOptions{}).ApplyOptions(opts)
		l.mu.Lock()
		l.n[o.LabelSelector.String()]++
		l.mu.Unlock()
	}
	return l.Reader.List(ctx, list, opts...)
}

// of is how many pod lists of the run labelled run were read live.
func (l *liveLists) of(run string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[vacuumv1alpha1.LabelRun+"="+run]
}

// runManager starts both controllers in a real manager (cached client, watches, work queue),
// configured as cmd/manager configures them.
func runManager(o managerOptions) *testManager {
	opts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		Cache:                  CacheOptions(o.watchNamespaces),
	}
	if o.leaderElectionID != "" {
		// Short leases so a takeover fits in a test, with margins for a loaded machine: a
		// leader that cannot renew within RenewDeadline stops and fails the test.
		opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace = true, o.leaderElectionID, o.leaderElectionNS
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = ptr.To(6*time.Second), ptr.To(4*time.Second), ptr.To(500*time.Millisecond)
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	m := &testManager{mgr: mgr, rec: &recorder{}, reg: prometheus.NewRegistry(),
		live: &liveLists{Reader: mgr.GetAPIReader(), n: map[string]int{}}}
	metrics := NewMetrics(m.reg)
	Expect((&PolicyReconciler{Client: mgr.GetClient(), Scheme: scheme, Recorder: m.rec, Metrics: metrics}).SetupWithManager(mgr)).To(Succeed())
	Expect((&RunReconciler{
		Client: mgr.GetClient(), APIReader: m.live, Scheme: scheme, Recorder: m.rec, Key: testKey,
		RunnerImage: "vacuum-operator:test", ProgressInterval: o.progressInterval,
		Metrics: metrics,
	}).SetupWithManager(mgr)).To(Succeed())
	ctx, cancel := context.WithCancel(suiteCtx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	var once sync.Once
	m.stop = func() { once.Do(func() { cancel(); <-done }) }
	return m
}

// startManager runs a manager with leader election off and returns its stop function.
func startManager(progressInterval time.Duration) context.CancelFunc {
	return runManager(managerOptions{progressInterval: progressInterval}).stop
}

var _ = Describe("The manager", Ordered, func() {
	It("takes a policy to a succeeded run through watches alone, with progress polled on its interval", func() {
		stop := startManager(500 * time.Millisecond)
		defer stop()
		ns := newNamespace()
		newPolicy(ns, "wired", nil)

		var pod *corev1.Pod
		Eventually(func() []corev1.Pod { return podsOf(ns, "wired-once") }).WithTimeout(20 * time.Second).Should(HaveLen(1))
		pod = &podsOf(ns, "wired-once")[0]
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, "wired-once").UID))
		defer runner.Close()
		setPodRunning(pod, ip)
		Eventually(func() string { return getRun(ns, "wired-once").Status.VacuumPhase }).
			WithTimeout(10 * time.Second).Should(Equal("vacuuming indexes"))

		setPodTerminated(pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		Eventually(func() vacuumv1alpha1.RunPhase { return getRun(ns, "wired-once").Status.Phase }).
			WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))
		Eventually(func() vacuumv1alpha1.RunPhase {
			p := getPolicy(ns, "wired")
			if p.Status.LastRun == nil {
				return ""
			}
			return p.Status.LastRun.Phase
		}).WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(getPolicy(ns, "wired").Status.LastSuccessfulTime).NotTo(BeNil())
	})

	It("finds each policy's runs and an ended run's pods in its cache by their controller", func() {
		m := runManager(managerOptions{progressInterval: 500 * time.Millisecond})
		defer m.stop()
		ns := newNamespace()
		newPolicy(ns, "a", nil)
		newPolicy(ns, "b", func(p *vacuumv1alpha1.VacuumPolicy) { p.Spec.Target.PersistentVolumeClaim = "data-b" })
		Eventually(func() int { return len(podsOf(ns, "a-once")) + len(podsOf(ns, "b-once")) }).WithTimeout(20 * time.Second).Should(Equal(2))
		Eventually(func() [][]string {
			return [][]string{getPolicy(ns, "a").Status.Active, getPolicy(ns, "b").Status.Active}
		}).
			WithTimeout(10*time.Second).Should(Equal([][]string{{"a-once"}, {"b-once"}}), "each policy counts its own run only")

		By("ending a's run, then deleting it by its TTL: every read of its pods after its end is cached")
		setPodTerminated(&podsOf(ns, "a-once")[0], 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		Eventually(func() vacuumv1alpha1.RunPhase { return getRun(ns, "a-once").Status.Phase }).
			WithTimeout(10 * time.Second).Should(Equal(vacuumv1alpha1.RunSucceeded))
		ended := m.live.of("a-once")
		run := getRun(ns, "a-once")
		base := run.DeepCopy()
		run.Spec.TTLSecondsAfterFinished = ptr.To(int32(0))
		Expect(k8sClient.Patch(suiteCtx, run, client.MergeFrom(base))).To(Succeed())
		Eventually(func() bool {
			err := k8sClient.Get(suiteCtx, key(ns, "a-once"), &vacuumv1alpha1.VacuumRun{})
			return apierrors.IsNotFound(err)
		}).WithTimeout(10 * time.Second).Should(BeTrue())
		Expect(podsOf(ns, "a-once")).To(BeEmpty(), "the finalizer deleted the pod it found in the cache")
		Expect(m.live.of("a-once")).To(Equal(ended), "no live pod list once the run had ended")
	})
})
