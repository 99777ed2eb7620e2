package controllers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// The suite runs a real kube-apiserver and etcd (envtest). There is no kubelet and no
// controller-manager: tests play those parts, setting pod status and serving /progress.
var (
	cfg       *rest.Config
	k8sClient client.Client
	testEnv   *envtest.Environment
	scheme    = runtime.NewScheme()
	suiteCtx  context.Context
	cancel    context.CancelFunc
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers Suite")
}

// assetsDir returns KUBEBUILDER_ASSETS, or asks hack/setup-envtest.sh (instant once built).
func assetsDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	out, err := exec.Command(filepath.Join("..", "hack", "setup-envtest.sh")).Output()
	Expect(err).NotTo(HaveOccurred(), "no KUBEBUILDER_ASSETS and hack/setup-envtest.sh failed; run `make envtest`")
	return strings.TrimSpace(string(out))
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	suiteCtx, cancel = context.WithCancel(context.Background())

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(vacuumv1alpha1.AddToScheme(scheme)).To(Succeed())

	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assetsDir(),
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	installAdmissionPolicies()
})

// installAdmissionPolicies applies config/admission as a cluster admin would: the policies
// then judge every request of the suite (the admin passes them; impersonated users may not).
func installAdmissionPolicies() {
	var all []string
	for _, f := range []string{"quiesce_policy.yaml", "credentials_policy.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "config", "admission", f))
		Expect(err).NotTo(HaveOccurred())
		all = append(all, strings.Split(string(b), "\n---")...)
	}
	for _, doc := range all {
		var u unstructured.Unstructured
		Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		if len(u.Object) == 0 {
			continue
		}
		Expect(k8sClient.Create(suiteCtx, &u)).To(Succeed(), "install %s %s", u.GetKind(), u.GetName())
	}
}

var _ = AfterSuite(func() {
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// newNamespace creates a namespace of its own for one test.
func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "vacuum-test-"}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}
