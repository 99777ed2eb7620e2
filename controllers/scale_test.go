package controllers

import (
	"flag"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// A big cluster, and runners that do not answer: the manager's memory does not grow with
// pods that are not its own, and one stuck runner pod does not hold up the other runs.

// unrelatedPods is how many pods the operator did not make the heap spec creates. The
// issue's figure is 10,000 (bound 10 MiB, about 90 s here); make test runs 2,000 with the
// same bound per pod, which is far below what caching them would cost (see the spec).
var unrelatedPods = flag.Int("scale.pods", 2000, "unrelated pods of the manager heap spec (the full figure: 10000)")

// heapPerUnrelatedPod is the heap growth allowed per unrelated pod: 10 MiB for 10,000.
const heapPerUnrelatedPod = (10 << 20) / 10000

// heapInUse is the bytes of live objects in the test process's heap after a full
// collection (the manager under test runs in this process). It is HeapAlloc, not
// HeapInuse: the spans that creating thousands of pods leaves partly used count in
// HeapInuse (a CI run measured +2.0 MiB that way against the 2.0 MiB bound), though
// nothing holds the pods.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// unrelatedPod is an application pod of the shape a cluster has thousands of: labels, a
// few environment variables, resources; with no node, it never schedules in envtest.
func unrelatedPod(ns string, i int) *corev1.Pod {
	env := make([]corev1.EnvVar, 8)
	for j := range env {
		env[j] = corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-%d-of-pod-%d", j, i)}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%05d", i),
			Labels: map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "5d9c7b8f6"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "web", Image: "registry.example/web:1.2.3", Env: env,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
		}}},
	}
}

// createPods creates n unrelated pods with a few clients at once.
func createPods(ns string, n int) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := range next {
				Expect(k8sClient.Create(suiteCtx, unrelatedPod(ns, i))).To(Succeed())
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// silentRunner accepts connections at ip's control port and never answers them (not even the
// TLS handshake), as a runner pod behind a stalled network, or an image that accepts and
// stalls, does; accepted counts the connections it took, so a spec can tell that the
// manager dialed it.
func silentRunner(ip string) (stop func(), accepted func() int) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(runnerwire.ControlPort)))
	Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	stop = func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	accepted = func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
	return stop, accepted
}

var _ = Describe("The manager at scale", Ordered, func() {
	It("caches no pod without the operator's label, and its heap grows by less than 1 KiB per unrelated pod (10 MiB for 10,000)", func(ctx SpecContext) {
		n := *unrelatedPods
		ns := newNamespace()
		m := runManager(managerOptions{progressInterval: time.Second})
		defer m.stop()
		// The pods are left in their namespace for the suite's API server to take with it:
		// deleting them took as long as making them, inside the spec's timeout (which it
		// exceeded at load 28), and no later spec lists pods outside its own namespace.
		cached := m.mgr.GetCache()
		Expect(cached.WaitForCacheSync(ctx)).To(BeTrue())

		By("seeing a pod with the operator's label, and not one without")
		mine := testPod(ns, "mine", map[string]string{LabelManagedBy: ManagedBy})
		Expect(k8sClient.Create(suiteCtx, mine)).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, testPod(ns, "theirs", map[string]string{"app": "web"}))).To(Succeed())
		cachedNames := func() []string {
			var pods corev1.PodList
			Expect(cached.List(suiteCtx, &pods, client.InNamespace(ns))).To(Succeed())
			var names []string
			for _, p := range pods.Items {
				names = append(names, p.Name)
			}
			return names
		}
		Eventually(cachedNames).WithTimeout(10 * time.Second).Should(ConsistOf("mine"))
		before := heapInUse()

		By(fmt.Sprintf("creating %d pods the operator did not make", n))
		start := time.Now()
		createPods(ns, n)
		created := time.Since(start)
		// Watch events arrive in order: once the cache has this pod, it has been told of all
		// the pods made before it, and would hold them were it not restricted.
		Expect(k8sClient.Create(suiteCtx, testPod(ns, "mine-after", map[string]string{LabelManagedBy: ManagedBy}))).To(Succeed())
		Eventually(cachedNames).WithTimeout(30 * time.Second).Should(ContainElement("mine-after"))
		after := heapInUse()
		growth := int64(after) - int64(before)
		limit := int64(n) * heapPerUnrelatedPod
		GinkgoWriter.Printf("%d pods created in %s; heap in use after GC %d -> %d bytes (%+.1f MiB, limit %.1f MiB)\n",
			n, created.Round(time.Millisecond), before, after, float64(growth)/(1<<20), float64(limit)/(1<<20))
		AddReportEntry(fmt.Sprintf("heap growth for %d unrelated pods (MiB)", n), fmt.Sprintf("%.1f", float64(growth)/(1<<20)))
		// A cache holding these pods grows by about 5.5 KiB for each: with the label restriction
		// removed from CacheOptions (and the first check loosened) this spec measured +10.8 MiB
		// of live heap for 2,000, five times the limit; with it, +0.4 MiB.
		Expect(growth).To(BeNumerically("<", limit), "the manager's heap grew by %d bytes", growth)
		Expect(cachedNames()).To(ConsistOf("mine", "mine-after"))
	}, SpecTimeout(time.Duration(*unrelatedPods)*25*time.Millisecond+45*time.Second))

	It("watches only the namespaces it is given", func(ctx SpecContext) {
		watched, other := newNamespace(), newNamespace()
		m := runManager(managerOptions{progressInterval: time.Second, watchNamespaces: []string{watched}})
		defer m.stop()
		newPolicy(watched, "here", nil)
		newPolicy(other, "there", nil)
		Eventually(func() []corev1.Pod { return podsOf(watched, "here-once") }).WithTimeout(20 * time.Second).Should(HaveLen(1))
		Consistently(func() []string { return runNames(other) }).WithTimeout(2*time.Second).Should(BeEmpty(),
			"a policy outside the watched namespaces is left alone")
	}, SpecTimeout(60*time.Second))

	It("keeps other runs progressing and restoring their apps on time while runner pods never answer", func(ctx SpecContext) {
		ns := newNamespace()
		m := runManager(managerOptions{progressInterval: 300 * time.Millisecond})
		defer m.stop()

		By("starting four runs whose runner pods accept connections and never reply, with a throttle to push")
		var dialed []func() int
		for i := range 4 {
			name := fmt.Sprintf("stuck-%d", i)
			newRun(ns, name, name, nil)
			Eventually(func() []corev1.Pod { return podsOf(ns, name) }).WithTimeout(20 * time.Second).Should(HaveLen(1))
			ip := freshIP()
			stop, accepted := silentRunner(ip)
			defer stop()
			dialed = append(dialed, accepted)
			pod := podsOf(ns, name)[0]
			setPodRunning(&pod, ip)
			patchRunThrottle(ns, name, `{"costLimit":7}`)
		}
		Eventually(func() int {
			n := 0
			for i := range 4 {
				if getRun(ns, fmt.Sprintf("stuck-%d", i)).Status.Phase == vacuumv1alpha1.RunRunning {
					n++
				}
			}
			return n
		}).WithTimeout(10 * time.Second).Should(Equal(4))

		By("running a fifth run that quiesces an app, while the four are polled and pushed to")
		app := newWorkload(ns, "Deployment", "app", 2)
		newRun(ns, "healthy", "data", quiesceDeployment)
		Eventually(func() []corev1.Pod { return podsOf(ns, "healthy") }).WithTimeout(20 * time.Second).Should(HaveLen(1))
		Expect(replicasOf(app)).To(BeZero())
		pod := podsOf(ns, "healthy")[0]
		ip := freshIP()
		runner := startFakeRunner(ip, runToken(testKey, getRun(ns, "healthy").UID))
		defer runner.Close()
		setPodRunning(&pod, ip)
		Eventually(func() string { return getRun(ns, "healthy").Status.VacuumPhase }).
			WithTimeout(5*time.Second).WithPolling(50*time.Millisecond).Should(Equal("vacuuming indexes"), "its progress is folded")

		By("ending it and restoring its app within 5 seconds")
		ended := time.Now()
		setPodTerminated(&pod, 0, "Completed", string(goldenBytes("summary-succeeded.json")))
		Eventually(func() int32 { return replicasOf(app) }).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(BeEquivalentTo(2))
		GinkgoWriter.Printf("app restored %s after its runner ended, with 4 silent runners\n", time.Since(ended).Round(time.Millisecond))
		Expect(getRun(ns, "healthy").Status.Phase).To(Equal(vacuumv1alpha1.RunSucceeded))
		Expect(getRun(ns, "stuck-0").Status.Phase).To(Equal(vacuumv1alpha1.RunRunning), "the silent runs go on")
		for i, accepted := range dialed {
			Expect(accepted()).To(BeNumerically(">", 0), "the manager never dialed silent runner %d: the spec tested nothing", i)
		}
	}, SpecTimeout(90*time.Second))
})
