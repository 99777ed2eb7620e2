package hangtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestWaitReturnsOnceTheChannelDelivers: a party that ends in time passes.
func TestWaitReturnsOnceTheChannelDelivers(t *testing.T) {
	ch := make(chan error, 1)
	go func() { ch <- nil }()
	Wait(t, "a party that ends", ch, 10*time.Second)
}

// childEnv makes the test binary, run again by the test below, deadlock in Wait.
const childEnv = "HANGTEST_DEADLOCK_CHILD"

// TestWaitEndsADeadlockedRunWithEveryStack: a party that never ends makes the run
// end soon after d, not at the binary's timeout, with a message that names it and
// the stack of every goroutine, the test's own among them.
func TestWaitEndsADeadlockedRunWithEveryStack(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		Wait(t, "a party nobody ends", make(chan error), 100*time.Millisecond)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWaitEndsADeadlockedRunWithEveryStack$", "-test.timeout=10m")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the deadlocked run exited 0:\n%s", out)
	}
	if ctx.Err() != nil {
		t.Fatalf("the deadlocked run still ran after %v", time.Since(start))
	}
	for _, want := range []string{
		"a party nobody ends still waits after 100ms: deadlocked",
		"hangtest.TestWaitEndsADeadlockedRunWithEveryStack",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the deadlocked run's output lacks %q:\n%s", want, out)
		}
	}
}
