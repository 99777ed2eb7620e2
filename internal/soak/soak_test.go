package soak

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	shortKills = flag.Int("soak.kills", 36, "crashes of TestShortSoakLosesNoCommittedRowAcrossThirtyCrashes")
	soakSeed   = flag.Uint64("soak.seed", 0, "seed of the short soak (0 = time)")
)

// childArgsEnv carries a child's arguments (newline-separated) when this
// test binary is re-executed as a soak child.
const childArgsEnv = "SOAK_TEST_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(childArgsEnv); ok {
		os.Exit(ChildMain(strings.Split(args, "\n"), os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// testChild re-executes this test binary as a child.
func testChild(args []string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childArgsEnv+"="+strings.Join(args, "\n"))
	return cmd
}

// TestShortSoakLosesNoCommittedRowAcrossThirtyCrashes is the short crash
// soak of `make test`: at least 30 crashes, SIGKILLs and simulated power
// losses, some inside crash recovery, each followed by a full comparison
// with the ledger and a clean Check.
func TestShortSoakLosesNoCommittedRowAcrossThirtyCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("soak skipped in -short mode")
	}
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	base := t.TempDir()
	cfg := Config{
		Data: filepath.Join(base, "data"), Ledger: filepath.Join(base, "ledger"),
		Seed: seed, Kills: *shortKills, Rows: 400, MaxRun: 400 * time.Millisecond,
		RecoveryCrashShare: 0.15, Command: testChild, Logf: t.Logf,
	}
	t.Logf("seed %d", seed)
	fig, err := Run(context.Background(), cfg)
	if fig != nil {
		t.Logf("figures:\n%s", fig)
	}
	if err != nil {
		t.Fatal(err)
	}
	if fig.Crashes < *shortKills || fig.Verifications < *shortKills-fig.RecoveryCrashes {
		t.Fatalf("%d crashes and %d verifications, want %d", fig.Crashes, fig.Verifications, *shortKills)
	}
	if fig.SIGKILLs == 0 || fig.PowerLoss == 0 {
		t.Fatalf("crash kinds: %d SIGKILL, %d power loss; want both", fig.SIGKILLs, fig.PowerLoss)
	}
	if fig.Commits == 0 || fig.Replays == 0 {
		t.Fatalf("%d commits, %d verifications replayed WAL: the soak did not exercise recovery", fig.Commits, fig.Replays)
	}
}

func TestSoakRefusesALedgerInsideTheDataDirectory(t *testing.T) {
	dir := t.TempDir()
	_, err := Run(context.Background(), Config{Data: dir, Ledger: filepath.Join(dir, "ledger"), Kills: 1, Command: testChild})
	if err == nil || !strings.Contains(err.Error(), "outside the data directory") {
		t.Fatalf("Run = %v, want a refusal naming the ledger's place", err)
	}
}
