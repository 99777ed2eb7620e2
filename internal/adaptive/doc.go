// Package adaptive is the control law of adaptive throttling: every
// control period it reads the signals a vacuum must not push past their
// targets (the foreground's latency percentile, a standby's replication
// lag) and decides the vacuum's budget, as a fraction of its static
// ceiling, between a floor and 1.
//
// It knows neither the engine server nor the throttle: the caller samples
// the signals, calls Step once per period, and applies the Decision through
// the throttle's live re-throttle and pause primitives.
//
// The law takes the properties production rate controllers learned the hard
// way (CockroachDB's elastic CPU limiter, Vitess's MaxReplicationLagModule,
// TiKV's quota auto-tuning, RocksDB's auto-tuned rate limiter):
//
//   - cut fast, raise slowly: a cut may halve the budget in one step, a
//     raise adds at most MaxRaise (10 %);
//   - a dead band around each target in which the budget holds;
//   - anti-windup: a raise only when the current budget was actually used
//     (the vacuum ran at least UsedToRaise of it), so an idle or I/O-bound
//     vacuum does not bank a budget it would spend all at once later;
//   - a dwell time after every change before the next judgement, so the
//     signal, a percentile over a window, shows the change's effect;
//   - the floor at all times except HardStop: while a signal is above
//     HardStopFactor times its target the vacuum pauses, at most
//     HardStopMax at a time, then resumes at the floor; a pause that ran
//     out with the signal still over did not help (the foreground is slow
//     for another reason), so the next waits until the vacuum has run at
//     the floor as long as it paused, doubling with each such pause in a
//     row up to 8 pauses' length, until a pause helps or a judgement finds
//     every target held;
//   - a climb back after HardStop (Config.Recovery, which the engine server
//     sets to 2): the law remembers the last budget a judgement found
//     holding every target, lowered to a cut's choice when a cut refutes
//     it (or, when none has held, half the budget the stop began at, as
//     TCP's ssthresh after a timeout), and
//     returns to it by raises of up to Recovery at once, each no larger
//     than the signals' own steps ask, then probes above it by MaxRaise;
//   - stale signals (no fresh sample, a standby gone) hold the budget and
//     never raise it;
//   - a lag target is approached from below: the law starts at the ceiling
//     when it steers only levels (a latency falls as soon as the vacuum
//     slows), at the floor when a signal integrates (a lag that a start at
//     the ceiling has built must be replayed by the standby before it
//     shrinks; one period at the ceiling may already be over the target),
//     unless the caller holds the lag under its target by other means: the
//     engine server starts a lag target in bytes at the ceiling (Start 1),
//     since the same target is a hard bound on the vacuum's WAL there.
//
// A level signal (latency) is steered by a secant step on the logarithms
// of budget and signal, so the law learns how strongly the foreground
// reacts to the vacuum; an integrating signal (replication lag, which
// grows while the vacuum writes WAL faster than the standby applies it) is
// steered on the lag predicted a horizon ahead from its trend, which damps
// the oscillation a pure lag rule would have.
package adaptive
