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
		Seed: seed, Kills: *shortKills, Rows: 400, MaxRun: 300 * time.Millisecond, PowerLossMaxOps: 1500,
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
	if fig.Crashes < *shortKills || fig.Verifications != fig.WriterCrashes {
		t.Fatalf("%d crashes (%d of writers) and %d verifications, want at least %d crashes and a verification after each writer's",
			fig.Crashes, fig.WriterCrashes, fig.Verifications, *shortKills)
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

// TestTornLedgerLineIsDroppedBeforeTheNextAppend: a child killed inside a
// large write leaves half a line; the driver must cut it before anything
// else is appended, and the half-written transaction counts as not
// committed.
func TestTornLedgerLineIsDroppedBeforeTheNextAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	body := "P a.1 I 1 2 3 x\nC a.1\nP a.2 U 1 4 5 y\nP a.2 I 2 6 7 z\nP a.2 D 9"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(path) // drops the torn tail
	if err != nil {
		t.Fatal(err)
	}
	pend, err := l.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(pend) != 1 || pend[0].Tx != "a.2" || len(pend[0].Ops) != 2 {
		t.Fatalf("in flight %+v: want a.2 with its two complete ops", pend)
	}
	if err := l.Resolve(pend[0], false); err != nil {
		t.Fatal(err)
	}
	again, err := OpenLedger(path)
	if err != nil {
		t.Fatalf("reparse after the resolution: %v", err)
	}
	if want := (State{1: {Grp: 2, N: 3, Val: "x"}}); stateDiff(again.State, want) != "" || again.Resolved[0] != 1 {
		t.Fatalf("state %v resolved %v: want only a.1 committed", again.State, again.Resolved)
	}
}

// A recovery-only child counts as crashed inside crash recovery only when
// the kill landed before its Open returned (it never logged "ready"); one
// killed while it waited after Open is a recovery-only crash, not one
// inside recovery.
func TestOnlyKillsBeforeOpenReturnedCountAsInsideRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger")
	l, err := OpenLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &driver{cfg: Config{Logf: t.Logf}, ledger: l, fig: &Figures{}}
	for _, c := range []struct {
		name, events string
		recoveryOnly bool
	}{
		{"c1", "E c1 open\n", true},             // killed inside Open
		{"c2", "E c2 open\nE c2 ready\n", true}, // killed while waiting after Open
		{"c3", "E c3 open\n", false},            // an ordinary child killed inside Open
	} {
		if err := l.Append(c.events); err != nil {
			t.Fatal(err)
		}
		if err := d.crashEvents(c.name, "SIGKILL", c.recoveryOnly); err != nil {
			t.Fatal(err)
		}
	}
	if d.fig.RecoveryOnly != 2 || d.fig.RecoveryCrashes != 1 || d.fig.BeforeReady != 2 {
		t.Errorf("recovery-only %d, inside recovery %d, before ready %d: want 2, 1 (c1 only), 2 (c1 and c3)",
			d.fig.RecoveryOnly, d.fig.RecoveryCrashes, d.fig.BeforeReady)
	}
}
