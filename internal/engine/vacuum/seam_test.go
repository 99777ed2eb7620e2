package vacuum_test

import (
	"go/build"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

const module = "github.com/vacuumops/vacuum-operator/"

// vacuumMayImport is every package of this module that package vacuum and
// its throttle may import directly: the engine's lower packages. The
// engine itself, and anything above it, reach vacuum only through Target
// and its Table.
var vacuumMayImport = []string{
	"internal/engine/btree",
	"internal/engine/buffer",
	"internal/engine/heap",
	"internal/engine/osthread",
	"internal/engine/page",
	"internal/engine/row",
	"internal/engine/storage",
	"internal/engine/tidstore",
	"internal/engine/txn",
	"internal/engine/usage",
	"internal/engine/vacuum/throttle",
	"internal/engine/vfs",
	"internal/engine/vm",
	"internal/engine/wal",
}

// TestVacuumImportsNoPackageAboveIt holds package vacuum to the seam: its
// own imports (test files aside) are on vacuumMayImport, and nothing it
// imports, directly or not, is package engine or a package outside
// internal/engine, so whatever vacuum needs of the engine goes through
// vacuum.Table.
func TestVacuumImportsNoPackageAboveIt(t *testing.T) {
	root := moduleRoot(t)
	imports := func(pkg string) []string {
		p, err := build.ImportDir(filepath.Join(root, pkg), 0)
		if err != nil {
			t.Fatalf("read package %s: %v", pkg, err)
		}
		var own []string
		for _, imp := range p.Imports {
			if rest, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, rest)
			}
		}
		return own
	}
	for _, pkg := range []string{"internal/engine/vacuum", "internal/engine/vacuum/throttle"} {
		for _, imp := range imports(pkg) {
			if !slices.Contains(vacuumMayImport, imp) {
				t.Errorf("%s imports %s, which is not on vacuumMayImport: ask the engine through vacuum.Table instead", pkg, imp)
			}
		}
	}
	seen := map[string]string{} // package -> the one that imported it first
	queue := []string{"internal/engine/vacuum"}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		for _, imp := range imports(pkg) {
			if _, ok := seen[imp]; ok {
				continue
			}
			seen[imp] = pkg
			queue = append(queue, imp)
			if imp == "internal/engine" || !strings.HasPrefix(imp, "internal/engine/") {
				t.Errorf("package vacuum reaches %s (imported by %s)", imp, pkg)
			}
		}
	}
	if len(seen) < len(vacuumMayImport) {
		t.Fatalf("walked only %d packages from internal/engine/vacuum: the walk is broken", len(seen))
	}
}

// TestTableMethodsAreTheSeamsList fixes what vacuum may ask of the engine
// about a table (its locks, FULL's files, the saved position of a lazy
// vacuum): widening vacuum.Table is a change to the seam and must change
// this list too.
func TestTableMethodsAreTheSeamsList(t *testing.T) {
	tt := reflect.TypeFor[vacuum.Table]()
	var got []string
	for m := range tt.Methods() {
		got = append(got, m.Name)
	}
	want := []string{"Abandon", "Lock", "NewRelfilenode", "Release", "SavePosition", "SavedPosition", "Swap"}
	if !slices.Equal(got, want) {
		t.Errorf("vacuum.Table has methods %v, want %v", got, want)
	}
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
