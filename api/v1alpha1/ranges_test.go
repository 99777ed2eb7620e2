package v1alpha1_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// The ranges and defaults of a run's spec have one source, the runner's constants
// (runnerwire), which the runner enforces; the CRD states them again as markers so the API
// server refuses a bad value at admission. These tests read the generated CRD schemas (what
// the API server validates) and fail when a marker and a constant disagree.

func loadSchema(t *testing.T, file string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == vacuumv1alpha1.GroupVersion.Version {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("%s has no version %s", file, vacuumv1alpha1.GroupVersion.Version)
	return nil
}

// at walks a dotted path ("spec.throttle.costLimit"; "[]" steps into a list's items).
func at(t *testing.T, s *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	for _, step := range strings.Split(path, ".") {
		items := strings.HasSuffix(step, "[]")
		p, ok := s.Properties[strings.TrimSuffix(step, "[]")]
		if !ok {
			t.Fatalf("schema has no %s (at %q)", path, step)
		}
		s = &p
		if items {
			s = s.Items.Schema
		}
	}
	return s
}

func defaultOf(t *testing.T, s *apiextensionsv1.JSONSchemaProps) string {
	t.Helper()
	if s.Default == nil {
		return "<none>"
	}
	var v any
	if err := json.Unmarshal(s.Default.Raw, &v); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(v)
}

func rules(s *apiextensionsv1.JSONSchemaProps) string {
	var out []string
	for _, r := range s.XValidations {
		out = append(out, r.Rule)
	}
	return strings.Join(out, " && ")
}

func num(p *float64) string {
	if p == nil {
		return "<none>"
	}
	return fmt.Sprint(*p)
}

func quantity(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }

type intRange struct {
	field    string
	min, max int64
	def      string // "<none>" when the field has no default
}

func TestCRDRangesAreTheRunnersConstants(t *testing.T) {
	i := func(v int64) string { return fmt.Sprint(v) }
	throttle := []intRange{
		{"costLimit", runnerwire.MinCostLimit, runnerwire.MaxCostLimit, i(runnerwire.DefaultCostLimit)},
		{"pageHitCost", 0, runnerwire.MaxPageCost, i(runnerwire.DefaultPageHitCost)},
		{"pageMissCost", 0, runnerwire.MaxPageCost, i(runnerwire.DefaultPageMissCost)},
		{"pageDirtyCost", 0, runnerwire.MaxPageCost, i(runnerwire.DefaultPageDirtyCost)},
	}
	ints := []intRange{
		{"parallelism", runnerwire.MinParallelism, runnerwire.MaxParallelism, i(runnerwire.DefaultParallelism)},
		{"indexWorkers", 0, runnerwire.MaxIndexWorkers, "0"},
		{"minDeadTuplePercent", 0, runnerwire.MaxDeadTuplePercent, "0"},
	}
	for _, r := range throttle {
		ints = append(ints, intRange{"throttle." + r.field, r.min, r.max, r.def})
		ints = append(ints, intRange{"tableOverrides[].throttle." + r.field, r.min, r.max, "<none>"})
	}
	for _, file := range []string{"vacuum.vacuumops.io_vacuumpolicies.yaml", "vacuum.vacuumops.io_vacuumruns.yaml"} {
		schema := loadSchema(t, file)
		for _, r := range ints {
			s := at(t, schema, "spec."+r.field)
			if s.Minimum == nil || s.Maximum == nil || int64(*s.Minimum) != r.min || int64(*s.Maximum) != r.max {
				t.Errorf("%s: spec.%s has minimum %s maximum %s, the runner accepts %d to %d", file, r.field, num(s.Minimum), num(s.Maximum), r.min, r.max)
			}
			if got := defaultOf(t, s); got != r.def {
				t.Errorf("%s: spec.%s defaults to %s, the runner to %s", file, r.field, got, r.def)
			}
		}
		for _, f := range []string{"target.tables[]", "tableOverrides[].table"} {
			if s := at(t, schema, "spec."+f); s.MaxLength == nil || *s.MaxLength != runnerwire.MaxTableNameLength {
				t.Errorf("%s: spec.%s maxLength %v, the runner's table names are at most %d", file, f, s.MaxLength, runnerwire.MaxTableNameLength)
			}
		}
		// Byte sizes and the cost delay are checked by CEL rules, which must name the
		// runner's bounds, and default to the runner's defaults.
		cel := []struct {
			field  string
			bounds []string
			def    string
		}{
			// ringSize and bufferPoolSize have no CRD default: it depends on the target's form
			// (the controller applies the runner's for a volume).
			{"ringSize", []string{quantity(runnerwire.MinRingSize), quantity(runnerwire.MaxRingSize)}, "<none>"},
			{"bufferPoolSize", []string{quantity(runnerwire.MinBufferPoolSize), quantity(runnerwire.MaxBufferPoolSize)}, "<none>"},
			{"maintenanceWorkMem", []string{quantity(runnerwire.MinMaintenanceWorkMem), quantity(runnerwire.MaxMaintenanceWorkMem)}, quantity(runnerwire.DefaultMaintenanceWorkMem)},
			{"throttle.costDelay", []string{"duration('0ms')", "duration('" + runnerwire.MaxCostDelay.String() + "')"}, runnerwire.DefaultCostDelay.String()},
			{"tableOverrides[].throttle.costDelay", []string{"duration('0ms')", "duration('" + runnerwire.MaxCostDelay.String() + "')"}, "<none>"},
		}
		for _, c := range cel {
			s := at(t, schema, "spec."+c.field)
			rule := rules(s)
			for _, b := range c.bounds {
				if !strings.HasPrefix(b, "duration(") {
					b = "quantity('" + b + "')"
				}
				if !strings.Contains(rule, b) {
					t.Errorf("%s: spec.%s's rule %q does not name the runner's bound %s", file, c.field, rule, b)
				}
			}
			if got := defaultOf(t, s); got != c.def {
				t.Errorf("%s: spec.%s defaults to %s, the runner to %s", file, c.field, got, c.def)
			}
		}
	}
}

func TestStatusTablesCapIsTheCRDsMaxItems(t *testing.T) {
	s := at(t, loadSchema(t, "vacuum.vacuumops.io_vacuumruns.yaml"), "status.tables")
	if s.MaxItems == nil || *s.MaxItems != vacuumv1alpha1.MaxStatusTables {
		t.Errorf("status.tables maxItems %v, MaxStatusTables %d", s.MaxItems, vacuumv1alpha1.MaxStatusTables)
	}
}
