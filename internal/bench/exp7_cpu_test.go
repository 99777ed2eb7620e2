package bench

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// A PostgreSQL backend exits with its session; its time must stay counted once the
// postmaster has reaped it, so experiment 7's CPU per transaction covers every backend.
func TestTreeCPUKeepsTheTimeOfAReapedChild(t *testing.T) {
	before, _, err := treeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done`)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if child < 30*time.Millisecond {
		t.Fatalf("the busy child used only %s of CPU, too little to tell", child)
	}
	after, _, err := treeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// /proc counts in 10 ms ticks.
	if got := after - before; got < child-20*time.Millisecond {
		t.Fatalf("tree CPU grew by %s over a reaped child that used %s", got, child)
	}
}
