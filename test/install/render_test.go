package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// releaseNamespace is where the chart is installed: config/default's namespace.
const releaseNamespace = "vacuum-operator-system"

// helmBin is ./bin/helm (make helm builds it from the Go module proxy).
func helmBin() string {
	GinkgoHelper()
	p := filepath.Join(repoRoot(), "bin", "helm")
	if _, err := os.Stat(p); err != nil {
		Fail("no bin/helm: run `make helm` (make test does), which builds it from the Go module proxy")
	}
	return p
}

// command runs name args and returns its standard output, failing the spec with its standard
// error on a non-zero exit.
func command(stdin []byte, name string, args ...string) []byte {
	GinkgoHelper()
	cmd := exec.CommandContext(suiteCtx, name, args...)
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred(), "%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), stderr.String())
	return out
}

func kubectl(stdin []byte, args ...string) []byte {
	GinkgoHelper()
	return command(stdin, filepath.Join(assets, "kubectl"), args...)
}

// waitEstablished waits up to a minute until every CRD named is Established. kubectl wait
// alone fails at once, rather than waiting, when it reads a CRD the API server has not yet
// given any condition (".status.conditions accessor error: <nil>"), so each try that fails is
// tried again.
func waitEstablished(crds ...string) {
	GinkgoHelper()
	args := append([]string{"wait", "--for=condition=Established", "--timeout=10s"}, crds...)
	Eventually(func() error {
		cmd := exec.CommandContext(suiteCtx, filepath.Join(assets, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}

// helmTemplate renders dist/chart as `helm install` would, with --set values.
func helmTemplate(set ...string) []byte {
	GinkgoHelper()
	args := []string{"template", "vacuum-operator", "dist/chart", "--namespace", releaseNamespace, "--kube-version", "1.37.2"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return command(nil, helmBin(), args...)
}

// objects decodes a multi-document manifest, keyed kind/namespace/name.
func objects(manifest []byte) map[string]*unstructured.Unstructured {
	GinkgoHelper()
	out := map[string]*unstructured.Unstructured{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		Expect(err).NotTo(HaveOccurred())
		if len(obj.Object) == 0 {
			continue
		}
		key := obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
		Expect(out).NotTo(HaveKey(key), "rendered twice")
		out[key] = obj
	}
}

// sameObjects fails with every object one side has and the other lacks or has otherwise.
func sameObjects(chart, kustomize map[string]*unstructured.Unstructured) {
	GinkgoHelper()
	var diffs []string
	for k, c := range chart {
		kz, ok := kustomize[k]
		if !ok {
			diffs = append(diffs, "only in the chart: "+k)
			continue
		}
		if !equality.Semantic.DeepEqual(c.Object, kz.Object) {
			cy, _ := yaml.Marshal(c.Object)
			ky, _ := yaml.Marshal(kz.Object)
			diffs = append(diffs, fmt.Sprintf("%s differs:\n--- chart\n%s\n--- kustomize\n%s", k, cy, ky))
		}
	}
	for k := range kustomize {
		if _, ok := chart[k]; !ok {
			diffs = append(diffs, "only in config/: "+k)
		}
	}
	sort.Strings(diffs)
	Expect(diffs).To(BeEmpty(), "make chart regenerates the generated templates; the hand-written ones must follow config/ by hand")
}

// withoutKeepAnnotation drops the chart's helm.sh/resource-policy from its CRDs: the one
// thing config/ has no use for.
func withoutKeepAnnotation(objs map[string]*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	for _, o := range objs {
		ann := o.GetAnnotations()
		if _, ok := ann["helm.sh/resource-policy"]; ok {
			delete(ann, "helm.sh/resource-policy")
			o.SetAnnotations(ann)
		}
	}
	return objs
}

var _ = Describe("The Helm chart", func() {
	It("renders with its defaults what config/default (make deploy) applies, object for object", func() {
		chart := withoutKeepAnnotation(objects(helmTemplate("createNamespace=true", "image.tag=latest")))
		sameObjects(chart, objects(kubectl(nil, "kustomize", "config/default")))
	})

	It("renders in namespaced mode what config/namespaced applies", func() {
		chart := withoutKeepAnnotation(objects(helmTemplate("createNamespace=true", "image.tag=latest",
			"watchNamespaces={team-a}", "metrics.secure=false")))
		sameObjects(chart, objects(kubectl(nil, "kustomize", "config/namespaced")))
	})

	It("passes the runner image and priority-class allow-lists, resources and leader election to the manager", func() {
		objs := objects(helmTemplate("runner.allowedImages={registry.example/runner:1,registry.example/runner:2}",
			"runner.allowedPriorityClasses={vacuum-low,batch}",
			"manager.leaderElection=false", "manager.resources.limits.memory=512Mi", "watchNamespaces={team-a,team-b}"))
		dep := objs["Deployment/"+releaseNamespace+"/vacuum-operator-controller-manager"]
		Expect(dep).NotTo(BeNil())
		containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
		Expect(containers).To(HaveLen(1))
		c, ok := containers[0].(map[string]any)
		Expect(ok).To(BeTrue(), "container %v", containers[0])
		Expect(c["args"]).To(ContainElements("--allowed-runner-images=registry.example/runner:1,registry.example/runner:2",
			"--allowed-priority-classes=vacuum-low,batch", "--watch-namespaces=team-a,team-b"))
		Expect(c["args"]).NotTo(ContainElement("--leader-elect"))
		Expect(c["resources"]).To(HaveKeyWithValue("limits", HaveKeyWithValue("memory", "512Mi")))
		Expect(objs).To(HaveKey("RoleBinding/team-b/vacuum-operator-manager-rolebinding"))
		Expect(objs).NotTo(HaveKey("ClusterRoleBinding//vacuum-operator-manager-rolebinding"))
	})
})
