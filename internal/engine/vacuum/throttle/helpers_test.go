package throttle

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// A synthetic heap page: one miss and one dirtied buffer (cost 22 at the
// default weights), 8 KiB read, 8 KiB written and 100 bytes of WAL.
var page = usage.Reading{Misses: 1, Dirtied: 1, ReadBytes: 8192, WriteBytes: 8192, WALBytes: 100}

// scale returns n times d.
func scale(d usage.Reading, n int64) usage.Reading {
	return usage.Reading{Hits: n * d.Hits, Misses: n * d.Misses, Dirtied: n * d.Dirtied,
		ReadBytes: n * d.ReadBytes, WriteBytes: n * d.WriteBytes, WALBytes: n * d.WALBytes}
}

// spin burns d of CPU, standing for the work a vacuum does on one page.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; { //nolint:revive // busy loop on purpose
	}
}

// ledger checks, every time a Wait returns, that what the throttle has let
// through so far never exceeds rate*(elapsed+MinSleep) for each limit of
// the given settings: the throttle starts without credit, so this is the
// bound whatever the work time, the timer's granularity and the number of
// workers. A charge counts as let through once its Wait has returned.
type ledger struct {
	mu       sync.Mutex
	s        Settings
	start    time.Time
	minSleep time.Duration
	admitted [numKinds]float64
	worst    [numKinds]float64 // highest admitted/bound seen
	last     time.Duration     // elapsed at the latest admission
	err      error
}

func newLedger(s Settings, th *Throttle) *ledger {
	return &ledger{s: s, start: th.Started(), minSleep: th.Options().MinSleep}
}

func (l *ledger) admit(d usage.Reading) {
	l.mu.Lock()
	defer l.mu.Unlock()
	elapsed := time.Since(l.start) // read after the Wait returned
	l.last = elapsed
	for k := range numKinds {
		r := l.s.Rate(k)
		l.admitted[k] += l.s.Units(k, d)
		if r == 0 {
			continue
		}
		bound := r*(elapsed+l.minSleep).Seconds() + 1e-9*r
		l.worst[k] = max(l.worst[k], l.admitted[k]/bound)
		if l.admitted[k] > bound && l.err == nil {
			l.err = fmt.Errorf("%v: %.0f units let through after %v, bound %.0f", k, l.admitted[k], elapsed, bound)
		}
	}
}

func (l *ledger) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		t.Fatalf("rate exceeded: %v", l.err)
	}
}

// achieved is what was let through up to the latest admission as a
// fraction of what limit k allowed until then. (Measuring to the latest
// admission rather than to the end of the window keeps a worker that the
// machine deschedules near the end from looking throttled.)
func (l *ledger) achieved(k Kind) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.admitted[k] / (l.s.Rate(k) * l.last.Seconds())
}

// work runs a synthetic worker until the deadline: per page it spins for
// cpu, charges d and waits, then records the page in every ledger.
func work(ctx context.Context, m *Meter, d usage.Reading, cpu time.Duration, until time.Time, ls ...*ledger) (pages int, err error) {
	for time.Now().Before(until) {
		spin(cpu)
		m.Charge(d)
		if err := m.Wait(ctx); err != nil {
			return pages, err
		}
		pages++
		for _, l := range ls {
			l.admit(d)
		}
	}
	return pages, nil
}

// timed marks a wall-clock pacing test: skipped with -short, and run
// alone (not in parallel) so the package's own tests do not starve each
// other's workers on a 2-core machine.
func timed(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("timed pacing test")
	}
}

func costSettings(delay time.Duration) Settings {
	s := DefaultSettings()
	s.CostDelay = delay
	return s
}

// testOptions give workers 200 ms of burst: on a loaded 2-core test
// machine (with the race detector) a worker is often descheduled for tens
// of milliseconds, and allowance unclaimed for longer than the burst is
// forfeited. The upper bound the ledger asserts does not depend on Burst.
var testOptions = Options{Burst: 200 * time.Millisecond}

func mustNew(t testing.TB, s Settings) *Throttle {
	t.Helper()
	th, err := New(s, testOptions)
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// reached is the achieved fraction got plus the allowance the workers
// forfeited by arriving late (not sleeping in Wait), relative to what they
// consumed: the share of the limit the throttle let through or did not
// hold back. It equals got when the workers kept up; it only differs when
// the machine starved them, which is not the throttle's shortfall. An
// over-sleeping throttle leaves nothing forfeited, so it still fails.
func reached(got float64, st LimitStats) float64 {
	if st.Consumed <= 0 {
		return got
	}
	return got * (1 + st.Forfeited/st.Consumed)
}
