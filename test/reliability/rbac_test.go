package reliability

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// roleDoc is a Role or ClusterRole from config/rbac/role.yaml.
type roleDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Rules []rbacv1.PolicyRule `json:"rules"`
}

// repoRoot is the module root (this file is test/reliability/rbac_test.go).
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func loadRoles(t *testing.T) []roleDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatalf("the generated RBAC (make manifests): %v", err)
	}
	var out []roleDoc
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		if len(bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(doc), []byte("---")))) == 0 {
			continue
		}
		var r roleDoc
		if err := yaml.UnmarshalStrict(doc, &r); err != nil {
			t.Fatalf("role.yaml: %v", err)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		t.Fatal("role.yaml holds no role")
	}
	return out
}

// grant is one (apiGroup, resource, verb) a role allows, with where.
type grant struct {
	group, resource, verb string
	clusterWide           bool
	resourceNames         []string
	role                  string
}

func grants(roles []roleDoc) []grant {
	var out []grant
	for _, r := range roles {
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out = append(out, grant{group: g, resource: res, verb: v, clusterWide: r.Kind == "ClusterRole",
							resourceNames: rule.ResourceNames, role: r.Kind + "/" + r.Metadata.Name})
					}
				}
			}
		}
	}
	return out
}

// clusterWideAllowed is everything the manager may do in every namespace,
// by "group/resource": what running vacuums in the users' namespaces needs.
var clusterWideAllowed = map[string][]string{
	"vacuum.vacuumops.io/vacuumpolicies":        {"get", "list", "watch"},
	"vacuum.vacuumops.io/vacuumpolicies/status": {"get", "patch", "update"},
	"vacuum.vacuumops.io/vacuumruns":            {"get", "list", "watch", "create", "patch", "update", "delete"},
	"vacuum.vacuumops.io/vacuumruns/status":     {"get", "patch", "update"},
	"vacuum.vacuumops.io/vacuumruns/finalizers": {"update"},
	"/pods":                      {"get", "list", "watch", "create", "delete"},
	"/secrets":                   {"create", "delete"}, // run tokens, never read back
	"/persistentvolumeclaims":    {"get", "list", "watch"},
	"/events":                    {"create", "patch"},
	"events.k8s.io/events":       {"create", "patch"},
	"coordination.k8s.io/leases": {"get", "create", "update", "delete"}, // one run per volume
	"apps/deployments/scale":     {"get", "patch", "update"},            // quiesce: replicas only, never the pod template
	"apps/statefulsets/scale":    {"get", "patch", "update"},
	// online runs: a server target names a Service, reached through its EndpointSlices
	// (read directly, not cached: get and list only)
	"/services":                       {"get"},
	"discovery.k8s.io/endpointslices": {"list"},
}

// TestManagerRBACIsLeastPrivilege reads the generated config/rbac/role.yaml:
// no wildcards; Secrets only created and deleted (run tokens), read only
// by name in the manager's own namespace (its key), never listed or
// watched; no pods/exec or other ways into a container or node; no RBAC
// or impersonation; cluster-wide only what is listed in clusterWideAllowed.
func TestManagerRBACIsLeastPrivilege(t *testing.T) {
	for _, g := range grants(loadRoles(t)) {
		key := g.group + "/" + g.resource
		switch {
		case g.group == "*" || g.resource == "*" || g.verb == "*":
			t.Errorf("%s: wildcard in %q %q", g.role, key, g.verb)
		case slices.Contains([]string{"escalate", "bind", "impersonate"}, g.verb) || g.group == "rbac.authorization.k8s.io":
			t.Errorf("%s: may change or bypass RBAC: %s %s", g.role, g.verb, key)
		case g.group == "" && slices.Contains([]string{"pods/exec", "pods/attach", "pods/portforward", "pods/ephemeralcontainers",
			"nodes", "nodes/proxy", "serviceaccounts/token", "serviceaccounts"}, g.resource):
			t.Errorf("%s: grants %s on %s: a way into containers, nodes or identities", g.role, g.verb, g.resource)
		case g.group == "" && g.resource == "secrets" && (g.verb == "list" || g.verb == "watch"):
			t.Errorf("%s: %s on Secrets: the manager must never enumerate Secrets", g.role, g.verb)
		case g.group == "" && g.resource == "secrets" && !g.clusterWide && g.verb == "get":
			if len(g.resourceNames) != 1 || !strings.HasSuffix(g.resourceNames[0], "-key") {
				t.Errorf("%s: get on Secrets must name the manager's own key (resourceNames %v)", g.role, g.resourceNames)
			}
		case g.group == "apps" && !strings.Contains(g.resource, "/") && slices.Contains([]string{"patch", "update", "create"}, g.verb):
			t.Errorf("%s: %s on %s can rewrite the pod template (any image, any service account of that namespace): "+
				"scale writers through the %s/scale subresource instead", g.role, g.verb, key, g.resource)
		case g.clusterWide && !slices.Contains(clusterWideAllowed[key], g.verb):
			t.Errorf("%s: cluster-wide %s on %s is not needed (allowed there: %v)", g.role, g.verb, key, clusterWideAllowed[key])
		}
	}
}

// TestSecretsAreReadOnlyByNameInTheManagersNamespace: there is exactly one
// way to read a Secret, get on the key in the manager's namespace.
func TestSecretsAreReadOnlyByNameInTheManagersNamespace(t *testing.T) {
	var reads []grant
	for _, g := range grants(loadRoles(t)) {
		if g.group == "" && g.resource == "secrets" && g.verb == "get" {
			reads = append(reads, g)
		}
	}
	if len(reads) != 1 || reads[0].clusterWide || len(reads[0].resourceNames) != 1 {
		t.Fatalf("Secret reads %+v: want one namespaced get restricted to the key's name", reads)
	}
}

// kubectlPath finds a kubectl for `kubectl kustomize`: envtest's (KUBEBUILDER_ASSETS), else
// the one on PATH.
func kubectlPath(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if p := filepath.Join(dir, "kubectl"); fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("no kubectl to build config/namespaced (set KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh) or put kubectl on PATH): %v", err)
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestNamespacedInstallGrantsNothingClusterWide builds config/namespaced as `kubectl apply -k`
// would: the manager watches only the namespaces it is given, and its rules are bound in
// those namespaces only, with no ClusterRoleBinding at all.
func TestNamespacedInstallGrantsNothingClusterWide(t *testing.T) {
	out, err := exec.Command(kubectlPath(t), "kustomize", filepath.Join(repoRoot(t), "config", "namespaced")).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize config/namespaced: %v\n%s", err, out)
	}
	var bindings, watchArgs []string
	for _, doc := range bytes.Split(out, []byte("\n---")) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			RoleRef rbacv1.RoleRef `json:"roleRef"`
			Spec    struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Args []string `json:"args"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatalf("config/namespaced output: %v", err)
		}
		switch obj.Kind {
		case "ClusterRoleBinding":
			t.Errorf("ClusterRoleBinding %s: a namespaced install grants nothing cluster-wide", obj.Metadata.Name)
		case "RoleBinding":
			bindings = append(bindings, obj.Metadata.Namespace+":"+obj.RoleRef.Kind+"/"+obj.RoleRef.Name)
		case "Deployment":
			for _, c := range obj.Spec.Template.Spec.Containers {
				for _, a := range c.Args {
					if strings.HasPrefix(a, "--watch-namespaces=") {
						watchArgs = append(watchArgs, a)
					}
				}
			}
		}
	}
	if !slices.Contains(bindings, "team-a:ClusterRole/vacuum-operator-manager-role") {
		t.Errorf("no RoleBinding of the manager's rules in the watched namespace team-a; bindings: %v", bindings)
	}
	if !slices.Equal(watchArgs, []string{"--watch-namespaces=team-a"}) {
		t.Errorf("manager args %v: want --watch-namespaces=team-a, the namespaces bound", watchArgs)
	}
}
