package docs_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/vacuumops/vacuum-operator"

// repoRoot is the module's root: this package's parent directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goList runs `go list` with args in the repository and returns its lines.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return strings.Fields(string(out))
}

// mapRow is one row of a Markdown package map: the package named in its first cell (in
// backticks) and the rest of its cells.
type mapRow struct {
	pkg   string
	cells []string
	line  int
}

var firstCell = regexp.MustCompile("^\\|\\s*`([^`]+)`")

// packageMap reads the table under the heading "## Package map" of file (relative to the
// repository root).
func packageMap(t *testing.T, file string) []mapRow {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []mapRow
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Package map"
		case in:
			if m := firstCell.FindStringSubmatch(line); m != nil {
				cells := strings.Split(strings.Trim(line, "| "), "|")
				for i := range cells {
					cells[i] = strings.TrimSpace(cells[i])
				}
				rows = append(rows, mapRow{pkg: m[1], cells: cells, line: n})
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s has no table under \"## Package map\"", file)
	}
	return rows
}

// TestDesignPackageMapNamesEveryPackage holds docs/design.md's package map to `go list ./...`:
// every package is named once, and every row names a package that exists.
func TestDesignPackageMapNamesEveryPackage(t *testing.T) {
	var listed []string
	for _, p := range goList(t, "./...") {
		listed = append(listed, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
	}
	named := map[string]int{}
	for _, r := range packageMap(t, "docs/design.md") {
		if prev, dup := named[r.pkg]; dup {
			t.Errorf("docs/design.md:%d names package %s again (first at line %d): keep one row", r.line, r.pkg, prev)
		}
		named[r.pkg] = r.line
	}
	for _, p := range listed {
		if _, ok := named[p]; !ok {
			t.Errorf("package %s is not in docs/design.md's package map: add the row\n\t| `%s` | <its one concern> |", p, p)
		}
	}
	for p, line := range named {
		if !slices.Contains(listed, p) {
			t.Errorf("docs/design.md:%d names package %s, which `go list ./...` does not list: remove or rename the row", line, p)
		}
	}
}

// TestEngineMapMatchesImports holds internal/engine/ARCHITECTURE.md's package map to the
// engine's packages and to the engine packages each one imports.
func TestEngineMapMatchesImports(t *testing.T) {
	const file, prefix = "internal/engine/ARCHITECTURE.md", module + "/internal/engine"
	rows := map[string]mapRow{}
	for _, r := range packageMap(t, file) {
		rows[r.pkg] = r
	}
	listed := goList(t, "-f", "{{.ImportPath}}:{{join .Imports \",\"}}", "./internal/engine/...")
	seen := map[string]bool{}
	for _, l := range listed {
		path, imports, _ := strings.Cut(l, ":")
		name := strings.TrimPrefix(strings.TrimPrefix(path, prefix), "/")
		if name == "" {
			name = "engine"
		}
		seen[name] = true
		var want []string
		for _, imp := range strings.Split(imports, ",") {
			switch {
			case imp == prefix:
				want = append(want, "engine")
			case strings.HasPrefix(imp, prefix+"/"):
				want = append(want, strings.TrimPrefix(imp, prefix+"/"))
			}
		}
		slices.Sort(want)
		wantCell := strings.Join(want, ", ")
		if wantCell == "" {
			wantCell = "none"
		}
		r, ok := rows[name]
		if !ok {
			t.Errorf("engine package %s is not in %s's package map: add the row\n\t| `%s` | <its one concern> | %s |", name, file, name, wantCell)
			continue
		}
		if len(r.cells) < 3 {
			t.Errorf("%s:%d: the row of %s has no imports column", file, r.line, name)
			continue
		}
		if got := r.cells[2]; got != wantCell {
			t.Errorf("%s:%d: package %s imports (engine packages) %q, the map says %q: write %q", file, r.line, name, wantCell, got, wantCell)
		}
	}
	for name, r := range rows {
		if !seen[name] {
			t.Errorf("%s:%d names package %s, which `go list ./internal/engine/...` does not list: remove or rename the row", file, r.line, name)
		}
	}
}
