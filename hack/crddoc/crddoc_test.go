package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// renderTiny renders the fixture CRD with the given collapsed paths.
func renderTiny(t *testing.T, collapse ...string) string {
	t.Helper()
	crds, err := readCRDs("testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	o := options{collapse: map[string]bool{}}
	for _, c := range collapse {
		o.collapse[c] = true
	}
	var b bytes.Buffer
	if err := render(&b, crds, "testdata/tiny", o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRenderListsEveryFieldWithTypeDefaultAndValidation(t *testing.T) {
	doc := renderTiny(t)
	for _, tc := range []struct{ what, line string }{
		{"kind header", "## Widget\n\n`example.com/v1`, namespaced, plural `widgets`, short names `wd`, status subresource. Widget is a tiny fixture.\n"},
		{"printer column", "| Phase | string | `.status.phase` |\n"},
		{"required int with range and default; description on one line, pipe escaped",
			"| `spec.size` | int32 | `3` | required; 1 to 10 | Size is how big, 1 to 10. Second line \\| with a pipe. |\n"},
		{"enum with string default; angle brackets as entities",
			"| `spec.mode` | string | `Fast` | one of `Fast`, `Slow` | Mode is Fast or Slow; the run is named &lt;widget&gt;-once. |\n"},
		{"quantity: no regexp, CEL message", "| `spec.memory` | quantity | `64Mi` | memory must be at least 1Mi | Memory of the widget. |\n"},
		{"length and pattern", "| `spec.name` | string |  | length 1 to 63; pattern `^[a-z]+$` |  |\n"},
		{"map", "| `spec.labels` | map[string]string |  |  |  |\n"},
		{"list of objects keyed by name", "| `spec.parts` | []object |  | items <= 4; one item per `name` | Parts of the widget. |\n"},
		{"list item fields", "| `spec.parts[].name` | string |  | required |  |\n"},
		{"exclusive minimum", "| `spec.parts[].weight` | int64 |  | > 0 |  |\n"},
		{"nested object", "| `spec.affinity.nodeAffinity.weight` | int32 |  |  |  |\n"},
		{"status section", "### Widget.status\n"},
		{"formatted string", "| `status.since` | string (date-time) |  |  |  |\n"},
	} {
		if !strings.Contains(doc, tc.line) {
			t.Errorf("%s: missing line\n%q\nin\n%s", tc.what, tc.line, doc)
		}
	}
	for _, absent := range []string{"`apiVersion`", "`kind`", "`metadata`", "[0-9]+"} {
		if strings.Contains(doc, absent) {
			t.Errorf("the reference should not contain %q:\n%s", absent, doc)
		}
	}
	// Fields come in name order within their object: affinity < labels < memory < ... < size.
	if a, s := strings.Index(doc, "`spec.affinity`"), strings.Index(doc, "`spec.size`"); a < 0 || s < a {
		t.Errorf("spec.affinity (at %d) should come before spec.size (at %d)", a, s)
	}
}

func TestCollapsedFieldsAreListedWithoutTheirSubFields(t *testing.T) {
	doc := renderTiny(t, "spec.affinity")
	if !strings.Contains(doc, "| `spec.affinity` | object |  |  | Affinity of the pod. (Fields: see the Kubernetes API reference.) |\n") {
		t.Errorf("collapsed field row missing or wrong:\n%s", doc)
	}
	if strings.Contains(doc, "spec.affinity.nodeAffinity") {
		t.Errorf("sub-fields of a collapsed field are listed:\n%s", doc)
	}
}

func TestCheckFailsOnAStaleFileAndPassesOnAFreshOne(t *testing.T) {
	out := filepath.Join(t.TempDir(), "api.md")
	var stdout, stderr bytes.Buffer
	args := []string{"--crds", "testdata/tiny", "--out", out}
	if err := run(append(args, "--check"), &stdout, &stderr); err == nil {
		t.Fatal("--check passed with no output file")
	}
	if err := run(args, &stdout, &stderr); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := run(append(args, "--check"), &stdout, &stderr); err != nil {
		t.Fatalf("--check right after writing: %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, bytes.Replace(b, []byte("1 to 10"), []byte("1 to 11"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run(append(args, "--check"), &stdout, &stderr); !errors.Is(err, errStale) {
		t.Fatalf("--check on an edited file: got %v, want errStale", err)
	}
}

func TestBadInputIsAnErrorNotAPanic(t *testing.T) {
	for _, tc := range []struct{ name, dir, want string }{
		{"not a CRD", "testdata/notacrd", "want CustomResourceDefinition"},
		{"no files", t.TempDir(), "no *.yaml files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readCRDs(tc.dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
