package install

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/vacuumops/vacuum-operator/internal/promtool"
)

// TestAlertsPassTheirPromtoolUnitTests runs config/prometheus/alerts_test.yaml: each alert
// fires where it should and stays quiet where it should not; and every vacuum_ metric an
// alert reads is one the manager or the runner registers.
func TestAlertsPassTheirPromtoolUnitTests(t *testing.T) {
	dir := filepath.Join(repoRoot(), "config", "prometheus")
	alerts := filepath.Join(dir, "alerts.yaml")
	promtool.CheckRules(t, alerts)
	promtool.TestRules(t, filepath.Join(dir, "alerts_test.yaml"))

	b, err := os.ReadFile(alerts)
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	known := registeredNames()
	var alertNames []string
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			alertNames = append(alertNames, r.Alert)
			for _, n := range ourMetric.FindAllString(r.Expr, -1) {
				if !slices.Contains(known, n) {
					t.Errorf("alert %s: %s is registered by neither the manager nor the runner", r.Alert, n)
				}
			}
		}
	}
	for _, want := range []string{"VacuumPolicyNoRecentSuccess", "VacuumRunPendingTooLong", "VacuumCorruptionFound", "VacuumRunSlowerThanDeadline"} {
		if !slices.Contains(alertNames, want) {
			t.Errorf("no alert %s", want)
		}
	}
}
