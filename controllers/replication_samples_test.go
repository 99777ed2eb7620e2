package controllers

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// envSecret is the Secret and key an env variable of c takes its value from.
func envSecret(c corev1.Container, name string) (string, string) {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			return e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key
		}
	}
	return "", ""
}

// TestReplicationSamplesFitTogether: the primary and standby pair agree with each other:
// each Service selects its own StatefulSet's pods and not the other's; the primary serves
// (--init), the standby serves --standby-of the primary Service's variables with
// --basebackup-if-empty and a --name, connecting as a role whose users-file line carries
// the replication marker and the Secret's password; both keep their data on their claim and
// listen on their pod's address from the downward API ($(POD_IP), never 0.0.0.0: the local
// dev cluster's pods share the host's network). The online run sample targets the primary's
// Service and database as a role of the users file, without TLS (the pair has no certificate).
func TestReplicationSamplesFitTogether(t *testing.T) {
	s := readServerSamples(t, "engine_server_replication.yaml")
	primary, standby := s.statefulSets["orders-db"], s.statefulSets["orders-db-standby"]
	if primary.Name == "" || standby.Name == "" {
		t.Fatalf("StatefulSets %v, want orders-db and orders-db-standby", s.statefulSets)
	}
	for _, sts := range []appsv1.StatefulSet{primary, standby} {
		svc, ok := s.services[sts.Spec.ServiceName]
		if !ok {
			t.Fatalf("%s: serviceName %q is not a Service of the file", sts.Name, sts.Spec.ServiceName)
		}
		for _, other := range s.statefulSets {
			selects := labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(other.Spec.Template.Labels))
			if selects != (other.Name == sts.Name) {
				t.Errorf("Service %s selects %s's pods: %v, want only its own StatefulSet's", svc.Name, other.Name, selects)
			}
		}
		if p := svc.Spec.Ports[0]; p.Name != "postgres" || p.TargetPort.StrVal != "postgres" {
			t.Errorf("Service %s's first port %+v, want postgres", svc.Name, p)
		}
		c := sts.Spec.Template.Spec.Containers[0]
		if c.Command[0] != "/engine-server" || c.Command[1] != "serve" {
			t.Errorf("%s command %v, want /engine-server serve", sts.Name, c.Command)
		}
		mount := ""
		for _, m := range c.VolumeMounts {
			if len(sts.Spec.VolumeClaimTemplates) == 1 && m.Name == sts.Spec.VolumeClaimTemplates[0].Name {
				mount = m.MountPath
			}
		}
		if mount == "" || !strings.HasPrefix(flagValue(c.Command, "data"), mount+"/") {
			t.Errorf("%s: --data %q is not under its claim template's mount", sts.Name, flagValue(c.Command, "data"))
		}
		ports := map[string]int32{}
		for _, p := range c.Ports {
			ports[p.Name] = p.ContainerPort
		}
		for flag, port := range map[string]string{"listen": "postgres", "metrics-listen": "metrics"} {
			if got, want := flagValue(c.Command, flag), fmt.Sprintf("$(POD_IP):%d", ports[port]); got != want {
				t.Errorf("%s: --%s %q, want %q (the pod's address, port %s)", sts.Name, flag, got, want, port)
			}
		}
		podIP := false
		for _, e := range c.Env {
			podIP = podIP || e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP"
		}
		if !podIP {
			t.Errorf("%s: no env POD_IP from the downward API's status.podIP", sts.Name)
		}
	}
	pc, sc := primary.Spec.Template.Spec.Containers[0], standby.Spec.Template.Spec.Containers[0]
	if flagValue(sc.Command, "data") == "" || containsArg(sc.Command, "--init") || !containsArg(pc.Command, "--init") {
		t.Errorf("the primary must init its directory and the standby must not (it takes a base backup): %v / %v", pc.Command, sc.Command)
	}
	want := "$(ORDERS_DB_SERVICE_HOST):$(ORDERS_DB_SERVICE_PORT)"
	if got := flagValue(sc.Command, "standby-of"); got != want || primary.Spec.ServiceName != "orders-db" {
		t.Errorf("--standby-of %q, want %q (the primary Service orders-db's variables)", got, want)
	}
	if !ptr.Deref(standby.Spec.Template.Spec.EnableServiceLinks, true) {
		t.Error("the standby turns the Service variables off, which --standby-of needs")
	}
	if !containsArg(sc.Command, "--basebackup-if-empty") || flagValue(sc.Command, "name") == "" {
		t.Errorf("standby command %v, want --basebackup-if-empty and a --name", sc.Command)
	}
	userSecret, userKey := envSecret(sc, "PGUSER")
	pwSecret, pwKey := envSecret(sc, "PGPASSWORD")
	if userSecret == "" || userSecret != pwSecret {
		t.Fatalf("the standby's PGUSER and PGPASSWORD come from %q and %q, want one Secret", userSecret, pwSecret)
	}
	repl := s.secrets[userSecret].StringData
	line := repl[userKey] + ":" + repl[pwKey] + " replication"
	for _, sts := range []appsv1.StatefulSet{primary, standby} {
		var users string
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Secret != nil {
				users = s.secrets[v.Secret.SecretName].StringData["users"]
			}
		}
		if !containsArg(strings.Split(strings.TrimSpace(users), "\n"), line) {
			t.Errorf("%s's users file has no line %q (the replication role with its marker): %q", sts.Name, line, users)
		}
	}
	if flagValue(pc.Command, "database-name") != flagValue(sc.Command, "database-name") {
		t.Errorf("primary database %q, standby %q: a standby serves the primary's database", flagValue(pc.Command, "database-name"), flagValue(sc.Command, "database-name"))
	}

	var run vacuumv1alpha1.VacuumRun
	if err := yaml.UnmarshalStrict(sampleDocs(t, "vacuum_v1alpha1_vacuumrun_replication.yaml")[0], &run); err != nil {
		t.Fatalf("online run sample: %v", err)
	}
	srv := run.Spec.Target.Server
	if srv == nil {
		t.Fatal("the online run sample has no server target")
	}
	if svc := s.services[srv.Service]; srv.Service != primary.Spec.ServiceName || svc.Spec.Ports[0].Port != ptr.Deref(srv.Port, 5432) {
		t.Errorf("the run targets Service %q port %d, want the primary's %q on its first port", srv.Service, ptr.Deref(srv.Port, 5432), primary.Spec.ServiceName)
	}
	if srv.Database != flagValue(pc.Command, "database-name") {
		t.Errorf("the run's database %q, the primary's %q", srv.Database, flagValue(pc.Command, "database-name"))
	}
	if srv.TLS == nil || srv.TLS.Mode != vacuumv1alpha1.TLSDisable || flagValue(pc.Command, "tls-cert") != "" {
		t.Errorf("the run's tls %+v against a primary without a certificate, want mode Disable", srv.TLS)
	}
	cred, ok := s.secrets[srv.CredentialsSecret.Name]
	if !ok {
		t.Fatalf("the run's credentialsSecret %q is not in engine_server_replication.yaml", srv.CredentialsSecret.Name)
	}
	users := s.secrets[primary.Spec.Template.Spec.Volumes[0].Secret.SecretName].StringData["users"]
	if line := cred.StringData["username"] + ":" + cred.StringData["password"]; !containsArg(strings.Split(strings.TrimSpace(users), "\n"), line) {
		t.Errorf("the run's Secret %s (%q) is not a line of the primary's users file %q", cred.Name, line, users)
	}
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}
