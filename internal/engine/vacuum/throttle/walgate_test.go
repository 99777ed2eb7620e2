package throttle

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// fakeGate is a standby whose replay position the test moves: behind is the
// WAL inserted and not replayed; a report closes the channel.
type fakeGate struct {
	mu       sync.Mutex
	behind   int64
	attached bool
	changed  chan struct{}
	calls    int
	flushes  int
	flushErr error
}

func newFakeGate(behind int64) *fakeGate {
	return &fakeGate{behind: behind, attached: true, changed: make(chan struct{})}
}

func (g *fakeGate) WALBehind() (int64, bool, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls++
	return g.behind, g.attached, g.changed
}

func (g *fakeGate) FlushWAL(*usage.Counters) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flushes++
	return g.flushErr
}

// report is a standby status update: the standby is now behind bytes behind.
func (g *fakeGate) report(behind int64, attached bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.behind, g.attached = behind, attached
	close(g.changed)
	g.changed = make(chan struct{})
}

// waitAsync runs one delay point charging d and reports its result.
func waitAsync(ctx context.Context, th *Throttle, d usage.Reading) <-chan error {
	done := make(chan error, 1)
	m := th.Meter(nil)
	m.Charge(d)
	go func() { done <- m.Wait(ctx) }()
	return done
}

func gated(t *testing.T, bound int64, g WALGate) *Throttle {
	t.Helper()
	th, err := New(Settings{}, Options{WALGate: g})
	if err != nil {
		t.Fatal(err)
	}
	if err := th.SetWALLagBound(bound); err != nil {
		t.Fatal(err)
	}
	return th
}

// stillWaiting fails the test if done delivers within d.
func stillWaiting(t *testing.T, done <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: the delay point returned (%v) while the standby was behind the bound", what, err)
	case <-time.After(d):
	}
}

func returned(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: the delay point still waits 5 s later", what)
	}
	return nil
}

func TestWALLagBoundHoldsAWALWriterUntilTheStandbyCatchesUp(t *testing.T) {
	g := newFakeGate(2 << 20)
	th := gated(t, 1<<20, g)
	done := waitAsync(context.Background(), th, usage.Reading{WALBytes: 8192})
	stillWaiting(t, done, 100*time.Millisecond, "2 MiB behind a 1 MiB bound")
	g.report(1<<20+1, true) // one byte over: still held
	stillWaiting(t, done, 50*time.Millisecond, "one byte over the bound")
	g.report(1<<20, true)
	if err := returned(t, done, "at the bound"); err != nil {
		t.Fatalf("released delay point: %v", err)
	}
	st := th.Stats()
	if st.WALHolds != 1 || st.WALHeld < 100*time.Millisecond {
		t.Fatalf("stats after one hold of at least 150 ms: holds %d, held %v", st.WALHolds, st.WALHeld)
	}
	if st.Slept != 0 {
		t.Fatalf("a hold counted as a rate sleep: Slept %v", st.Slept)
	}
	// The WAL behind is counted from its inserted end; the standby is sent only
	// flushed WAL: the held worker flushed it, once for its hold.
	if g.flushes != 1 {
		t.Fatalf("the hold flushed the WAL %d times, want once", g.flushes)
	}
}

func TestAFailedFlushBeforeAWALHoldIsTheDelayPointsError(t *testing.T) {
	g := newFakeGate(2 << 20)
	g.flushErr = errors.New("fsync: input/output error")
	th := gated(t, 1<<20, g)
	err := returned(t, waitAsync(context.Background(), th, usage.Reading{WALBytes: 100}), "a failed flush")
	if !errors.Is(err, g.flushErr) {
		t.Fatalf("delay point returned %v, want the flush's error", err)
	}
}

func TestWALLagBoundLetsThroughWhatNeedsNoHold(t *testing.T) {
	cases := []struct {
		name     string
		bound    int64
		behind   int64
		attached bool
		d        usage.Reading
	}{
		{"no WAL in the charge", 1 << 20, 8 << 20, true, usage.Reading{Hits: 10, ReadBytes: 81920}},
		{"within the bound", 1 << 20, 1 << 19, true, usage.Reading{WALBytes: 8192}},
		{"no standby attached", 1 << 20, 8 << 20, false, usage.Reading{WALBytes: 8192}},
		{"bound off", 0, 8 << 20, true, usage.Reading{WALBytes: 8192}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newFakeGate(c.behind)
			g.attached = c.attached
			th := gated(t, c.bound, g)
			if err := returned(t, waitAsync(context.Background(), th, c.d), c.name); err != nil {
				t.Fatal(err)
			}
			if st := th.Stats(); st.WALHolds != 0 {
				t.Fatalf("held %d times", st.WALHolds)
			}
		})
	}
}

func TestWALLagBoundReleasesWhenTheStandbyLeavesOrTheBoundIsLifted(t *testing.T) {
	t.Run("standby leaves", func(t *testing.T) {
		g := newFakeGate(4 << 20)
		th := gated(t, 1<<20, g)
		done := waitAsync(context.Background(), th, usage.Reading{WALBytes: 100})
		stillWaiting(t, done, 50*time.Millisecond, "attached and behind")
		g.report(4<<20, false)
		if err := returned(t, done, "after the standby left"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bound lifted live", func(t *testing.T) {
		g := newFakeGate(4 << 20)
		th := gated(t, 1<<20, g)
		done := waitAsync(context.Background(), th, usage.Reading{WALBytes: 100})
		stillWaiting(t, done, 50*time.Millisecond, "attached and behind")
		if err := th.SetWALLagBound(8 << 20); err != nil {
			t.Fatal(err)
		}
		if err := returned(t, done, "after the bound was raised above the lag"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestCancelWhileHeldByTheWALLagBoundEndsTheWaitPromptly(t *testing.T) {
	g := newFakeGate(4 << 20)
	th := gated(t, 1<<20, g)
	ctx, cancel := context.WithCancel(context.Background())
	done := waitAsync(ctx, th, usage.Reading{WALBytes: 100})
	stillWaiting(t, done, 50*time.Millisecond, "before the cancel")
	began := time.Now()
	cancel()
	err := returned(t, done, "after the cancel")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("held delay point returned %v after cancel, want context.Canceled", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Fatalf("cancel took %v to end the hold", d)
	}
}

func TestWALLagBoundHoldsTheWaitersOfATablesThrottleToo(t *testing.T) {
	g := newFakeGate(2 << 20)
	root := gated(t, 1<<20, g)
	child, err := root.Child(Settings{MaxWALBytesPerSecond: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	done := waitAsync(context.Background(), child, usage.Reading{WALBytes: 100})
	stillWaiting(t, done, 50*time.Millisecond, "a table's waiter, 2 MiB behind the run's 1 MiB bound")
	g.report(0, true)
	if err := returned(t, done, "the table's waiter after catch-up"); err != nil {
		t.Fatal(err)
	}
	if st := root.Stats(); st.WALHolds != 1 {
		t.Fatalf("the run's stats count %d holds of its table's waiter, want 1", st.WALHolds)
	}
}

func TestPauseDuringAWALHoldIsWaitedOutUntilResume(t *testing.T) {
	g := newFakeGate(4 << 20)
	th := gated(t, 1<<20, g)
	done := waitAsync(context.Background(), th, usage.Reading{WALBytes: 100})
	stillWaiting(t, done, 50*time.Millisecond, "held")
	th.Pause()
	g.report(0, true) // caught up, but the run is paused
	stillWaiting(t, done, 100*time.Millisecond, "caught up while paused")
	th.Resume()
	if err := returned(t, done, "after resume"); err != nil {
		t.Fatal(err)
	}
}

func TestANegativeWALLagBoundIsRefused(t *testing.T) {
	th := gated(t, 1<<20, newFakeGate(0))
	if err := th.SetWALLagBound(-1); !errors.Is(err, ErrInvalidSettings) {
		t.Fatalf("SetWALLagBound(-1) = %v, want ErrInvalidSettings", err)
	}
	if b := th.WALLagBound(); b != 1<<20 {
		t.Fatalf("the refused bound replaced the one in force: %d", b)
	}
}
