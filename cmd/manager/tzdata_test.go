package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The image `make image-tar` builds holds the binaries and no /usr/share/zoneinfo, so a
// policy's timeZone works there only if the binaries carry Go's time-zone database.
func TestTheBinariesEmbedTheTimeZoneDatabase(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	for _, pkg := range []string{"../manager", "../vacuum-runner"} {
		out, err := exec.Command(goBin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		if !slices.Contains(strings.Fields(string(out)), "time/tzdata") {
			t.Errorf("%s does not import time/tzdata", pkg)
		}
	}
}
