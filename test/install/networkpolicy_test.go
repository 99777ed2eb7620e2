package install

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const metricsPolicyKey = "NetworkPolicy/" + releaseNamespace + "/vacuum-operator-allow-metrics-traffic"

// typed converts a rendered object to its Go type, refusing unknown fields.
func typed[T any](o map[string]any) *T {
	GinkgoHelper()
	b, err := yaml.Marshal(o)
	Expect(err).NotTo(HaveOccurred())
	var out T
	Expect(yaml.UnmarshalStrict(b, &out)).To(Succeed())
	return &out
}

var _ = Describe("The metrics NetworkPolicy", func() {
	It("is rendered by the chart only when enabled, as config/network-policy applies it", func() {
		Expect(objects(helmTemplate())).NotTo(HaveKey(metricsPolicyKey), "opt-in, as kubebuilder scaffolds it")
		chart := objects(helmTemplate("metrics.networkPolicy.enabled=true"))
		Expect(chart).To(HaveKey(metricsPolicyKey))
		only := map[string]*unstructured.Unstructured{}
		only[metricsPolicyKey] = chart[metricsPolicyKey]
		sameObjects(only, objects(kubectl(nil, "kustomize", "config/network-policy")))
	})

	It("selects the manager's pods and opens only their metrics port, to namespaces with the chosen labels", func() {
		objs := objects(helmTemplate("metrics.networkPolicy.enabled=true", "metrics.port=9443",
			"metrics.networkPolicy.namespaceLabels.team=observability"))
		np := typed[networkingv1.NetworkPolicy](objs[metricsPolicyKey].Object)
		dep := typed[appsv1.Deployment](objs["Deployment/"+releaseNamespace+"/vacuum-operator-controller-manager"].Object)
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		Expect(err).NotTo(HaveOccurred())
		Expect(sel.Matches(labels.Set(dep.Spec.Template.Labels))).To(BeTrue(), "selects the manager's pods %v", dep.Spec.Template.Labels)
		Expect(np.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeIngress}))
		Expect(np.Spec.Ingress).To(HaveLen(1))
		rule := np.Spec.Ingress[0]
		Expect(rule.Ports).To(HaveLen(1))
		var metricsPort int32
		for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
			if p.Name == "metrics" {
				metricsPort = p.ContainerPort
			}
		}
		Expect(metricsPort).To(BeEquivalentTo(9443))
		Expect(rule.Ports[0].Port.IntValue()).To(BeEquivalentTo(metricsPort), "the manager's metrics container port")
		Expect(rule.From).To(HaveLen(1))
		Expect(rule.From[0].PodSelector).To(BeNil())
		Expect(rule.From[0].NamespaceSelector.MatchLabels).To(Equal(map[string]string{"metrics": "enabled", "team": "observability"}))
	})
})
