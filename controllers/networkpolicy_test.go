package controllers

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// The NetworkPolicy sample must select the pods the operator makes and open exactly their
// two ports: the control port to the manager's pods, the metrics port to monitoring.
func TestRunnerNetworkPolicySampleAdmitsTheManagerToControlAndMonitoringToMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "config", "samples", "networkpolicy_runner.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var np networkingv1.NetworkPolicy
	if err := yaml.UnmarshalStrict(b, &np); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if pod := podFor(t, defaultedRun()); !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the policy's podSelector %s does not select a runner pod (labels %v)", sel, pod.Labels)
	}
	managerLabels := readManagerPodLabels(t)
	want := map[int32]string{runnerwire.ControlPort: "manager", runnerwire.MetricsPort: "monitoring"}
	if len(np.Spec.Ingress) != len(want) {
		t.Fatalf("%d ingress rules, want %d", len(np.Spec.Ingress), len(want))
	}
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || len(rule.From) != 1 {
			t.Fatalf("rule %+v: want one port from one peer", rule)
		}
		port := rule.Ports[0].Port.IntVal
		who, ok := want[port]
		if !ok || (rule.Ports[0].Protocol != nil && *rule.Ports[0].Protocol != corev1.ProtocolTCP) {
			t.Errorf("the policy opens port %v, which is not the runner's control or metrics port", rule.Ports[0])
			continue
		}
		delete(want, port)
		peer := rule.From[0]
		ns := peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
		switch who {
		case "manager":
			ps, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			if err != nil || ns != "vacuum-operator-system" || !ps.Matches(labels.Set(managerLabels)) {
				t.Errorf("the control port is open to namespace %q pods %v, not the manager (labels %v)", ns, peer.PodSelector, managerLabels)
			}
		case "monitoring":
			if ns == "" || peer.PodSelector != nil {
				t.Errorf("the metrics port must be open to a whole monitoring namespace, got %+v", peer)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("ports left closed: %v", want)
	}
}

// readManagerPodLabels reads the manager Deployment's pod labels from config/manager.
func readManagerPodLabels(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		var d struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				} `json:"template"`
			} `json:"spec"`
		}
		if yaml.Unmarshal(doc, &d) == nil && d.Kind == "Deployment" {
			return d.Spec.Template.Metadata.Labels
		}
	}
	t.Fatal("no Deployment in config/manager/manager.yaml")
	return nil
}
