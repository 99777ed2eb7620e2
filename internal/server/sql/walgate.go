package sql

import (
	"github.com/vacuumops/vacuum-operator/internal/engine"
	engineusage "github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// The WAL lag bound inside the server. vacuum_adaptive_max_lag_bytes, the user's bound on
// a standby's lag (throttle.adaptive.replicationLag.maxBytes in the API), is two things to
// a running VACUUM: the adaptive controller's lag target, which steers the rate every
// adaptivePeriod, and the run's WAL lag bound (throttle.Throttle.SetWALLagBound), which
// holds the vacuum's WAL writers at their next delay point while the slowest standby is
// more than that far behind the WAL inserted, and lets them go at the standby's next
// report. The controller alone
// samples every 100 ms, and at tens of MB/s of WAL a bound of 1 MiB is tens of
// milliseconds of delay: the hold keeps the bound between its samples and through the
// stalls it cannot see, while the controller keeps the rate where the hold is rarely
// needed. Both read the same primary (package replication, wired by the server).

// walHoldAt is the WAL lag bound the throttle holds a vacuum's WAL writers at for a lag
// target of target bytes: below the target by walHoldHeadroom of it, at most
// walHoldHeadroomMax. A worker is held only at its delay point after the WAL that took the
// standby over the bound, and the foreground's WAL goes on meanwhile, so a bound at the
// target itself let the lag pass it: experiment 10's adaptive FULLs peaked 10 to 19 KB over
// a 0.221 MB target (one heap page's WAL and the load's), and every one of their 1-second
// windows missed. Held at 3/4 of it (this package's FULL beside a simulated standby went
// 18.6 KB past a 112 KiB hold), the lag stays within the target the user set.
func walHoldAt(target int64) int64 {
	if target <= 0 {
		return 0
	}
	return target - min(target/walHoldHeadroom, walHoldHeadroomMax)
}

const (
	// walHoldHeadroom: the bound is target - target/walHoldHeadroom.
	walHoldHeadroom = 4
	// walHoldHeadroomMax caps the headroom for large targets: several delay points' WAL
	// (a heap page's image and its records, about 8 KiB each) and the foreground's.
	walHoldHeadroomMax = 64 << 10
)

// SetStandbyReplay gives the registry the slowest standby's replay position, how many
// standbys have reported one and a channel closed at the next report
// (replication.Primary.SlowestReplay). Without it the WAL lag bound holds nothing.
func (v *Vacuums) SetStandbyReplay(fn func() (replayed wal.LSN, standbys int, changed <-chan struct{})) {
	if v == nil {
		return
	}
	v.mu.Lock()
	v.replay = fn
	v.mu.Unlock()
}

// walGate returns the throttle's view of replication for a VACUUM of db (nil: no standby
// is ever seen, or db writes no WAL of its own).
func (v *Vacuums) walGate(db *engine.DB) throttle.WALGate {
	if v == nil || db == nil || db.WAL() == nil {
		return nil
	}
	v.mu.Lock()
	fn := v.replay
	v.mu.Unlock()
	if fn == nil {
		return nil
	}
	return walGate{log: db.WAL(), replay: fn}
}

// walGate measures a standby's lag from the WAL inserted, not flushed: a vacuum's records
// count from the moment they exist, before a flush makes them visible to the standby (and
// the throttle flushes them before it holds a worker, FlushWAL).
type walGate struct {
	log    *wal.Log
	replay func() (wal.LSN, int, <-chan struct{})
}

// WALBehind implements throttle.WALGate.
func (g walGate) WALBehind() (int64, bool, <-chan struct{}) {
	replayed, n, changed := g.replay()
	if n == 0 {
		return 0, false, changed
	}
	inserted := g.log.InsertLSN()
	if inserted <= replayed {
		return 0, true, changed
	}
	return int64(inserted - replayed), true, changed
}

// FlushWAL implements throttle.WALGate: the log's flush up to its inserted end.
func (g walGate) FlushWAL(u *engineusage.Counters) error {
	if err := g.log.Flush(g.log.InsertLSN(), u); err != nil {
		return engineError(err)
	}
	return nil
}
