package throttle

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// simWorker is one simulated worker of TestPacingBoundHoldsInSimulation.
type simWorker struct {
	at      time.Duration // next event: its next charge, or the end of its sleep
	sleep   bool          // at is the end of a sleep
	pending float64       // units charged, let through when the sleep ends
	tg      target
}

// TestPacingBoundHoldsInSimulation drives the pacing arithmetic (limit and
// wakeAt, the same code Wait runs) on a virtual clock with several workers,
// random work times, oversleeps of up to 30 ms, random charges and rate
// changes, and checks at every point a worker is let through that the units
// let through never exceed the allowance A(t) plus MinSleep at the fastest
// rate used. The allowance is integrated here, independently of limit.
func TestPacingBoundHoldsInSimulation(t *testing.T) {
	const minSleep = time.Millisecond
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 3))
		th := &Throttle{}
		l := &th.lims[Cost]
		burstDur := time.Duration(1+rng.IntN(50)) * time.Millisecond
		rate := float64(1000 + rng.IntN(200_000))
		maxRate := rate
		l.set(0, rate, rate*burstDur.Seconds())
		// The allowance, integrated by the test: accA at lastChange, then rate.
		accA, lastChange := 0.0, time.Duration(0)
		allowance := func(now time.Duration) float64 { return accA + rate*(now-lastChange).Seconds() }

		ws := make([]*simWorker, 1+rng.IntN(8))
		for i := range ws {
			ws[i] = &simWorker{at: time.Duration(rng.IntN(1000)) * time.Microsecond}
		}
		oversleep := func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(200*time.Microsecond)) }
		if rng.IntN(4) == 0 {
			oversleep = func() time.Duration { return time.Duration(rng.IntN(30_000)) * time.Microsecond }
		}
		nextUpdate := time.Duration(rng.IntN(500)) * time.Millisecond
		admitted := 0.0
		for steps := 0; steps < 20_000; steps++ {
			w := slices.MinFunc(ws, func(a, b *simWorker) int { return int(a.at - b.at) })
			now := w.at
			if now >= nextUpdate {
				// Live re-throttle: sleeping workers recompute their wake.
				now = nextUpdate
				accA, lastChange = allowance(now), now
				rate = float64(1000 + rng.IntN(200_000))
				maxRate = max(maxRate, rate)
				l.set(now, rate, rate*burstDur.Seconds())
				for _, o := range ws {
					if o.sleep {
						o.at = max(now, wakeAt([]target{o.tg})) + oversleep()
					}
				}
				nextUpdate += time.Duration(1+rng.IntN(500)) * time.Millisecond
				continue
			}
			if w.sleep {
				w.sleep = false
				admitted += w.pending
			} else {
				u := float64(rng.IntN(300))
				pos, _ := l.charge(now, now, u)
				w.tg = target{th, Cost, l.gen, pos}
				if wake := wakeAt([]target{w.tg}); wake-now >= minSleep {
					w.sleep, w.pending, w.at = true, u, wake+oversleep()
					continue
				}
				admitted += u
			}
			if bound := allowance(now) + maxRate*minSleep.Seconds(); admitted > bound*(1+1e-12) {
				t.Fatalf("seed %d step %d: %.1f units let through at %v, allowance+MinSleep %.1f", seed, steps, admitted, now, bound)
			}
			w.at = now + time.Duration(rng.IntN(300))*time.Microsecond // work until the next charge
		}
	}
}

// TestLimitKeepsDebtInUnitsAcrossRateChanges checks the arithmetic Update
// relies on: debt is rescaled, not forgiven; turning a limit off and on
// voids old positions; allowance unclaimed beyond the burst is forfeited.
func TestLimitKeepsDebtInUnitsAcrossRateChanges(t *testing.T) {
	var l limit
	l.set(0, 1000, 20) // 1000 units/s, 20 units of burst
	pos, on := l.charge(0, 0, 500)
	if !on || pos != 500 || l.timeAt(pos) != 500*time.Millisecond {
		t.Fatalf("charge 500 at 0: pos %v wake %v, want 500 at 500ms", pos, l.timeAt(pos))
	}
	l.set(100*time.Millisecond, 4000, 80) // 400 units of debt left, now at 4000/s
	if got := l.timeAt(pos); got != 200*time.Millisecond {
		t.Fatalf("after a 4x rate at 100ms the wake is %v, want 200ms (400 units at 4000/s)", got)
	}
	// Idle until 1 s: only the 80-unit burst of the unused allowance is kept.
	pos, _ = l.charge(time.Second, time.Second, 10)
	a := l.allowance(time.Second)
	if math.Abs(pos-(a-80+10)) > 1e-9 || math.Abs(l.forfeited-(a-80-500)) > 1e-9 {
		t.Fatalf("pos %v forfeited %v, want %v and %v", pos, l.forfeited, a-80+10, a-80-500)
	}
	gen := l.gen
	l.set(2*time.Second, 0, 0)
	if _, on := l.charge(2*time.Second, 2*time.Second, 5); on {
		t.Fatal("a limit switched off still paces")
	}
	l.set(3*time.Second, 1000, 20)
	if l.gen == gen || l.pos != 0 || l.allowance(3*time.Second) != 0 {
		t.Fatalf("re-enabled limit: gen %d->%d pos %v allowance %v, want a fresh start", gen, l.gen, l.pos, l.allowance(3*time.Second))
	}
	if l.consumed != 515 {
		t.Fatalf("consumed %v, want 515 (limited or not)", l.consumed)
	}
}

func TestRecentRateCoversTheLastFiveSeconds(t *testing.T) {
	var l limit
	for ms := 0; ms < 10_000; ms += 10 {
		u := 1.0
		if ms >= 5_000 {
			u = 3.0 // 100/s for 5 s, then 300/s
		}
		l.ringAdd(time.Duration(ms)*time.Millisecond, u)
	}
	now := 10 * time.Second
	if got := l.recent(now, 0); math.Abs(got-300) > 300*0.03 {
		t.Fatalf("recent rate %v, want ~300/s (the last 5 s only)", got)
	}
	if got := l.recent(now+time.Minute, 0); got != 0 {
		t.Fatalf("recent rate a minute after the last charge %v, want 0", got)
	}
}
