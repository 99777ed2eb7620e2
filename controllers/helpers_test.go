package controllers

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// recorder keeps the events a reconciler emits, for assertions.
type recorder struct {
	mu     sync.Mutex
	events []string // "Type Reason note"
}

func (r *recorder) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, _ string, note string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason+" "+fmt.Sprintf(note, args...))
}

// reasons lists the reasons of the events emitted so far.
func (r *recorder) reasons() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		var typ, reason string
		if _, err := fmt.Sscanf(e, "%s %s", &typ, &reason); err != nil {
			Fail(fmt.Sprintf("event %q is not \"Type Reason note\": %v", e, err))
		}
		out = append(out, reason)
	}
	return out
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

// newRunReconciler is a run controller talking straight to the API server, with its own
// clock and events: tests call Reconcile themselves, playing the work queue.
func newRunReconciler(clock *clocktesting.FakeClock) (*RunReconciler, *recorder) {
	rec := &recorder{}
	return &RunReconciler{
		Client: k8sClient, APIReader: k8sClient, Scheme: scheme, Recorder: rec, Clock: clock,
		HTTPClient: &http.Client{Timeout: 2 * time.Second}, Key: testKey,
		RunnerImage: "vacuum-operator:test", ProgressInterval: DefaultProgressInterval,
	}, rec
}

func newPolicyReconciler(clock *clocktesting.FakeClock) (*PolicyReconciler, *recorder) {
	rec := &recorder{}
	return &PolicyReconciler{Client: k8sClient, Scheme: scheme, Recorder: rec, Clock: clock}, rec
}

// runSpecStart is what a run spec's BeforeEach sets up: a namespace of its own, a fake clock
// at now, and a run controller on that clock with its event recorder.
func runSpecStart() (string, *clocktesting.FakeClock, *RunReconciler, *recorder) {
	clock := clocktesting.NewFakeClock(time.Now())
	r, rec := newRunReconciler(clock)
	return newNamespace(), clock, r, rec
}

// policySpecStart is runSpecStart for a policy spec.
func policySpecStart() (string, *clocktesting.FakeClock, *PolicyReconciler, *recorder) {
	clock := clocktesting.NewFakeClock(time.Now())
	r, rec := newPolicyReconciler(clock)
	return newNamespace(), clock, r, rec
}

func reconcileRun(r *RunReconciler, ns, name string) ctrl.Result {
	res, err := r.Reconcile(suiteCtx, ctrl.Request{NamespacedName: key(ns, name)})
	Expect(err).NotTo(HaveOccurred())
	return res
}

// reconcileRunAnswered reconciles, lets the calls to the runner pod that reconcile started
// answer (they run outside it), and reconciles again to fold their answers in, as the
// controller's wake-up on each answer does.
func reconcileRunAnswered(r *RunReconciler, ns, name string) ctrl.Result {
	reconcileRun(r, ns, name)
	r.runners.wait()
	return reconcileRun(r, ns, name)
}

func reconcilePolicy(r *PolicyReconciler, ns, name string) ctrl.Result {
	res, err := r.Reconcile(suiteCtx, ctrl.Request{NamespacedName: key(ns, name)})
	Expect(err).NotTo(HaveOccurred())
	return res
}

func getRun(ns, name string) *vacuumv1alpha1.VacuumRun {
	var run vacuumv1alpha1.VacuumRun
	Expect(k8sClient.Get(suiteCtx, key(ns, name), &run)).To(Succeed())
	return &run
}

func getPod(ns, name string) *corev1.Pod {
	var pod corev1.Pod
	Expect(k8sClient.Get(suiteCtx, key(ns, name), &pod)).To(Succeed())
	return &pod
}

func podsOf(ns, run string) []corev1.Pod {
	var pods corev1.PodList
	Expect(k8sClient.List(suiteCtx, &pods, client.InNamespace(ns), client.MatchingLabels{vacuumv1alpha1.LabelRun: run})).To(Succeed())
	return pods.Items
}

// ensureClaim creates the PersistentVolumeClaim a run checks for before it starts, unless it
// exists (envtest binds no volume: the claim stays Pending, which the run does not check).
func ensureClaim(ns, name string) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := k8sClient.Create(suiteCtx, pvc); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

// createRun creates a hand-made run of target (backoffLimit 2; edit adjusts its spec
// first) and returns it as stored. It makes nothing the target names.
func createRun(ns, name string, target vacuumv1alpha1.Target, edit func(*vacuumv1alpha1.VacuumRun)) *vacuumv1alpha1.VacuumRun {
	run := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	run.Spec.Target = target
	run.Spec.BackoffLimit = 2
	if edit != nil {
		edit(run)
	}
	Expect(k8sClient.Create(suiteCtx, run)).To(Succeed())
	return getRun(ns, name)
}

// newRun creates a hand-made run on a PVC (made if missing); edit adjusts its spec first.
func newRun(ns, name, pvc string, edit func(*vacuumv1alpha1.VacuumRun)) *vacuumv1alpha1.VacuumRun {
	ensureClaim(ns, pvc)
	return createRun(ns, name, vacuumv1alpha1.Target{PersistentVolumeClaim: pvc}, edit)
}

// reconcileUntilPod reconciles a fresh run until its attempt's pod exists (finalizer first,
// then the pod) and returns the pod.
func reconcileUntilPod(r *RunReconciler, ns, name string, attempt int32) *corev1.Pod {
	for range 6 {
		reconcileRun(r, ns, name)
		var pod corev1.Pod
		if k8sClient.Get(suiteCtx, key(ns, fmt.Sprintf("%s-%d", name, attempt)), &pod) == nil {
			return &pod
		}
	}
	Fail(fmt.Sprintf("run %s/%s made no pod for attempt %d", ns, name, attempt))
	return nil
}

// setPodRunning plays the kubelet: the pod runs at ip.
func setPodRunning(pod *corev1.Pod, ip string) {
	pod = getPod(pod.Namespace, pod.Name)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: runnerContainer, Image: pod.Spec.Containers[0].Image, ImageID: "test", Ready: true,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
	}}
	Expect(k8sClient.Status().Update(suiteCtx, pod)).To(Succeed())
}

// setPodTerminated plays the kubelet: the runner exited with code and wrote message.
func setPodTerminated(pod *corev1.Pod, code int32, reason, message string) {
	pod = getPod(pod.Namespace, pod.Name)
	pod.Status.Phase = corev1.PodSucceeded
	if code != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name: runnerContainer, Image: pod.Spec.Containers[0].Image, ImageID: "test",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, Message: message, StartedAt: metav1.Now(), FinishedAt: metav1.Now()}},
	}}
	Expect(k8sClient.Status().Update(suiteCtx, pod)).To(Succeed())
}

// goldenBytes reads one of the runner's golden files verbatim.
func goldenBytes(name string) []byte {
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	Expect(err).NotTo(HaveOccurred())
	return b
}

// fakeRunner stands in for a runner pod at ip's control port: it serves the golden /progress
// over HTTPS with the run's certificate (made from the token, as the manager makes it) and
// records the PUT /throttle calls it accepts (with the bearer token it was given).
type fakeRunner struct {
	srv       *httptest.Server
	token     string
	throttles chan runnerwire.Throttle
	pauses    chan bool // the values of the PUT /pause calls it accepted
	refused   atomic.Int32
	progress  atomic.Pointer[[]byte] // what GET /progress serves: the golden progress.json until setProgress
}

func startFakeRunner(ip, token string) *fakeRunner {
	f := &fakeRunner{token: token, throttles: make(chan runnerwire.Throttle, 8), pauses: make(chan bool, 8)}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(runnerwire.ControlPort)))
	Expect(err).NotTo(HaveOccurred(), "listen on %s:%d", ip, runnerwire.ControlPort)
	cert, err := runnerwire.RunCertificate(token)
	Expect(err).NotTo(HaveOccurred())
	pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
	Expect(err).NotTo(HaveOccurred())
	mux := http.NewServeMux()
	progress := goldenBytes("progress.json")
	f.progress.Store(&progress)
	mux.HandleFunc("GET /progress", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*f.progress.Load())
	})
	mux.HandleFunc("PUT /throttle", func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+f.token {
			f.refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var t runnerwire.Throttle
		b, _ := io.ReadAll(req.Body)
		if err := json.Unmarshal(b, &t); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.throttles <- t
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PUT /pause", func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+f.token {
			f.refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var body struct {
			Paused *bool `json:"paused"`
		}
		if err := json.NewDecoder(req.Body).Decode(&body); err != nil || body.Paused == nil {
			http.Error(w, "want {\"paused\": true|false}", http.StatusBadRequest)
			return
		}
		f.pauses <- *body.Paused
		w.WriteHeader(http.StatusNoContent)
	})
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.Listener.Close()
	f.srv.Listener = ln
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
	f.srv.StartTLS()
	return f
}

func (f *fakeRunner) Close() { f.srv.Close() }

// setProgress makes GET /progress serve p from now on.
func (f *fakeRunner) setProgress(p runnerwire.Progress) {
	b, err := json.Marshal(p)
	Expect(err).NotTo(HaveOccurred())
	f.progress.Store(&b)
}

func quantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func reconcileRequest(ns, name string) ctrl.Request {
	return ctrl.Request{NamespacedName: key(ns, name)}
}

func clientMergeFrom(obj client.Object) client.Patch { return client.MergeFrom(obj) }
