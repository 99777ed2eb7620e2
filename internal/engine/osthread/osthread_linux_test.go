//go:build linux

package osthread

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadNices is Nices, failing the test on an error.
func threadNices(t *testing.T) map[int]int {
	t.Helper()
	m, err := Nices()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNicesReadsEachThreadsOwnNiceValue: every thread Nices lists has the value the kernel's
// getpriority gives for that thread id (Lower's tests check a lowered thread through it).
func TestNicesReadsEachThreadsOwnNiceValue(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	nices := threadNices(t)
	if _, ok := nices[unix.Gettid()]; !ok {
		t.Fatalf("Nices does not list the calling thread %d: %v", unix.Gettid(), nices)
	}
	for tid, n := range nices {
		p, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		if err != nil {
			continue // the thread ended meanwhile
		}
		if want := 20 - p; n != want {
			t.Errorf("Nices gives thread %d nice %d, want %d from getpriority", tid, n, want)
		}
	}
}

func TestLowerSetsOnlyTheCallingThreadsPriorities(t *testing.T) {
	runtime.LockOSThread() // the test's own thread stands for a foreground thread
	defer runtime.UnlockOSThread()
	base, err := Nice()
	if err != nil {
		t.Fatal(err)
	}
	baseIO, err := IOPriority()
	if err != nil {
		t.Fatal(err)
	}
	if base >= 19 {
		t.Skipf("the test runs at nice %d: no room to lower a thread", base)
	}
	// A thread already lowered is the main thread, wedged by an earlier test whose lowered
	// goroutine ran there (-count above 1): it runs no goroutine, and is left out.
	wedged := map[int]bool{}
	for tid, n := range threadNices(t) {
		wedged[tid] = n != base
	}
	type got struct {
		tid, nice, io int
		err           error
	}
	ch := make(chan got)
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := Lower(Priority{Nice: 5})
		g := got{tid: unix.Gettid(), err: err}
		if err == nil {
			g.nice, g.err = Nice()
		}
		if g.err == nil {
			g.io, g.err = IOPriority()
		}
		// Start work on other threads while this one is lowered: threads Go creates
		// meanwhile must not inherit its priority.
		var inner sync.WaitGroup
		for range 4 {
			inner.Add(1)
			go func() {
				defer inner.Done()
				runtime.LockOSThread() // forces a thread of its own
				time.Sleep(10 * time.Millisecond)
			}()
		}
		inner.Wait()
		ch <- g
		<-release
		// Exits locked: the thread ends with it.
	}()
	g := <-ch
	if g.err != nil {
		t.Fatal(g.err)
	}
	if want := min(base+5, 19); g.nice != want {
		t.Errorf("lowered thread's nice = %d, want %d", g.nice, want)
	}
	if g.io != ioprioLowestBE {
		t.Errorf("lowered thread's I/O priority = %#x, want %#x", g.io, ioprioLowestBE)
	}
	nices := threadNices(t)
	if nices[g.tid] != g.nice {
		t.Errorf("/proc says thread %d has nice %d, want %d", g.tid, nices[g.tid], g.nice)
	}
	for tid, n := range nices {
		if tid != g.tid && n != base && !wedged[tid] {
			t.Errorf("thread %d has nice %d, want the process's %d: only the lowered thread may change", tid, n, base)
		}
	}
	if n, err := Nice(); err != nil || n != base {
		t.Errorf("the test's own thread: nice %d (%v), want %d", n, err, base)
	}
	if io, err := IOPriority(); err != nil || io != baseIO {
		t.Errorf("the test's own thread: I/O priority %#x (%v), want %#x", io, err, baseIO)
	}
	close(release)
	wg.Wait()
	if g.tid == os.Getpid() {
		// The lowered goroutine ran on the main thread, which Go wedges instead of ending
		// (an exited main thread leaves a zombie process on Linux): it still never runs
		// another goroutine.
		return
	}
	// Go ends the thread of a goroutine that exits locked; it does so soon after.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", g.tid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still exists 5 s after its locked goroutine ended", g.tid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for tid, n := range threadNices(t) {
		if n != base && !wedged[tid] {
			t.Errorf("after the lowered goroutine ended, thread %d has nice %d, want %d", tid, n, base)
		}
	}
}

func TestLowerCapsTheNiceValueAt19(t *testing.T) {
	done := make(chan error)
	go func() {
		err := Lower(Priority{Nice: MaxNice})
		if err == nil {
			var n int
			if n, err = Nice(); err == nil && n != 19 {
				err = fmt.Errorf("nice = %d, want 19", n)
			}
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestLowerRefusesOutOfRangeIncrements(t *testing.T) {
	for _, n := range []int{-1, MaxNice + 1} {
		if err := Lower(Priority{Nice: n}); err == nil {
			t.Errorf("Lower(nice %d) = nil, want an error", n)
		}
	}
	if err := Lower(Priority{}); err != nil {
		t.Errorf("Lower(zero) = %v, want nil", err)
	}
}

// TestLowerIdleMovesOnlyTheCallingThreadToSCHEDIDLE: with Priority.Idle the
// lowered thread, and no other, runs in SCHED_IDLE (as sched_getattr and /proc
// both say), with the lowest best-effort I/O priority, and ends with its
// goroutine.
func TestLowerIdleMovesOnlyTheCallingThreadToSCHEDIDLE(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := Policies()
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		tid, io int
		idle    bool
		err     error
	}
	ch, release := make(chan got), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		g := got{err: Lower(Priority{Idle: true})}
		g.tid = unix.Gettid()
		if g.err == nil {
			g.idle, g.err = Idle()
		}
		if g.err == nil {
			g.io, g.err = IOPriority()
		}
		ch <- g
		<-release
	}()
	g := <-ch
	if g.err != nil {
		t.Fatal(g.err)
	}
	if !g.idle {
		t.Errorf("sched_getattr: the lowered thread is not in SCHED_IDLE")
	}
	if g.io != ioprioLowestBE {
		t.Errorf("lowered thread's I/O priority = %#x, want %#x", g.io, ioprioLowestBE)
	}
	pol, err := Policies()
	if err != nil {
		t.Fatal(err)
	}
	if pol[g.tid] != unix.SCHED_IDLE {
		t.Errorf("/proc says thread %d has policy %d, want SCHED_IDLE (%d)", g.tid, pol[g.tid], unix.SCHED_IDLE)
	}
	for tid, p := range pol {
		if tid != g.tid && p == unix.SCHED_IDLE && before[tid] != unix.SCHED_IDLE {
			t.Errorf("thread %d moved to SCHED_IDLE too: only the lowered thread may", tid)
		}
	}
	if idle, err := Idle(); err != nil || idle {
		t.Errorf("the test's own thread: SCHED_IDLE %v (%v), want false", idle, err)
	}
	close(release)
	<-done
}
