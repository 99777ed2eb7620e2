package install

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/yaml"

	"github.com/vacuumops/vacuum-operator/controllers"
	"github.com/vacuumops/vacuum-operator/internal/promtool"
	"github.com/vacuumops/vacuum-operator/internal/runner"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Templating struct {
		List []struct {
			Name       string      `json:"name"`
			Type       string      `json:"type"`
			Query      any         `json:"query"`
			Datasource *datasource `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title      string      `json:"title"`
		Datasource *datasource `json:"datasource"`
		Targets    []struct {
			RefID      string      `json:"refId"`
			Datasource *datasource `json:"datasource"`
			Expr       string      `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// registeredNames are the metric names the manager and the runner register.
func registeredNames() []string {
	reg := &namesOf{}
	controllers.NewMetrics(reg)
	return append(reg.names, runner.MetricNames()...)
}

// namesOf is a prometheus.Registerer that keeps the names of what is registered with it.
type namesOf struct{ names []string }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (n *namesOf) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			n.names = append(n.names, m[1])
		}
	}
	return nil
}

func (n *namesOf) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = n.Register(c)
	}
}

func (n *namesOf) Unregister(prometheus.Collector) bool { return false }

// grafanaVars are the dashboard's variables, replaced as Grafana would before a query.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$namespace", ".*")

// ourMetric finds the project's metric names in an expression: every vacuum_ identifier.
var ourMetric = regexp.MustCompile(`\bvacuum_[a-z0-9_]+\b`)

// TestDashboardUsesItsDatasourceVariableAndOnlyRegisteredMetrics decodes the Grafana
// dashboard: a datasource template variable, used by every panel and target; every
// expression parses as PromQL (promtool check rules, Prometheus's own parser, on the
// expressions as recording rules); every vacuum_ metric it names is one the manager or the
// runner registers.
func TestDashboardUsesItsDatasourceVariableAndOnlyRegisteredMetrics(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(), "config", "grafana", "vacuum-operator.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	hasVar := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			hasVar = true
		}
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
			t.Errorf("variable %s: datasource %+v, want the ${datasource} variable", v.Name, v.Datasource)
		}
	}
	if !hasVar {
		t.Fatal("no datasource template variable of type datasource, query prometheus")
	}
	known := registeredNames()
	var rules []map[string]string
	for _, p := range d.Panels {
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no target", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %s: datasource %+v, want the ${datasource} variable", p.Title, tg.RefID, tg.Datasource)
			}
			expr := grafanaVars.Replace(tg.Expr)
			names := ourMetric.FindAllString(expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q target %s names no vacuum_ metric: %s", p.Title, tg.RefID, tg.Expr)
			}
			for _, n := range names {
				if !slices.Contains(known, n) {
					t.Errorf("panel %q target %s: %s is registered by neither the manager nor the runner", p.Title, tg.RefID, n)
				}
			}
			rules = append(rules, map[string]string{"record": fmt.Sprintf("dashboard:panel_%d:%s", len(rules), strings.ToLower(tg.RefID)), "expr": expr})
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, out, 0o600); err != nil {
		t.Fatal(err)
	}
	promtool.CheckRules(t, file)
}
