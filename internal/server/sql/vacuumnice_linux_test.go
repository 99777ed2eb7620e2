//go:build linux

package sql

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vacuumops/vacuum-operator/internal/engine/osthread"
)

// mostLoweredThread is how many nice steps the most lowered thread of this process is
// below base (osthread.Nices), leaving out the main thread: Go wedges
// it, rather than ending it, when a lowered goroutine that ran there ends.
func mostLoweredThread(base int) int {
	nices, err := osthread.Nices()
	if err != nil {
		return 0
	}
	most := 0
	for tid, n := range nices {
		if tid != os.Getpid() {
			most = max(most, n-base)
		}
	}
	return most
}

// mostDuringVacuum runs VACUUM t on s and returns the largest value measure gave, sampled
// every millisecond while it ran.
func mostDuringVacuum(t *testing.T, s *Session, measure func() int) int {
	t.Helper()
	stop, seen := make(chan struct{}), make(chan int, 1)
	go func() {
		most := 0
		defer func() { seen <- most }()
		for {
			most = max(most, measure())
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	err := s.Query(context.Background(), "VACUUM t", func(*Result) error { return nil })
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	return <-seen
}

// TestVacuumRunsOnThreadsLoweredByTheServersSetting: the registry's SetThreadPriority (serve
// --vacuum-nice) reaches every VACUUM's workers, and 0 leaves their threads alone.
func TestVacuumRunsOnThreadsLoweredByTheServersSetting(t *testing.T) {
	base, err := osthread.Nice()
	if err != nil {
		t.Fatal(err)
	}
	if base > 16 {
		t.Skipf("the test runs at nice %d: no room to lower a thread by 3", base)
	}
	_, s, v := newStandbyTestServer(t, 6000)
	for _, nice := range []int{3, 0} {
		v.SetThreadPriority(osthread.Priority{Nice: nice}, t.Logf)
		// A VACUUM that ends before the sampler first runs (a loaded machine) shows no
		// lowered thread; that is no evidence either way, so a round that saw none is
		// tried again, up to three times. A setting that never reaches the threads still
		// fails every try.
		most := 0
		for try := 0; try < 3 && (try == 0 || most == 0 && nice > 0); try++ {
			mustSQL(t, s, "UPDATE t SET a = a + 1 WHERE id % 2 = 0", "UPDATE 3000\n")
			most = mostDuringVacuum(t, s, func() int { return mostLoweredThread(base) })
		}
		if most != nice {
			t.Errorf("--vacuum-nice %d: the most lowered thread during the VACUUM was %d steps down, want %d", nice, most, nice)
		}
		// Let the lowered threads end before the next round looks.
		for deadline := time.Now().Add(5 * time.Second); mostLoweredThread(base) > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// idleThreads is how many threads of this process run in SCHED_IDLE (osthread.Policies).
func idleThreads() int {
	pol, err := osthread.Policies()
	if err != nil {
		return 0
	}
	n := 0
	for tid, p := range pol {
		if p == unix.SCHED_IDLE && tid != os.Getpid() {
			n++
		}
	}
	return n
}

// TestVacuumRunsOnIdleThreadsWithTheServersIdleSetting: SetThreadPriority with Idle (serve
// --vacuum-sched idle) puts every VACUUM's workers in SCHED_IDLE, and they end with it.
func TestVacuumRunsOnIdleThreadsWithTheServersIdleSetting(t *testing.T) {
	if n := idleThreads(); n != 0 {
		t.Fatalf("%d threads already in SCHED_IDLE before the VACUUM", n)
	}
	_, s, v := newStandbyTestServer(t, 6000)
	mustSQL(t, s, "UPDATE t SET a = a + 1 WHERE id % 2 = 0", "UPDATE 3000\n")
	v.SetThreadPriority(osthread.Priority{Nice: 5, Idle: true}, t.Logf)
	if most := mostDuringVacuum(t, s, idleThreads); most == 0 {
		t.Errorf("no thread ran in SCHED_IDLE during the VACUUM")
	}
	deadline := time.Now().Add(5 * time.Second)
	for idleThreads() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d threads still in SCHED_IDLE 5 s after the VACUUM", idleThreads())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAThreadThatCannotBeLoweredIsReportedOncePerServer: the server's log hears of the
// first VACUUM whose threads kept the foreground's priority, and of no later one.
func TestAThreadThatCannotBeLoweredIsReportedOncePerServer(t *testing.T) {
	v := NewVacuums()
	var lines []string
	v.SetThreadPriority(osthread.Priority{Nice: 5}, func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) })
	v.noteLowering(nil)
	if len(lines) != 0 {
		t.Fatalf("logged %q for a VACUUM whose threads were lowered", lines)
	}
	for range 3 {
		v.noteLowering(errors.New("set the nice value of thread 7 to 5: operation not permitted"))
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "operation not permitted") {
		t.Fatalf("log lines %q, want the error once", lines)
	}
}
