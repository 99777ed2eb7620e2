package controllers

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
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
// the replication marker and the Secret's password; both keep their data on their claim.
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
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}
