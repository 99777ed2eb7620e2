package localnode

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The API server refuses loopback addresses in EndpointSlices, so this node's own 127.0.0.x
// pod IPs cannot be endpoints: the test writes a slice of other addresses, as the variables'
// values, not a connection, are what it checks.
func TestPodsGetServiceVariablesPointingAtAReadyEndpoint(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "engine-db"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "postgres", Port: 5432, TargetPort: intstr.FromInt32(15432)},
			{Name: "metrics", Port: 9187, TargetPort: intstr.FromInt32(19187)},
		}}}
	idle := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "idle"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	eps := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "engine-db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "engine-db"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("postgres"), Port: ptr.To(int32(15432))},
			{Name: ptr.To("metrics"), Port: ptr.To(int32(19187))}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
	}
	for _, o := range []client.Object{svc, idle, eps} {
		if err := testClient.Create(ctx, o); err != nil {
			t.Fatalf("create %T: %v", o, err)
		}
	}
	linked := helperPod(ns, "linked", "--term", "/dev/termination-log")
	linked.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "DSN", Value: "host=$(ENGINE_DB_SERVICE_HOST) port=$(ENGINE_DB_SERVICE_PORT)"}}
	unlinked := helperPod(ns, "unlinked", "--term", "/dev/termination-log")
	unlinked.Spec.EnableServiceLinks = ptr.To(false)

	got := waitPod(t, createPod(t, linked), 20*time.Second, "Succeeded", terminal)
	r, _ := terminationReport(t, got)
	for k, want := range map[string]string{
		"ENGINE_DB_SERVICE_HOST": "10.0.0.9", "ENGINE_DB_SERVICE_PORT": "15432",
		"ENGINE_DB_SERVICE_PORT_POSTGRES": "15432", "ENGINE_DB_SERVICE_PORT_METRICS": "19187",
		"DSN": "host=10.0.0.9 port=15432",
	} {
		if r.Env[k] != want {
			t.Errorf("env %s = %q, want %q", k, r.Env[k], want)
		}
	}
	if v, ok := r.Env["IDLE_SERVICE_HOST"]; ok {
		t.Errorf("IDLE_SERVICE_HOST = %q for a Service without a ready endpoint, want none", v)
	}
	got = waitPod(t, createPod(t, unlinked), 20*time.Second, "Succeeded", terminal)
	if r, _ := terminationReport(t, got); r.Env["ENGINE_DB_SERVICE_HOST"] != "" {
		t.Errorf("a pod with enableServiceLinks false got ENGINE_DB_SERVICE_HOST=%q", r.Env["ENGINE_DB_SERVICE_HOST"])
	}
}
