package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideReferences are the ways a tracked file has pointed at something a reader of the
// repository cannot open: the first design brief (whose content is docs/design.md now), the
// shared folder beside the repository, and an issue tracker. Written as regular expressions so
// that this file does not match itself.
var outsideReferences = []struct {
	what string
	re   *regexp.Regexp
}{
	{"the design brief outside the repository (cite docs/design.md)", regexp.MustCompile(`\bDESIGN\.md\b`)},
	{"a shared folder outside the repository", regexp.MustCompile(`(\.\./|/work/)shared\b`)},
	{"an issue tracker", regexp.MustCompile(`(?i)\bissues? #?[0-9]+\b|closing notes? of the project's issues`)},
}

// TestNoTrackedFileCitesADocumentOutsideTheRepository reads every file git tracks (text files
// only) and fails on a reference a reader of the repository cannot follow.
func TestNoTrackedFileCitesADocumentOutsideTheRepository(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 50 {
		t.Fatalf("git ls-files listed only %d files", len(files))
	}
	for _, f := range files {
		if f == "go.sum" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(data, 0) >= 0 {
			continue // binary
		}
		for n, line := range strings.Split(string(data), "\n") {
			for _, ref := range outsideReferences {
				if m := ref.re.FindString(line); m != "" {
					t.Errorf("%s:%d cites %s (%q): say it in the repository, or cite a public source", f, n+1, ref.what, m)
				}
			}
		}
	}
}
