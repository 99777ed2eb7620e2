package install

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// The suite runs a real kube-apiserver and etcd (envtest), with no CRDs: the specs install
// them from the chart and dist/install.yaml. Beside it runs the real kube-controller-manager
// with only its ClusterRole aggregation controller, which fills admin, edit and view.
var (
	cfg        *rest.Config
	k8sClient  client.Client
	testEnv    *envtest.Environment
	kubeconfig string // an admin kubeconfig file for kubectl, helm and the manager
	assets     string
	suiteCtx   context.Context
	cancel     context.CancelFunc
	kcm        *exec.Cmd
)

func TestInstall(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Install Suite")
}

// repoRoot is the module root (this file is test/install/suite_test.go).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// assetsDir returns KUBEBUILDER_ASSETS, or asks hack/setup-envtest.sh (instant once built).
func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	out, err := exec.Command(filepath.Join(repoRoot(), "hack", "setup-envtest.sh")).Output()
	Expect(err).NotTo(HaveOccurred(), "no KUBEBUILDER_ASSETS and hack/setup-envtest.sh failed; run `make envtest`")
	return strings.TrimSpace(string(out))
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	suiteCtx, cancel = context.WithCancel(context.Background())
	Expect(clientgoscheme.AddToScheme(clientgoscheme.Scheme)).To(Succeed())
	Expect(vacuumv1alpha1.AddToScheme(clientgoscheme.Scheme)).To(Succeed())
	assets = assetsDir()
	testEnv = &envtest.Environment{BinaryAssetsDirectory: assets}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{})
	Expect(err).NotTo(HaveOccurred())

	admin, err := testEnv.AddUser(envtest.User{Name: "installer", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	kc, err := admin.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(GinkgoT().TempDir(), "admin.kubeconfig")
	Expect(os.WriteFile(kubeconfig, kc, 0o600)).To(Succeed())

	startAggregationController()
})

// startAggregationController runs kube-controller-manager (built with envtest's binaries by
// hack/setup-k8s-binaries.sh) with only the clusterrole-aggregation controller.
func startAggregationController() {
	bin := filepath.Join(assets, "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		out, err := exec.Command(filepath.Join(repoRoot(), "hack", "setup-k8s-binaries.sh"), "kube-controller-manager").Output()
		Expect(err).NotTo(HaveOccurred(), "build kube-controller-manager: hack/setup-k8s-binaries.sh kube-controller-manager")
		bin = filepath.Join(strings.TrimSpace(lastLine(string(out))), "kube-controller-manager")
	}
	kcm = exec.Command(bin, "--kubeconfig="+kubeconfig, "--controllers=clusterrole-aggregation",
		"--leader-elect=false", "--secure-port=0", "--v=1")
	kcm.Stdout, kcm.Stderr = GinkgoWriter, GinkgoWriter
	kcm.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	Expect(kcm.Start()).To(Succeed())
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

var _ = AfterSuite(func() {
	if kcm != nil && kcm.Process != nil {
		_ = kcm.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = kcm.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-kcm.Process.Pid, syscall.SIGKILL)
		}
	}
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})
