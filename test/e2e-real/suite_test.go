package e2ereal

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

var (
	env       clusterEnv
	k8sClient client.Client
	suiteCtx  context.Context
	cancel    context.CancelFunc
	// operatorNS and operatorDeploy are the manager's namespace and Deployment (from config/).
	operatorNS, operatorDeploy string
)

func TestE2EReal(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Real-cluster E2E Suite")
}

var _ = BeforeSuite(func() {
	if os.Getenv("E2E_REAL") != "1" {
		Skip("the real-cluster lane runs only with E2E_REAL=1 (make test-e2e-real, as root)")
	}
	logf.SetLogger(GinkgoLogr)
	suiteCtx, cancel = context.WithCancel(context.Background())
	env = loadClusterEnv()

	scheme := runtime.NewScheme()
	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(vacuumv1alpha1.AddToScheme(scheme)).To(Succeed())
	cfg, err := clientcmd.BuildConfigFromFlags("", env.kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	By("deploying the CRDs and the operator from config/default with the imported image")
	deployOperator(suiteCtx)
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
	}
})

// On failure, what a person needs to see: the cluster's objects, events and the manager's log.
var _ = ReportAfterEach(func(report SpecReport) {
	if !report.Failed() || k8sClient == nil {
		return
	}
	ctx, done := context.WithTimeout(context.Background(), time.Minute)
	defer done()
	for _, args := range [][]string{
		{"get", "nodes,pods,pv,pvc,vacuumpolicies,vacuumruns", "-A", "-o", "wide"},
		{"get", "vacuumruns", "-A", "-o", "yaml"},
		{"get", "events", "-A", "--sort-by=.lastTimestamp"},
		{"logs", "-n", operatorNS, "deployment/" + operatorDeploy, "--tail=200"},
	} {
		out, err := tryRun(ctx, nil, env.kubectl, append([]string{"--kubeconfig", env.kubeconfig}, args...)...)
		AddReportEntry("kubectl "+strings.Join(args, " "), out+errString(err))
	}
})

func errString(err error) string {
	if err == nil {
		return ""
	}
	return "\n" + err.Error()
}

// deployOperator renders config/default with kustomize, points the manager's Deployment at the
// image imported into the node (never pulled: no registry is reachable), applies it and waits
// until the manager is available.
func deployOperator(ctx context.Context) {
	rendered := env.kubectlRun(ctx, nil, "kustomize", filepath.Join(env.repoRoot, "config", "default"))
	var out bytes.Buffer
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(rendered), 4096)
	var crds []string
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		if len(obj.Object) == 0 {
			continue
		}
		switch obj.GetKind() {
		case "CustomResourceDefinition":
			crds = append(crds, "crd/"+obj.GetName())
		case "Deployment":
			operatorNS, operatorDeploy = obj.GetNamespace(), obj.GetName()
			useImportedImage(obj)
		}
		b, err := yaml.Marshal(obj.Object)
		Expect(err).NotTo(HaveOccurred())
		out.WriteString("---\n")
		out.Write(b)
	}
	Expect(operatorDeploy).NotTo(BeEmpty(), "config/default renders no Deployment")
	Expect(crds).To(HaveLen(2), "config/default should render the VacuumPolicy and VacuumRun CRDs")
	env.kubectlRun(ctx, out.Bytes(), "apply", "--server-side", "--force-conflicts", "-f", "-")
	env.waitEstablished(ctx, crds...)
	env.kubectlRun(ctx, nil, "-n", operatorNS, "rollout", "status", "deployment/"+operatorDeploy, "--timeout=180s")
}

// useImportedImage sets every container of a Deployment to the imported image with
// imagePullPolicy Never, and the runner image the manager gives runner pods (its RUNNER_IMAGE
// variable or --runner-image flag) to the same image.
func useImportedImage(obj *unstructured.Unstructured) {
	for _, field := range []string{"containers", "initContainers"} {
		containers, found, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", field)
		Expect(err).NotTo(HaveOccurred())
		if !found {
			continue
		}
		for i := range containers {
			c, ok := containers[i].(map[string]any)
			Expect(ok).To(BeTrue(), "container %d of the Deployment is not an object", i)
			c["image"] = env.image
			c["imagePullPolicy"] = string(corev1.PullNever)
			if envs, ok := c["env"].([]any); ok {
				for _, e := range envs {
					if m, _ := e.(map[string]any); m != nil && m["name"] == "RUNNER_IMAGE" {
						m["value"] = env.image
					}
				}
			}
			if args, ok := c["args"].([]any); ok {
				for j, a := range args {
					if s, _ := a.(string); strings.HasPrefix(s, "--runner-image=") {
						args[j] = "--runner-image=" + env.image
					}
				}
			}
		}
		Expect(unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", field)).To(Succeed())
	}
}

// newNamespace makes a namespace that enforces the PodSecurity "restricted" profile (runner
// pods must pass it) and deletes it after the spec's container.
func newNamespace(ctx context.Context, prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: prefix + "-",
		Labels:       map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) {
		Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, ns))).To(Succeed())
	})
	return ns.Name
}
