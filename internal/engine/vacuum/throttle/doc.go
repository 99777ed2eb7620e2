// Package throttle paces vacuum workers so that a run never consumes more
// than its configured rates: cost units per second (PostgreSQL's cost
// model, limit/delay), and optionally bytes read, written and WAL bytes
// inserted per second. It replaces PostgreSQL's "sleep after every
// costLimit of balance" rule (kept here as PostgresNap, for comparison)
// with virtual-clock pacing, because on real machines time.Sleep rounds
// small delays up (~1.1 ms floor here) and the work between sleeps is not
// counted, so the rule misses its target by 2-20x at small delays.
//
// # Algorithm (GCRA, one clock per limit)
//
// Each limit keeps, in units, an allowance A(t) = rate * (time since the
// limit was enabled), continuous across rate changes, and a consumption
// position pos. A worker's delay point (Meter.Wait) charges the usage
// since its previous delay point, u units, to every limit of its throttle
// and of the throttle's ancestors:
//
//	pos = max(pos, A(now) - burst) + u
//
// and the worker must wait until A reaches that pos. If that is less than
// MinSleep away (default 1 ms) it does not sleep: the debt stays in pos
// and is paid at a later delay point. Otherwise it sleeps, on one
// reusable timer, until the latest of its targets (the most restrictive
// limit decides). Oversleeping is not lost: the allowance it accrued is
// kept, up to burst (default 100 ms at the limit's rate; 10 ms for the WAL
// limit, whose bursts a standby feels as replication lag), and lets the
// next charges through without sleeping. Work time between delay points is
// likewise inside the clock, not added to it.
//
// # Invariants
//
//   - No initial credit: pos starts at A = 0. Hence, for every limit, the
//     units of the charges whose Wait has returned by time t never exceed
//     rate*(t - start + MinSleep), whatever the work time, the timer's
//     granularity or the number of workers sharing the throttle (positions
//     grow in charge order, and a charge is let through only when A is
//     within MinSleep of its position). Over any window the burst adds at
//     most rate*Burst. Tests assert this bound at every Wait.
//   - Usage is post-paid: a worker does a page's work, then charges it at
//     its next delay point. In-flight consumption is at most one page of
//     work per worker.
//   - One budget per run: all workers share the root Throttle (one mutex),
//     so parallelism never raises the run's rate. A Child (one table's
//     overrides) has its own limits, computed with its own cost weights,
//     and every charge to it also goes to its ancestors: the table's
//     limit and the run's limit both hold.
//   - Update keeps outstanding debt in units: it re-anchors A at the
//     current time and rate, so a waiter's remaining wait is rescaled to
//     the new rate (no debt forgiven, none added). Sleeping waiters are
//     woken to recompute. A limit switched off voids its positions; one
//     switched on starts fresh.
//   - Cancellation: Wait returns ctx.Err() at once when ctx is already
//     done (still charging the usage), and within a timer tick when ctx is
//     cancelled mid-sleep.
//   - Pause: Throttle.Pause stops the whole run at every worker's next
//     delay point (also with no limit on, since workers still pass delay
//     points) and wakes sleepers; they wait on a channel (no polling) until
//     Resume or cancellation. The limits pace on an active clock that
//     stands still while paused, so no allowance accrues during a pause:
//     debt outstanding at the pause is still repaid after it, and a
//     resumed run does not burst. Stats reports Paused, PausedFor and
//     Pauses; paused time is not in Slept.
//
// # Which WAL bytes
//
// The WAL limit reads usage.Counters.WALBytes, the bytes this worker's
// records inserted (full-page images included), not WALWriteBytes, the
// bytes its flushes wrote. Insertion is attributed exactly to the worker
// that generated the WAL and at the moment it did; flushed bytes depend on
// who happens to flush (a committing foreground transaction, the ring's
// forced flushes, the WAL writer), so they mis-attribute and lag. Inserted
// bytes are also what a replica must receive, which is what the limit is
// for (replication lag).
//
// # The WAL lag bound (closed loop)
//
// A WAL rate limit is open-loop: it is set from a standby's apply rate
// measured once, and on a shared machine that rate swings with the load and
// the whole pipeline (primary, network, standby) stalls at times; at 45 MB/s
// a 1 MiB lag is 23 ms of delay, so any longer stall breaks the bound the
// limit was meant to keep. A WAL lag bound (Throttle.SetWALLagBound) closes
// the loop: after a delay point's rate limits, a waiter whose charge
// inserted WAL is held while the Options.WALGate reports the slowest
// attached standby more than the bound behind the WAL inserted so far, and
// released when a standby report brings it within. Before it waits it has
// the gate flush the WAL (a standby is sent only durable WAL: held for WAL
// nobody flushes, it would wait for ever). The lag the standby sees is then
// at most the bound plus what was inserted between one delay point and the
// next (a page's work per worker) and what the foreground inserts
// meanwhile. No standby attached (or no gate): nothing is held. Held time is
// in Stats (WALHeld, WALHolds), not in Slept; a pause during a hold is a
// pause.
//
// # Accounting
//
// Stats reports, per limit, units consumed, the rate achieved over the
// throttle's life and over the last 5 s (a ring of 100 ms buckets), and
// the ratio of consumption to allowance while the limit was on; and the
// time slept by the throttle's waiters (a child's sleeps count in its
// ancestors too), summed over workers.
package throttle
