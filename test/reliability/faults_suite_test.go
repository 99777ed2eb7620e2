package reliability

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vacuumops/vacuum-operator/internal/devcluster"
	"github.com/vacuumops/vacuum-operator/internal/localnode"
)

// The operator under faults of its surroundings: the API server restarted, the local node
// stopped. These pieces are those of the local dev cluster (internal/devcluster), assembled
// here by hand so that each can be stopped on its own: envtest's kube-apiserver and etcd, the
// manager built from ./cmd/manager as a separate process, and a local node
// (internal/localnode) in this process that runs the real vacuum-runner on a real volume.
var (
	faultCtx    context.Context
	faultCancel context.CancelFunc
	testEnv     *envtest.Environment
	apiCertDir  string // kube-apiserver's certificate directory, kept across its restarts
	cfg         *rest.Config
	k8s         client.Client
	binDir      string // manager and vacuum-runner; the local node's image root
	nodeState   string // the local node's state directory, kept across its restarts
	node        *nodeHandle
	manager     *exec.Cmd
	managerLog  string
	managerDone chan struct{}
)

// TestOperatorUnderFaults runs the Ginkgo specs of this package (faults_test.go). Set
// FAULTS_SKIP to skip them (they need envtest's binaries; see hack/setup-envtest.sh).
func TestOperatorUnderFaults(t *testing.T) {
	if os.Getenv("FAULTS_SKIP") != "" {
		t.Skip("FAULTS_SKIP is set")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "Operator under faults (envtest + local node + manager process)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	faultCtx, faultCancel = context.WithCancel(context.Background())
	repoRoot, err := devcluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	work := GinkgoT().TempDir()

	// TestMain built vacuum-runner; the manager goes beside it, so that the directory is the
	// runner image's root filesystem for the local node.
	binDir = filepath.Dir(runnerBin)
	By("building the manager")
	Expect(devcluster.Build(faultCtx, repoRoot, binDir, "manager")).To(Succeed())

	By("starting kube-apiserver and etcd")
	assets, err := devcluster.AssetsDir(faultCtx, repoRoot)
	Expect(err).NotTo(HaveOccurred())
	scheme, err := devcluster.Scheme()
	Expect(err).NotTo(HaveOccurred())
	testEnv = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		// A loaded 2-core machine needs more than envtest's default 20 s.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// A certificate directory of our own: envtest then neither removes it on Stop nor
	// generates new certificates on Start, so the API server can be restarted with the same
	// serving certificate, client CA and port, and every client keeps working.
	apiCertDir = filepath.Join(work, "apiserver")
	Expect(os.MkdirAll(apiCertDir, 0o700)).To(Succeed())
	testEnv.ControlPlane.APIServer = &envtest.APIServer{CertDir: apiCertDir}
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	testCfg := rest.CopyConfig(cfg)
	testCfg.Timeout = 15 * time.Second // no call of the test's may hang on a stopped API server
	k8s, err = client.New(testCfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(devcluster.EnsureNamespace(faultCtx, k8s, devcluster.ManagerNamespace)).To(Succeed())

	By("starting the local node")
	nodeState = filepath.Join(work, "node")
	node = startNode(true)

	By("starting the manager")
	kubeconfig := filepath.Join(work, "kubeconfig")
	Expect(os.WriteFile(kubeconfig, testEnv.KubeConfig, 0o600)).To(Succeed())
	managerLog = filepath.Join(work, "manager.log")
	startManagerProcess(kubeconfig)
})

var _ = AfterSuite(func() {
	if manager != nil {
		stopManagerProcess()
	}
	if node != nil {
		node.stop()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
	if faultCancel != nil {
		faultCancel()
	}
})

var _ = AfterEach(func() {
	if CurrentSpecReport().Failed() && managerLog != "" {
		if b, err := os.ReadFile(managerLog); err == nil {
			if len(b) > 20000 {
				b = b[len(b)-20000:]
			}
			GinkgoWriter.Printf("--- manager log (tail) ---\n%s\n", b)
		}
	}
})

// startManagerProcess runs the manager binary against kubeconfig, as the dev cluster does.
func startManagerProcess(kubeconfig string) {
	GinkgoHelper()
	logFile, err := os.OpenFile(managerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	manager = exec.Command(filepath.Join(binDir, "manager"),
		"--metrics-bind-address="+freeAddr(), "--health-probe-bind-address="+freeAddr(),
		"--namespace="+devcluster.ManagerNamespace, "--runner-image="+devcluster.RunnerImage,
		"--progress-interval=1s")
	manager.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	manager.Stdout, manager.Stderr = logFile, logFile
	manager.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(manager.Start()).To(Succeed())
	managerDone = make(chan struct{})
	go func() { _ = manager.Wait(); close(managerDone) }()
}

// stopManagerProcess sends SIGTERM, then SIGKILL to its process group after 15 s.
func stopManagerProcess() {
	_ = manager.Process.Signal(syscall.SIGTERM)
	select {
	case <-managerDone:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-manager.Process.Pid, syscall.SIGKILL)
		<-managerDone
	}
}

// managerAlive reports whether the manager process still runs: a fault must not make it exit.
func managerAlive() bool {
	select {
	case <-managerDone:
		return false
	default:
		return true
	}
}

// freeAddr is a 127.0.0.1 address with a port free right now.
func freeAddr() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// nodeHandle is one life of the local node. Every life uses the same node name and state
// directory, as a kubelet restarted on the same machine does.
type nodeHandle struct {
	cancel context.CancelFunc
	done   chan error
	proxy  *cutProxy // nil when the node talks to the API server directly
}

// startNode starts a local node; viaProxy routes its API traffic through a proxy that
// crash can cut, so that nothing the dying node still tries to write reaches the API server.
func startNode(viaProxy bool) *nodeHandle {
	GinkgoHelper()
	h := &nodeHandle{done: make(chan error, 1)}
	rc := rest.CopyConfig(cfg)
	if viaProxy {
		var err error
		h.proxy, err = newCutProxy(cfg.Host)
		Expect(err).NotTo(HaveOccurred())
		rc.Host = "https://" + h.proxy.addr()
	}
	n, err := localnode.New(rc, localnode.Config{
		Images:   map[string]string{devcluster.RunnerImage: binDir},
		StateDir: nodeState,
		Log:      GinkgoLogr.WithName("localnode"),
	})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(faultCtx)
	h.cancel = cancel
	go func() { h.done <- n.Run(ctx) }()
	return h
}

// crash stops the node the way a machine failure does: its connection to the API server is
// cut first, then the node process stops. Its pods' processes must already be dead (the
// caller kills them); nothing about their end reaches the API server.
func (h *nodeHandle) crash() {
	GinkgoHelper()
	Expect(h.proxy).NotTo(BeNil(), "crash needs a node started with viaProxy")
	h.proxy.cut()
	h.stop()
}

// stop stops the node and waits for it (it stops the processes it still runs).
func (h *nodeHandle) stop() {
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil { // a node cut off from the API server may end with an error; only say so
			GinkgoWriter.Printf("local node stopped: %v\n", err)
		}
	case <-time.After(time.Minute):
		Fail("the local node did not stop within a minute")
	}
	if h.proxy != nil {
		h.proxy.cut()
	}
}

// cutProxy forwards TCP connections to an address until cut, which closes the listener and
// every connection at once, like a network partition or a dead machine.
type cutProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// newCutProxy forwards a new 127.0.0.1 port to the host:port of an API server URL.
func newCutProxy(apiServer string) (*cutProxy, error) {
	u, err := url.Parse(apiServer)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("proxy: API server address %q: not a URL", apiServer)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &cutProxy{l: l, target: u.Host, conns: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *cutProxy) addr() string { return p.l.Addr().String() }

func (p *cutProxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return // cut
		}
		out, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = in.Close()
			continue
		}
		if !p.track(in, out) {
			return
		}
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// track records a connection pair; false (and both closed) once the proxy is cut.
func (p *cutProxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies one direction until either side ends, then closes both.
func (p *cutProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// cut closes the listener and every forwarded connection.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	_ = p.l.Close()
	for c := range p.conns {
		_ = c.Close()
	}
}
