package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	enginefixture "github.com/vacuumops/vacuum-operator/internal/engine/fixture"
	"github.com/vacuumops/vacuum-operator/internal/runner"
)

// TestUpgradeCommandMakesAFormatOneDirectoryUsable: check refuses the
// directory made by the code before format 2 (exit 2, naming the upgrade
// command); upgrade converts it, a second upgrade says there is nothing to
// do, and then check is clean and stats lists both tables with their rows.
func TestUpgradeCommandMakesAFormatOneDirectoryUsable(t *testing.T) {
	dir := enginefixture.Extract(t, enginefixture.Upgrade("v1.tar.gz"))
	r := vr(t, nil, "check", "--data", dir)
	if r.code != 2 || !strings.Contains(r.stderr, "vacuum-runner upgrade") {
		t.Fatalf("check of a format-1 directory: exit %d, stderr %q; want exit 2 naming vacuum-runner upgrade", r.code, r.stderr)
	}
	var up runner.UpgradeOutput
	decode(t, mustVR(t, "upgrade", "--data", dir, "--json").stdout, &up)
	if up != (runner.UpgradeOutput{From: 1, To: engine.DataVersion, Upgraded: true}) {
		t.Fatalf("upgrade --json = %+v", up)
	}
	if out := mustVR(t, "upgrade", "--data", dir).stdout; !strings.Contains(out, fmt.Sprintf("already at format version %d", engine.DataVersion)) {
		t.Fatalf("second upgrade says %q", out)
	}
	checkOK(t, dir)
	var s runner.StatsOutput
	decode(t, mustVR(t, "stats", "--data", dir, "--json").stdout, &s)
	if len(s.Tables) != 2 || s.Tables[0].Name != "accounts" || s.Tables[0].LiveTuples != 258 || s.Tables[1].LiveTuples != 20 {
		t.Fatalf("stats after upgrade: %+v, want accounts with 258 live rows and notes with 20", s.Tables)
	}
}
