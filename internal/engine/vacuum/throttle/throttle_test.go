package throttle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

const window = 2 * time.Second

func TestCostRateNeverExceededAndReachedAtEveryDelay(t *testing.T) {
	for _, delay := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		for _, w := range []struct {
			name string
			cpu  time.Duration
			min  float64
		}{{"idle", 0, 0.80}, {"busy", 20 * time.Microsecond, 0.80}} {
			t.Run(fmt.Sprintf("delay=%v/worker=%s", delay, w.name), func(t *testing.T) {
				timed(t)
				s := costSettings(delay)
				th := mustNew(t, s)
				l := newLedger(s, th)
				// A delay point every 4 pages keeps the waits per second
				// (2,272 at 1 ms) within what a race-instrumented worker on
				// a loaded 2-core machine sustains; it is still less than
				// MinSleep of cost at 1 and 2 ms, so debt carries over.
				if _, err := work(context.Background(), th.Meter(nil), scale(page, 4), 4*w.cpu, time.Now().Add(window), l); err != nil {
					t.Fatal(err)
				}
				l.check(t)
				got := l.achieved(Cost)
				st := th.Stats().Limits[Cost]
				t.Logf("achieved %.4f of the ceiling (worst point %.4f of the bound, %.0f units forfeited by a late worker)",
					got, l.worst[Cost], st.Forfeited)
				// The throttle answers for what it holds back, not for a
				// worker the machine starves: allowance the worker forfeited
				// by arriving late (it was not sleeping in Wait) counts as
				// reached. On an idle machine Forfeited is ~0 and this is the
				// plain achieved rate; on a loaded 2-core CI machine a busy
				// race-instrumented worker at 1 ms cannot produce 200k
				// units/s, which is not the throttle's shortfall.
				if r := reached(got, st); r < w.min {
					t.Errorf("achieved %.3f of the cost rate (%.3f counting %.0f units a late worker forfeited), want >= %.2f", got, r, st.Forfeited, w.min)
				}
				// The ledger's bound is the exact one; the stats are read a
				// little later, so allow them a hair of slack.
				if st.RatioRun > 1.01 {
					t.Errorf("Stats RatioRun = %.3f, want <= 1.01", st.RatioRun)
				}
				if st.AchievedRecent > 1.02*st.Configured {
					t.Errorf("Stats AchievedRecent = %.0f, configured %.0f", st.AchievedRecent, st.Configured)
				}
			})
		}
	}
}

func TestByteRateLimitsPaceAlone(t *testing.T) {
	for _, k := range []Kind{ReadBytes, WriteBytes, WALBytes} {
		t.Run(k.String(), func(t *testing.T) {
			timed(t)
			s := Settings{}
			d := page
			switch k {
			case ReadBytes:
				s.MaxReadBytesPerSecond = 4 << 20 // 512 pages/s
			case WriteBytes:
				s.MaxWriteBytesPerSecond = 2 << 20
			case WALBytes:
				s.MaxWALBytesPerSecond = 50_000 // 500 pages/s
			}
			th := mustNew(t, s)
			l := newLedger(s, th)
			if _, err := work(context.Background(), th.Meter(nil), d, 20*time.Microsecond, time.Now().Add(window), l); err != nil {
				t.Fatal(err)
			}
			l.check(t)
			if got := l.achieved(k); reached(got, th.Stats().Limits[k]) < 0.8 {
				t.Errorf("achieved %.3f of the %v rate, want >= 0.8", got, k)
			}
		})
	}
}

func TestMostRestrictiveLimitDecides(t *testing.T) {
	cases := []struct {
		name     string
		s        Settings
		deciding Kind
	}{
		// 1 MiB/s of reads is 128 pages/s; the cost limit would allow 4,545.
		{"read bytes", Settings{CostDelay: 2 * time.Millisecond, CostLimit: 200, PageMissCost: 2, PageDirtyCost: 20, MaxReadBytesPerSecond: 1 << 20}, ReadBytes},
		// 20 ms/200 allows 454 pages/s; the byte limits would allow 12,800.
		{"cost", Settings{CostDelay: 20 * time.Millisecond, CostLimit: 200, PageMissCost: 2, PageDirtyCost: 20, MaxReadBytesPerSecond: 100 << 20, MaxWALBytesPerSecond: 1 << 30}, Cost},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			timed(t)
			th := mustNew(t, tc.s)
			l := newLedger(tc.s, th)
			if _, err := work(context.Background(), th.Meter(nil), page, 0, time.Now().Add(window), l); err != nil {
				t.Fatal(err)
			}
			l.check(t)
			for k := range numKinds {
				if tc.s.Rate(k) == 0 {
					continue
				}
				got := l.achieved(k)
				if k == tc.deciding && reached(got, th.Stats().Limits[k]) < 0.8 {
					t.Errorf("deciding limit %v achieved %.3f, want >= 0.8", k, got)
				}
				if k != tc.deciding && got > 0.5 {
					t.Errorf("looser limit %v achieved %.3f, want it far from binding", k, got)
				}
			}
		})
	}
}

func TestChildRespectsItsOwnAndTheRunWideLimit(t *testing.T) {
	t.Run("own limit tighter", func(t *testing.T) {
		timed(t)
		run := costSettings(2 * time.Millisecond) // 100,000/s
		table := costSettings(8 * time.Millisecond)
		th := mustNew(t, run)
		child, err := th.Child(table)
		if err != nil {
			t.Fatal(err)
		}
		lt, lr := newLedger(table, th), newLedger(run, th)
		if _, err := work(context.Background(), child.Meter(nil), page, 0, time.Now().Add(window), lt, lr); err != nil {
			t.Fatal(err)
		}
		lt.check(t)
		lr.check(t)
		if got := lt.achieved(Cost); reached(got, child.Stats().Limits[Cost]) < 0.8 {
			t.Errorf("table achieved %.3f of its own limit, want >= 0.8 (%.0f units forfeited: worker starved?)",
				got, child.Stats().Limits[Cost].Forfeited)
		}
		if cs, rs := child.Stats(), th.Stats(); cs.Slept == 0 || rs.Slept < cs.Slept {
			t.Errorf("slept: table %v, run %v; want the table's sleeps counted in the run", cs.Slept, rs.Slept)
		}
	})
	t.Run("run-wide limit caps the sum", func(t *testing.T) {
		timed(t)
		run := costSettings(4 * time.Millisecond)   // 50,000/s
		table := costSettings(6 * time.Millisecond) // 33,333/s each, 66,666/s for two
		th := mustNew(t, run)
		lr := newLedger(run, th)
		var wg sync.WaitGroup
		ledgers := make([]*ledger, 2)
		errs := make([]error, 2)
		until := time.Now().Add(window)
		for i := range 2 {
			child, err := th.Child(table)
			if err != nil {
				t.Fatal(err)
			}
			ledgers[i] = newLedger(table, th)
			wg.Go(func() {
				_, errs[i] = work(context.Background(), child.Meter(nil), page, 0, until, ledgers[i], lr)
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		lr.check(t)
		for _, l := range ledgers {
			l.check(t)
		}
		if got := lr.achieved(Cost); reached(got, th.Stats().Limits[Cost]) < 0.8 {
			t.Errorf("run achieved %.3f of its limit, want >= 0.8 (%.0f units forfeited: workers starved?)",
				got, th.Stats().Limits[Cost].Forfeited)
		}
	})
}

func TestParallelWorkersShareTheBudget(t *testing.T) {
	timed(t)
	s := costSettings(2 * time.Millisecond)
	th := mustNew(t, s)
	l := newLedger(s, th)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	until := time.Now().Add(window)
	for i := range 8 {
		m := th.Meter(nil)
		// A delay point every 4 pages, as in the single-worker test.
		wg.Go(func() { _, errs[i] = work(context.Background(), m, scale(page, 4), 80*time.Microsecond, until, l) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	l.check(t)
	if got := l.achieved(Cost); reached(got, th.Stats().Limits[Cost]) < 0.8 {
		t.Errorf("8 workers achieved %.3f of the shared limit, want >= 0.8 (%.0f units forfeited: workers starved?)",
			got, th.Stats().Limits[Cost].Forfeited)
	}
}

func TestUpdateTakesEffectAtTheNextWait(t *testing.T) {
	timed(t)
	slow := costSettings(20 * time.Millisecond) // 10,000/s
	fast := costSettings(2 * time.Millisecond)  // 100,000/s
	th := mustNew(t, slow)
	m := th.Meter(nil)
	ctx := context.Background()
	phase := time.Second
	p1, err := work(ctx, m, page, 0, time.Now().Add(phase))
	if err != nil {
		t.Fatal(err)
	}
	if err := th.Update(fast); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	p2, err := work(ctx, m, page, 0, changed.Add(phase))
	if err != nil {
		t.Fatal(err)
	}
	cost := slow.Units(Cost, page)
	r1, r2 := float64(p1)*cost/phase.Seconds(), float64(p2)*cost/time.Since(changed).Seconds()
	t.Logf("rate before %.0f/s, after %.0f/s", r1, r2)
	if r1 > 1.05*slow.Rate(Cost) || r2 < 0.8*fast.Rate(Cost) || r2 > 1.05*fast.Rate(Cost) {
		t.Errorf("rates %.0f then %.0f, want ~%.0f then ~%.0f", r1, r2, slow.Rate(Cost), fast.Rate(Cost))
	}
	if got := th.Settings(); got != fast {
		t.Errorf("Settings = %+v, want %+v", got, fast)
	}
}

// TestUpdateRescalesASleepersDebt: a worker sleeping off 1 s of debt at
// the old rate finishes it at the new rate, neither at once (forgiveness)
// nor after the old 1 s (no effect).
func TestUpdateRescalesASleepersDebt(t *testing.T) {
	timed(t)
	s := costSettings(10 * time.Millisecond) // 20,000/s
	th := mustNew(t, s)
	m := th.Meter(nil)
	m.Charge(usage.Reading{Hits: 20_000}) // 1 s of debt
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		_ = m.Wait(context.Background())
		done <- time.Since(start)
	}()
	time.Sleep(100 * time.Millisecond)
	faster := costSettings(time.Millisecond) // 10x: the 0.9 s left takes 90 ms
	if err := th.Update(faster); err != nil {
		t.Fatal(err)
	}
	took := <-done
	if took < 170*time.Millisecond || took > 400*time.Millisecond {
		t.Errorf("Wait took %v, want ~190 ms (100 ms at the old rate, 90 ms at the new)", took)
	}
}

func TestWaitReturnsPromptlyWhenCancelledMidSleep(t *testing.T) {
	timed(t)
	th := mustNew(t, DefaultSettings())
	m := th.Meter(nil)
	m.Charge(usage.Reading{Dirtied: 50_000}) // 10 s of debt
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Wait(ctx) }()
	time.Sleep(30 * time.Millisecond)
	cancel()
	cancelled := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Wait = %v, want context.Canceled", err)
		}
		if d := time.Since(cancelled); d > 50*time.Millisecond {
			t.Errorf("Wait returned %v after cancel, want < 50 ms", d)
		}
	case <-time.After(time.Second):
		t.Fatal("Wait still sleeping 1 s after cancel")
	}
	if err := m.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a done context = %v, want context.Canceled", err)
	}
}

func TestMeterChargesWeightedCostAndBytesFromCounters(t *testing.T) {
	s := Settings{PageHitCost: 1, PageMissCost: 2, PageDirtyCost: 20}
	th := mustNew(t, s)
	parent := &usage.Counters{}
	worker := &usage.Counters{Parent: parent}
	m := th.Meter(worker)
	worker.Add(usage.Hits, 3)
	worker.Add(usage.Misses, 2)
	worker.Add(usage.Dirtied, 1)
	worker.Add(usage.ReadBytes, 16384)
	worker.Add(usage.WriteBytes, 8192)
	worker.Add(usage.WALBytes, 500)
	worker.Add(usage.WALWriteBytes, 4096) // not what the WAL limit reads
	m.Charge(usage.Reading{Hits: 10})
	if err := m.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	worker.Add(usage.Hits, 1)
	if err := m.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[Kind]float64{Cost: 3 + 4 + 20 + 10 + 1, ReadBytes: 16384, WriteBytes: 8192, WALBytes: 500}
	st := th.Stats()
	for k, v := range want {
		if got := st.Limits[k].Consumed; got != v {
			t.Errorf("%v consumed = %v, want %v", k, got, v)
		}
		if st.Limits[k].Active {
			t.Errorf("%v active with a zero limit", k)
		}
	}
	if st.Slept != 0 {
		t.Errorf("slept %v without any limit", st.Slept)
	}
}

func TestSettingsValidateRejectsOutOfRangeValues(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Settings)
		ok   bool
	}{
		{"defaults", func(*Settings) {}, true},
		{"cost delay 0 disables the cost limit", func(s *Settings) { s.CostDelay, s.CostLimit = 0, 0 }, true},
		{"negative delay", func(s *Settings) { s.CostDelay = -time.Millisecond }, false},
		{"zero limit with a delay", func(s *Settings) { s.CostLimit = 0 }, false},
		{"negative page cost", func(s *Settings) { s.PageDirtyCost = -1 }, false},
		{"negative byte rate", func(s *Settings) { s.MaxWALBytesPerSecond = -1 }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := DefaultSettings()
			tc.edit(&s)
			err := s.Validate()
			if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidSettings)) {
				t.Fatalf("Validate(%+v) = %v, want ok=%v", s, err, tc.ok)
			}
			if _, err := New(s, Options{}); tc.ok != (err == nil) {
				t.Fatalf("New = %v, want ok=%v", err, tc.ok)
			}
		})
	}
	if r := DefaultSettings().Rate(Cost); r != 100_000 {
		t.Errorf("default cost rate = %v/s, want 100000/s (200 per 2 ms)", r)
	}
}

func TestWALLimitBanksOnlyItsShortBurstWhileOtherLimitsKeepTheirs(t *testing.T) {
	timed(t)
	const rate = 1 << 20 // bytes (or cost units) per second
	for _, k := range []Kind{WALBytes, Cost} {
		t.Run(k.String(), func(t *testing.T) {
			s := Settings{MaxWALBytesPerSecond: rate}
			charge := usage.Reading{WALBytes: 1 << 10}
			if k == Cost {
				s = Settings{CostDelay: time.Second, CostLimit: rate, PageHitCost: 1}
				charge = usage.Reading{Hits: 1 << 10}
			}
			th, err := New(s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			m := th.Meter(nil)
			time.Sleep(300 * time.Millisecond) // idle: allowance accrues, up to the burst is kept
			// Charge 1 KiB at a time until a Wait sleeps: what passed without one is the
			// banked burst plus what accrued meanwhile. A sleep is one the throttle counts
			// (Stats.Sleeps), not a Wait that took long: on a loaded machine the kernel
			// may hold the test's thread up for a millisecond in any call.
			start, passed := time.Now(), 0.0
			for {
				m.Charge(charge)
				if err := m.Wait(context.Background()); err != nil {
					t.Fatal(err)
				}
				if th.Stats().Sleeps > 0 {
					break
				}
				passed += 1 << 10
			}
			elapsed := time.Since(start)
			burst := th.Options().Burst
			if k == WALBytes {
				burst = th.Options().WALBurst
			}
			want := rate * (burst + th.Options().MinSleep).Seconds()
			t.Logf("%s: %.0f units passed without a sleep in %v after 300 ms idle (burst %v)", k, passed, elapsed, burst)
			if most := want + rate*elapsed.Seconds() + 1<<10; passed > most {
				t.Errorf("%.0f units passed at once, want at most %.0f (a %v burst)", passed, most, burst)
			}
			if passed < 0.9*want-1<<10 {
				t.Errorf("%.0f units passed at once, want the %v burst (%.0f)", passed, burst, want)
			}
		})
	}
}
