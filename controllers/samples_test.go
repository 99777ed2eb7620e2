package controllers

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// The online samples are three files that must agree: the engine server (StatefulSet,
// Service, Secrets), the load generator (Deployment) and the online VacuumPolicy. The
// envtest suite checks that the API server accepts them; this checks that they fit together.

// sampleDocs splits a sample file into its YAML documents (t is a test's or GinkgoT()).
func sampleDocs(t interface {
	Helper()
	Fatal(args ...any)
}, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "config", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// serverSamples are the objects of one engine-server sample file, decoded strictly, by name.
type serverSamples struct {
	secrets      map[string]corev1.Secret
	services     map[string]corev1.Service
	statefulSets map[string]appsv1.StatefulSet
}

// readServerSamples decodes config/samples/file, which may hold only Secrets, Services and
// StatefulSets.
func readServerSamples(t *testing.T, file string) serverSamples {
	t.Helper()
	s := serverSamples{secrets: map[string]corev1.Secret{}, services: map[string]corev1.Service{},
		statefulSets: map[string]appsv1.StatefulSet{}}
	for _, d := range sampleDocs(t, file) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(d, &meta); err != nil {
			t.Fatal(err)
		}
		var err error
		switch meta.Kind {
		case "Secret":
			var x corev1.Secret
			err = yaml.UnmarshalStrict(d, &x)
			s.secrets[x.Name] = x
		case "Service":
			var x corev1.Service
			err = yaml.UnmarshalStrict(d, &x)
			s.services[x.Name] = x
		case "StatefulSet":
			var x appsv1.StatefulSet
			err = yaml.UnmarshalStrict(d, &x)
			s.statefulSets[x.Name] = x
		default:
			t.Fatalf("%s: unexpected kind %q", file, meta.Kind)
		}
		if err != nil {
			t.Fatalf("%s %s: %v", file, meta.Kind, err)
		}
	}
	return s
}

// onlineSamples decodes the online samples strictly.
type onlineSamples struct {
	secrets map[string]corev1.Secret
	service corev1.Service
	server  appsv1.StatefulSet
	load    appsv1.Deployment
	policy  vacuumv1alpha1.VacuumPolicy
}

func readOnlineSamples(t *testing.T) onlineSamples {
	t.Helper()
	srv := readServerSamples(t, "engine_server.yaml")
	if len(srv.services) != 1 || len(srv.statefulSets) != 1 {
		t.Fatalf("engine_server.yaml: %d Services and %d StatefulSets, want one of each",
			len(srv.services), len(srv.statefulSets))
	}
	s := onlineSamples{secrets: srv.secrets}
	for _, svc := range srv.services {
		s.service = svc
	}
	for _, sts := range srv.statefulSets {
		s.server = sts
	}
	if err := yaml.UnmarshalStrict(sampleDocs(t, "load_generator.yaml")[0], &s.load); err != nil {
		t.Fatalf("load_generator.yaml: %v", err)
	}
	if err := yaml.UnmarshalStrict(sampleDocs(t, "vacuum_v1alpha1_vacuumpolicy_online.yaml")[0], &s.policy); err != nil {
		t.Fatalf("online policy: %v", err)
	}
	return s
}

// flagValue is the value of --name=value in args ("" when absent).
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func TestOnlineSamplesFitTogether(t *testing.T) {
	s := readOnlineSamples(t)
	srv := s.policy.Spec.Target.Server
	if srv == nil {
		t.Fatal("the online policy has no server target")
	}

	// The Service fronts the StatefulSet's pods on the policy's port, postgres first (a
	// pod's SHOP_DB_SERVICE_PORT is the first port).
	pod := s.server.Spec.Template
	if s.service.Name != srv.Service || s.server.Spec.ServiceName != s.service.Name {
		t.Errorf("Service %q, StatefulSet serviceName %q, policy service %q: want one name", s.service.Name, s.server.Spec.ServiceName, srv.Service)
	}
	if !labels.SelectorFromSet(s.service.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		t.Errorf("Service selector %v does not select the StatefulSet's pods %v", s.service.Spec.Selector, pod.Labels)
	}
	first := s.service.Spec.Ports[0]
	if first.Name != "postgres" || first.Port != ptr.Deref(srv.Port, 5432) || first.TargetPort.StrVal != "postgres" {
		t.Errorf("Service's first port %+v, want postgres on the policy's port %d", first, ptr.Deref(srv.Port, 5432))
	}
	c := pod.Spec.Containers[0]
	args := c.Command
	if args[0] != "/engine-server" || args[1] != "serve" {
		t.Fatalf("StatefulSet command %v, want /engine-server serve (the local node needs a command)", args)
	}
	var port int32
	for _, p := range c.Ports {
		if p.Name == "postgres" {
			port = p.ContainerPort
		}
	}
	if !strings.HasSuffix(flagValue(args, "listen"), ":"+strconv.Itoa(int(port))) {
		t.Errorf("--listen %q, want the container port postgres %d", flagValue(args, "listen"), port)
	}
	if flagValue(args, "database-name") != srv.Database {
		t.Errorf("--database-name %q, the policy's database %q", flagValue(args, "database-name"), srv.Database)
	}
	if flagValue(args, "tls-cert") == "" && srv.TLS != nil && srv.TLS.Mode != vacuumv1alpha1.TLSDisable {
		t.Errorf("the server has no certificate but the policy's tls.mode is %s", srv.TLS.Mode)
	}

	// The data directory is on the claim template's volume; the users file on the Secret's.
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if len(s.server.Spec.VolumeClaimTemplates) != 1 || !strings.HasPrefix(flagValue(args, "data"), mounts[s.server.Spec.VolumeClaimTemplates[0].Name]+"/") {
		t.Errorf("--data %q is not under the claim template's mount %v", flagValue(args, "data"), mounts)
	}
	var usersSecret string
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil && strings.HasPrefix(flagValue(args, "users-file"), mounts[v.Name]+"/") {
			usersSecret = v.Secret.SecretName
		}
	}
	users := s.secrets[usersSecret].StringData["users"]
	if users == "" {
		t.Fatalf("--users-file %q is not a key of a Secret volume", flagValue(args, "users-file"))
	}
	// Each client's Secret is a line of the users file.
	lc := s.load.Spec.Template.Spec.Containers[0]
	var appSecret string
	for _, e := range lc.Env {
		if e.Name == "PGUSER" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			appSecret = e.ValueFrom.SecretKeyRef.Name
		}
	}
	for _, name := range []string{srv.CredentialsSecret.Name, appSecret} {
		sec, ok := s.secrets[name]
		if !ok {
			t.Errorf("Secret %q (the policy's or the load's) is not in engine_server.yaml", name)
			continue
		}
		line := sec.StringData["username"] + ":" + sec.StringData["password"]
		if !slices.Contains(strings.Split(users, "\n"), line) {
			t.Errorf("Secret %s's %q is not a line of the users file %q", name, line, users)
		}
	}

	// The load reaches the same Service, database and table the policy vacuums.
	la := lc.Command
	if la[0] != "/vacuum-runner" || la[1] != "load" {
		t.Fatalf("load command %v, want /vacuum-runner load", la)
	}
	if flagValue(la, "service") != srv.Service || flagValue(la, "database") != srv.Database {
		t.Errorf("load --service %q --database %q, the policy's %q and %q", flagValue(la, "service"), flagValue(la, "database"), srv.Service, srv.Database)
	}
	if !slices.Contains(s.policy.Spec.Target.Tables, flagValue(la, "table")) {
		t.Errorf("load --table %q is not among the policy's tables %v", flagValue(la, "table"), s.policy.Spec.Target.Tables)
	}
	if flagValue(la, "sslmode") != "disable" && flagValue(args, "tls-cert") == "" {
		t.Errorf("load --sslmode %q against a server without a certificate", flagValue(la, "sslmode"))
	}
}
