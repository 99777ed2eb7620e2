package throttle

import "time"

// LimitStats reports one limit of one throttle.
type LimitStats struct {
	Kind Kind
	// Active reports whether the limit is on.
	Active bool
	// Configured is the current rate in units per second (0 when off).
	Configured float64
	// Consumed is every unit charged since the throttle was created.
	Consumed float64
	// AchievedRun is Consumed per second of the throttle's life.
	AchievedRun float64
	// AchievedRecent is units per second over the last 5 s.
	AchievedRecent float64
	// RatioRun is the units consumed while the limit was on over the
	// allowance it granted in that time (1.0 = exactly at the limit), which
	// stays meaningful across Updates. 0 when the limit never was on.
	RatioRun float64
	// Forfeited is allowance no charge claimed within Burst and that was
	// therefore given up: the workers were slower than the limit (work,
	// I/O, scheduling delays), not held back by it. RatioRun plus
	// Forfeited over the allowance is ~1 whenever the throttle paced.
	Forfeited float64
}

// Stats is a snapshot of a throttle's accounting.
type Stats struct {
	// Elapsed is the throttle's age.
	Elapsed time.Duration
	// Slept is the total time waiters of this throttle and of its children
	// slept, summed over workers (two workers sleeping 1 s each count 2 s).
	Slept time.Duration
	// Sleeps is the number of sleeps included in Slept.
	Sleeps int64
	// Paused reports whether the run (the root throttle) is paused now.
	Paused bool
	// PausedFor is the wall time the run has been paused, the current
	// pause included (once per run, not per worker; not in Slept).
	PausedFor time.Duration
	// Pauses is the number of times the run was paused.
	Pauses int64
	// WALHeld is the time waiters of this throttle and of its children were
	// held by the WAL lag bound (Throttle.SetWALLagBound), summed over
	// workers; not in Slept.
	WALHeld time.Duration
	// WALHolds is the number of delay points the bound held.
	WALHolds int64
	// Limits is indexed by Kind.
	Limits [numKinds]LimitStats
}

// Stats returns t's accounting now.
func (t *Throttle) Stats() Stats {
	r := t.root
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	act := r.active(now)
	st := Stats{Elapsed: now - t.start, Slept: t.slept, Sleeps: t.sleeps,
		Paused: r.paused, PausedFor: r.pausedFor(now), Pauses: r.pauses, WALHeld: t.walHeld, WALHolds: t.walHolds}
	for k := range numKinds {
		l := &t.lims[k]
		ls := LimitStats{Kind: k, Active: l.rate > 0, Configured: l.rate, Consumed: l.consumed, Forfeited: l.forfeited}
		if secs := st.Elapsed.Seconds(); secs > 0 {
			ls.AchievedRun = l.consumed / secs
		}
		ls.AchievedRecent = l.recent(now, t.start)
		if a := l.allowed(act); a > 0 {
			ls.RatioRun = l.activeConsumed / a
		}
		st.Limits[k] = ls
	}
	return st
}
