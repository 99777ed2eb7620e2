package kubectlvacuum

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/controllers"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// The suite runs a real kube-apiserver and etcd (envtest) and the manager's two
// reconcilers in a real manager, configured as cmd/manager configures them. There is no
// kubelet: the specs play it, setting the runner pod's status, and a small HTTPS server on a
// loopback address plays the runner pod's control port (/progress, /throttle, /pause), as the
// controllers' own suite does. The plugin is run in-process through Main, with a kubeconfig
// file of its own, so its flags are the ones a user passes.
var (
	k8sClient  client.Client
	testEnv    *envtest.Environment
	kubeconfig string
	suiteCtx   context.Context
	stopSuite  context.CancelFunc
	managerKey = []byte("plugin-suite-key-0123456789abcdef")
)

func TestPlugin(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kubectl vacuum Suite")
}

func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	out, err := exec.Command(filepath.Join("..", "..", "hack", "setup-envtest.sh")).Output()
	Expect(err).NotTo(HaveOccurred(), "no KUBEBUILDER_ASSETS and hack/setup-envtest.sh failed; run `make envtest`")
	return strings.TrimSpace(string(out))
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	suiteCtx, stopSuite = context.WithCancel(context.Background())
	scheme := Scheme()
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assetsDir(),
	}
	cfg, err := testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	user, err := testEnv.AddUser(envtest.User{Name: "plugin-user", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	b, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	Expect(os.WriteFile(kubeconfig, b, 0o600)).To(Succeed())

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	Expect(err).NotTo(HaveOccurred())
	recorder := mgr.GetEventRecorder("vacuum-operator")
	metrics := controllers.NewMetrics(prometheus.NewRegistry())
	Expect((&controllers.PolicyReconciler{Client: mgr.GetClient(), Scheme: scheme, Recorder: recorder, Metrics: metrics}).SetupWithManager(mgr)).To(Succeed())
	Expect((&controllers.RunReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: scheme, Recorder: recorder, Key: managerKey,
		RunnerImage: "vacuum-operator:test", ProgressInterval: 300 * time.Millisecond, Metrics: metrics,
	}).SetupWithManager(mgr)).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
})

var _ = AfterSuite(func() {
	if stopSuite != nil {
		stopSuite()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// result is one run of the plugin.
type result struct {
	code        int
	out, errOut string
}

// plugin runs `kubectl vacuum args...` against the suite's API server, in namespace ns.
func plugin(ns string, args ...string) result {
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	args = append(args, "--kubeconfig", kubeconfig, "-n", ns)
	code := Main(suiteCtx, args, streams)
	return result{code: code, out: out.String(), errOut: errOut.String()}
}

func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "plugin-test-"}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}

// ensureClaim makes the PersistentVolumeClaim a run checks for (envtest binds none).
func ensureClaim(ns, name string) {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	Expect(client.IgnoreAlreadyExists(k8sClient.Create(suiteCtx, pvc))).To(Succeed())
}

// newRun makes a hand-made run on claim pvc (backoffLimit 0: a failed attempt fails it).
func newRun(ns, name, pvc string) {
	ensureClaim(ns, pvc)
	run := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	run.Spec.Target.PersistentVolumeClaim = pvc
	Expect(k8sClient.Create(suiteCtx, run)).To(Succeed())
}

func getRun(ns, name string) *vacuumv1alpha1.VacuumRun {
	var run vacuumv1alpha1.VacuumRun
	Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: name}, &run)).To(Succeed())
	return &run
}

// podOf waits for the manager to make the run's first pod and returns it.
func podOf(ns, run string) *corev1.Pod {
	var pod corev1.Pod
	Eventually(func() error {
		return k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: run + "-1"}, &pod)
	}).WithTimeout(20*time.Second).Should(Succeed(), "the manager made no pod for run %s/%s", ns, run)
	return &pod
}

// setPodStatus plays the kubelet: edit sets the pod's status (its runner container's state).
func setPodStatus(pod *corev1.Pod, phase corev1.PodPhase, ip string, state corev1.ContainerState) {
	Eventually(func() error {
		var cur corev1.Pod
		if err := k8sClient.Get(suiteCtx, client.ObjectKeyFromObject(pod), &cur); err != nil {
			return err
		}
		cur.Status.Phase = phase
		if ip != "" {
			cur.Status.PodIP, cur.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
		}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{{
			Name: controllers.RunnerContainer, Image: cur.Spec.Containers[0].Image, ImageID: "test",
			Ready: state.Running != nil, State: state,
		}}
		return k8sClient.Status().Update(suiteCtx, &cur)
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

func terminated(code int32, message string) corev1.ContainerState {
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: message, StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}
}

// golden reads one of the runner's golden files.
func golden(name string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "runner", "runnerwire", "testdata", name))
	Expect(err).NotTo(HaveOccurred())
	return b
}

var nextIP atomic.Int32

// freshIP is a loopback address of this suite's own range (the controllers' suite uses
// 127.x.77.y), so both suites may run at once; its second byte is this process's
// (loopbackNet), so two runs of the suite on one machine (two worktrees, say) do not bind
// the same address either.
func freshIP() string { return fmt.Sprintf("127.%d.79.%d", loopbackNet, 10+nextIP.Add(1)) }

// loopbackNet is the second byte of this process's loopback addresses: 1 to 250, from its
// process id.
var loopbackNet = 1 + os.Getpid()%250

// fakeRunner plays a runner pod's control port at ip: /progress serves the runner's golden
// progress, and the PUT calls it accepts (with the run's token) are counted by path.
type fakeRunner struct {
	srv  *httptest.Server
	puts map[string]*atomic.Int32
}

func startFakeRunner(ip string, run *vacuumv1alpha1.VacuumRun) *fakeRunner {
	// The manager records the token Secret in the same status patch as the run's first pod,
	// just after creating the pod: a test that saw the pod may still read the run without it.
	Eventually(func() *vacuumv1alpha1.OwnedObject {
		run = getRun(run.Namespace, run.Name)
		return run.Status.TokenSecret
	}).WithTimeout(10*time.Second).ShouldNot(BeNil(), "the manager made no token Secret for %s", run.Name)
	var secret corev1.Secret
	Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: run.Namespace, Name: run.Status.TokenSecret.Name}, &secret)).To(Succeed())
	token := string(secret.Data["token"])
	cert, err := runnerwire.RunCertificate(token)
	Expect(err).NotTo(HaveOccurred())
	pair, err := tls.X509KeyPair(cert.CertPEM, cert.KeyPEM)
	Expect(err).NotTo(HaveOccurred())
	f := &fakeRunner{puts: map[string]*atomic.Int32{"/throttle": {}, "/pause": {}}}
	mux := http.NewServeMux()
	progress := golden("progress.json")
	mux.HandleFunc("GET /progress", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(progress)
	})
	for path, n := range f.puts {
		mux.HandleFunc("PUT "+path, func(w http.ResponseWriter, req *http.Request) {
			if req.Header.Get("Authorization") != "Bearer "+token {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			n.Add(1)
			w.WriteHeader(http.StatusNoContent)
		})
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(runnerwire.ControlPort)))
	Expect(err).NotTo(HaveOccurred())
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.Listener.Close()
	f.srv.Listener = ln
	f.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
	f.srv.StartTLS()
	return f
}

func (f *fakeRunner) Close() { f.srv.Close() }
