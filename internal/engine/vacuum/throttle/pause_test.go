package throttle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// pageLoop is a worker that charges a page and passes a delay point in a
// loop, counting the delay points it got through, until ctx is done.
func pageLoop(ctx context.Context, m *Meter, passed *atomic.Int64, done chan<- error) {
	for {
		m.Charge(page)
		if err := m.Wait(ctx); err != nil {
			done <- err
			return
		}
		passed.Add(1)
	}
}

// settle waits until passed stops moving (the in-flight page of a worker
// that was just paused), then returns its value.
func settle(t *testing.T, passed *atomic.Int64) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	last := passed.Load()
	for time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		n := passed.Load()
		if n == last {
			return n
		}
		last = n
	}
	t.Fatalf("workers still passing delay points 5 s after Pause (%d)", last)
	return 0
}

func TestPausedRunMakesNoProgressAndResumesOnResume(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Settings
	}{
		// cost delay 0: no limit is on, the delay point never sleeps, and
		// the pause must still take effect there.
		{"unthrottled", Settings{}},
		{"cost delay 2ms", costSettings(2 * time.Millisecond)},
	} {
		t.Run(c.name, func(t *testing.T) {
			th := mustNew(t, c.s)
			table, err := th.Child(Settings{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var passed atomic.Int64
			done := make(chan error, 2)
			// One worker on the run's throttle, one on a table's: the
			// pause is the run's, whichever throttle it is called on.
			go pageLoop(ctx, th.Meter(nil), &passed, done)
			go pageLoop(ctx, table.Meter(nil), &passed, done)
			for passed.Load() < 20 {
				time.Sleep(time.Millisecond)
			}
			if !table.Pause() {
				t.Fatal("Pause of a running run = false")
			}
			if th.Pause() {
				t.Error("second Pause = true, want false (already paused)")
			}
			n := settle(t, &passed)
			time.Sleep(200 * time.Millisecond)
			if got := passed.Load(); got != n {
				t.Fatalf("paused run passed %d more delay points", got-n)
			}
			st := th.Stats()
			if !st.Paused || !th.Paused() || st.Pauses != 1 {
				t.Errorf("Stats while paused: Paused %v (Paused() %v), Pauses %d; want true, 1", st.Paused, th.Paused(), st.Pauses)
			}
			if st.PausedFor < 200*time.Millisecond {
				t.Errorf("PausedFor = %v after >= 200 ms paused", st.PausedFor)
			}
			if ts := table.Stats(); !ts.Paused || ts.PausedFor < 200*time.Millisecond {
				t.Errorf("table throttle Stats: Paused %v, PausedFor %v; want the run's pause", ts.Paused, ts.PausedFor)
			}
			if !th.Resume() {
				t.Fatal("Resume of a paused run = false")
			}
			resumed := time.Now()
			for passed.Load() < n+20 {
				if time.Since(resumed) > 5*time.Second {
					t.Fatalf("resumed run passed %d delay points in 5 s", passed.Load()-n)
				}
				time.Sleep(time.Millisecond)
			}
			st = th.Stats()
			if st.Paused || th.Resume() {
				t.Errorf("after Resume: Paused %v, or a second Resume reported a pause", st.Paused)
			}
			frozen := st.PausedFor
			time.Sleep(30 * time.Millisecond)
			if got := th.Stats().PausedFor; got != frozen {
				t.Errorf("PausedFor moved from %v to %v while running", frozen, got)
			}
			cancel()
			for range 2 {
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Errorf("worker ended with %v, want context.Canceled", err)
				}
			}
		})
	}
}

func TestCancelWhilePausedEndsTheWaitPromptly(t *testing.T) {
	th := mustNew(t, Settings{})
	th.Pause()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	m := th.Meter(nil)
	go func() {
		m.Charge(page)
		done <- m.Wait(ctx)
	}()
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while paused", err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	cancelled := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
		if d := time.Since(cancelled); d > 100*time.Millisecond {
			t.Errorf("Wait returned %v after cancel, want < 100 ms", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Wait still paused 2 s after cancel")
	}
	if err := th.WaitWhilePaused(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitWhilePaused on a done context = %v, want context.Canceled", err)
	}
	if st := th.Stats(); st.Slept != 0 || st.Sleeps != 0 {
		t.Errorf("a pause counted as throttle sleep: Slept %v, Sleeps %d", st.Slept, st.Sleeps)
	}
}

// A pause stops the limits' clock: a sleeper's debt is not repaid while
// paused, so after Resume it still sleeps the rest of it (no catch-up
// burst), and the paused time is not counted as slept.
func TestPauseDuringASleepKeepsTheDebtForAfterResume(t *testing.T) {
	timed(t)
	th := mustNew(t, DefaultSettings()) // 100,000 cost units/s
	m := th.Meter(nil)
	m.Charge(usage.Reading{Dirtied: 1000}) // 20,000 units: 200 ms of debt
	start := time.Now()
	done := make(chan time.Duration, 1)
	go func() {
		if err := m.Wait(context.Background()); err != nil {
			t.Error(err)
		}
		done <- time.Since(start)
	}()
	time.Sleep(50 * time.Millisecond)
	th.Pause()
	time.Sleep(300 * time.Millisecond)
	select {
	case took := <-done:
		t.Fatalf("Wait returned after %v, during the pause", took)
	default:
	}
	th.Resume()
	took := <-done
	// 50 ms asleep + 300 ms paused + the remaining 150 ms of debt.
	if took < 450*time.Millisecond || took > 900*time.Millisecond {
		t.Errorf("Wait took %v, want ~500 ms (the debt left at the pause repaid after it)", took)
	}
	st := th.Stats()
	if st.Slept < 150*time.Millisecond || st.Slept > 450*time.Millisecond {
		t.Errorf("Slept = %v, want ~200 ms (the pause is not sleep)", st.Slept)
	}
	if st.PausedFor < 300*time.Millisecond {
		t.Errorf("PausedFor = %v, want >= 300 ms", st.PausedFor)
	}
}
