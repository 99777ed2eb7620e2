package e2ereal

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// The Helm chart on the real cluster. The suite deploys config/default (what
// dist/install.yaml holds); this container swaps it for `helm install` of dist/chart with the
// lane's image, runs the lazy sample to Succeeded through the chart's manager, and puts
// config/default back for the other containers. The chart renders the same object names as
// config/default, so the kustomize install's objects (but its CRDs and namespace, which the
// users' policies live on) are removed first, and the chart is installed without CRDs.

const chartRelease = "vacuum-operator"

// helmBin is the helm the Makefile builds (E2E_REAL_HELM), else bin/helm.
func helmBin() string {
	return envOr("E2E_REAL_HELM", filepath.Join(env.repoRoot, "bin", "helm"))
}

func helm(ctx context.Context, args ...string) string {
	GinkgoHelper()
	return run(ctx, nil, helmBin(), append([]string{"--kubeconfig", env.kubeconfig}, args...)...)
}

// kustomizeInstallWithoutCRDs is config/default rendered, less its CRDs and namespace.
func kustomizeInstallWithoutCRDs(ctx context.Context) []byte {
	GinkgoHelper()
	rendered := env.kubectlRun(ctx, nil, "kustomize", filepath.Join(env.repoRoot, "config", "default"))
	var out bytes.Buffer
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(rendered), 4096)
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		if len(obj.Object) == 0 || obj.GetKind() == "CustomResourceDefinition" || obj.GetKind() == "Namespace" {
			continue
		}
		b, err := yaml.Marshal(obj.Object)
		Expect(err).NotTo(HaveOccurred())
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes()
}

// imageRepoTag splits the lane's image into the chart's image.repository and image.tag.
func imageRepoTag(image string) (string, string) {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i], image[i+1:]
	}
	return image, "latest"
}

var _ = Describe("The Helm chart on a real single-node cluster", Ordered, func() {
	BeforeAll(func(ctx SpecContext) {
		_, err := os.Stat(helmBin())
		Expect(err).NotTo(HaveOccurred(), "no helm at %s: make helm", helmBin())
		By("removing the config/default install, all but its CRDs and namespace")
		env.kubectlRun(ctx, kustomizeInstallWithoutCRDs(ctx), "delete", "--wait", "--ignore-not-found", "-f", "-")
		DeferCleanup(func(ctx SpecContext) {
			By("putting config/default back for the other specs")
			helm(ctx, "uninstall", chartRelease, "--namespace", operatorNS, "--wait", "--ignore-not-found")
			deployOperator(ctx)
		})
	})

	It("installs dist/chart with the lane's image, and its manager runs the lazy sample to Succeeded", func(ctx SpecContext) {
		repo, tag := imageRepoTag(env.image)
		helm(ctx, "install", chartRelease, filepath.Join(env.repoRoot, "dist", "chart"), "--namespace", operatorNS,
			"--set", "crds.install=false", "--set", "image.repository="+repo, "--set", "image.tag="+tag,
			"--set", "image.pullPolicy=Never", "--set", "runner.image="+env.image,
			"--set", "metrics.networkPolicy.enabled=true", "--wait", "--timeout", "3m")
		status := helm(ctx, "status", chartRelease, "--namespace", operatorNS)
		Expect(status).To(ContainSubstring("STATUS: deployed"))
		out := env.kubectlRun(ctx, nil, "-n", operatorNS, "get", "deployment", operatorDeploy,
			"-o", "jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-name} {.spec.template.spec.containers[0].image}")
		Expect(out).To(Equal(chartRelease+" "+env.image), "the manager running is the chart's")
		env.kubectlRun(ctx, nil, "-n", operatorNS, "get", "networkpolicy/vacuum-operator-allow-metrics-traffic")

		ns := newNamespace(ctx, "e2e-chart")
		vol := makeVolume(ctx, ns, "orders-data",
			bloat{table: "orders", rows: 50000, deadFraction: "0.3"},
			bloat{table: "events", rows: 30000, deadFraction: "0.4"})
		env.kubectlRun(ctx, nil, "apply", "-n", ns, "-f",
			filepath.Join(env.repoRoot, "config", "samples", "vacuum_v1alpha1_vacuumpolicy_lazy.yaml"))
		w := watchRun(ctx, ns, runOfPolicy(ctx, ns, "orders-lazy"), vacuumv1alpha1.RunSucceeded, 5*time.Minute)
		Expect(w.run.Status.Totals).NotTo(BeNil())
		Expect(w.run.Status.Totals.TuplesRemoved).To(Equal(vol.totalDead()))
		vol.expectClean(ctx)
	}, SpecTimeout(10*time.Minute))
})
