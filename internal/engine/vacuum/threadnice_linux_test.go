//go:build linux

package vacuum_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/osthread"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// niceOfThreads is osthread.Nices, failing the test on an error.
func niceOfThreads(t *testing.T) map[int]int {
	t.Helper()
	m, err := osthread.Nices()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestThreadNiceLowersTheBatchsThreadsAndNoOthers: with Options.ThreadPriority's Nice a
// batch's goroutines (the table's worker, its index workers, read-ahead and WAL
// flusher) run on lowered threads, which end with them; the caller's thread and
// every thread left afterwards keep the process's nice value.
func TestThreadNiceLowersTheBatchsThreadsAndNoOthers(t *testing.T) {
	runtime.LockOSThread() // the caller's thread, a foreground session's stand-in
	defer runtime.UnlockOSThread()
	base, err := osthread.Nice()
	if err != nil {
		t.Fatal(err)
	}
	if base > 16 {
		t.Skipf("the test runs at nice %d: no room to lower a thread by 3", base)
	}
	db, _ := newDB(t, testOpts())
	tb := createTable(t, db, "t", 2, 4000, 100)
	deletePercent(t, db, tb, 30, rand.New(rand.NewSource(7)))
	opts := vacuum.DefaultOptions()
	opts.Throttle = nil
	opts.ThreadPriority = osthread.Priority{Nice: 3}
	opts.IndexWorkers = 2
	run, err := vacuum.NewBatch(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Watch the process's threads while the vacuum runs: some must be at base+3.
	stop, seen := make(chan struct{}), make(chan int, 1)
	go func() {
		most := 0
		defer func() { seen <- most }()
		for {
			m, _ := osthread.Nices() // an unreadable sample just counts for nothing
			for _, nice := range m {
				most = max(most, nice-base)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	_, err = db.VacuumBatch(context.Background(), run, []string{"t"})
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if most := <-seen; most != 3 {
		t.Errorf("while the vacuum ran, the most lowered thread was %d nice steps below the process, want 3", most)
	}
	n, err := run.LoweredThreads()
	if err != nil {
		t.Fatalf("a thread was not lowered: %v", err)
	}
	// At least the table's worker, its two index workers and its WAL flusher.
	if n < 4 {
		t.Errorf("%d goroutines ran on lowered threads, want at least 4", n)
	}
	if got, err := osthread.Nice(); err != nil || got != base {
		t.Errorf("the caller's thread has nice %d (%v), want %d", got, err, base)
	}
	// The lowered threads end with their goroutines, just after those signal that they are
	// done (Go wedges, rather than ends, the main thread, should one of them have run there:
	// it runs nothing else).
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left []string
		for tid, nice := range niceOfThreads(t) {
			if nice != base && tid != os.Getpid() {
				left = append(left, fmt.Sprintf("thread %d at nice %d", tid, nice))
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the vacuum, threads not at the process's nice %d: %v", base, left)
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkClean(t, db)
}

func TestThreadNiceOutsideItsRangeIsRefused(t *testing.T) {
	for _, n := range []int{-1, osthread.MaxNice + 1} {
		opts := vacuum.DefaultOptions()
		opts.ThreadPriority = osthread.Priority{Nice: n}
		if _, err := vacuum.NewBatch(opts); err == nil {
			t.Errorf("ThreadPriority nice %d: NewBatch = nil error, want ErrInvalidOptions", n)
		}
	}
}
