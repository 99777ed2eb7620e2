package throttle

import (
	"errors"
	"fmt"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

// Settings are the limits of one throttle. Every limit is a rate; a zero
// limit is no limit.
type Settings struct {
	// CostDelay with CostLimit sets the cost rate: CostLimit units per
	// CostDelay, sustained. 0 disables cost throttling.
	CostDelay time.Duration
	// CostLimit is the number of cost units allowed per CostDelay.
	CostLimit int
	// PageHitCost, PageMissCost and PageDirtyCost weigh buffer hits, misses
	// (reads from storage) and pages dirtied.
	PageHitCost, PageMissCost, PageDirtyCost int
	// MaxReadBytesPerSecond caps bytes read from relation files.
	MaxReadBytesPerSecond int64
	// MaxWriteBytesPerSecond caps bytes written to relation files.
	MaxWriteBytesPerSecond int64
	// MaxWALBytesPerSecond caps WAL bytes inserted (see doc.go for why
	// inserted rather than flushed).
	MaxWALBytesPerSecond int64
}

// DefaultSettings are PostgreSQL 14+'s vacuum cost defaults and no byte
// limits: delay 2 ms, limit 200, hit 1, miss 2, dirty 20.
func DefaultSettings() Settings {
	return Settings{CostDelay: 2 * time.Millisecond, CostLimit: 200, PageHitCost: 1, PageMissCost: 2, PageDirtyCost: 20}
}

// ErrInvalidSettings is wrapped by every validation error.
var ErrInvalidSettings = errors.New("invalid throttle settings")

// Validate reports the first setting out of range.
func (s Settings) Validate() error {
	switch {
	case s.CostDelay < 0:
		return fmt.Errorf("cost delay %v is negative: %w", s.CostDelay, ErrInvalidSettings)
	case s.CostDelay > 0 && s.CostLimit < 1:
		return fmt.Errorf("cost limit %d must be at least 1 when cost delay is %v: %w", s.CostLimit, s.CostDelay, ErrInvalidSettings)
	case s.PageHitCost < 0 || s.PageMissCost < 0 || s.PageDirtyCost < 0:
		return fmt.Errorf("page costs hit %d miss %d dirty %d must not be negative: %w",
			s.PageHitCost, s.PageMissCost, s.PageDirtyCost, ErrInvalidSettings)
	case s.MaxReadBytesPerSecond < 0 || s.MaxWriteBytesPerSecond < 0 || s.MaxWALBytesPerSecond < 0:
		return fmt.Errorf("byte rates read %d write %d WAL %d must not be negative: %w",
			s.MaxReadBytesPerSecond, s.MaxWriteBytesPerSecond, s.MaxWALBytesPerSecond, ErrInvalidSettings)
	}
	return nil
}

// Kind names one limit.
type Kind int

// The limits a throttle enforces.
const (
	Cost Kind = iota
	ReadBytes
	WriteBytes
	WALBytes
	numKinds
)

// String names the kind, for reports.
func (k Kind) String() string {
	switch k {
	case Cost:
		return "cost"
	case ReadBytes:
		return "read-bytes"
	case WriteBytes:
		return "write-bytes"
	case WALBytes:
		return "wal-bytes"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Rate is the configured rate of limit k in units per second; 0 means the
// limit is off.
func (s Settings) Rate(k Kind) float64 {
	switch k {
	case Cost:
		if s.CostDelay <= 0 || s.CostLimit <= 0 {
			return 0
		}
		return float64(s.CostLimit) / s.CostDelay.Seconds()
	case ReadBytes:
		return float64(s.MaxReadBytesPerSecond)
	case WriteBytes:
		return float64(s.MaxWriteBytesPerSecond)
	case WALBytes:
		return float64(s.MaxWALBytesPerSecond)
	}
	return 0
}

// Units is what usage d consumes of limit k: for cost
// hits*PageHitCost + misses*PageMissCost + dirtied*PageDirtyCost, for the
// byte limits ReadBytes, WriteBytes and WALBytes (inserted).
func (s Settings) Units(k Kind, d usage.Reading) float64 {
	switch k {
	case Cost:
		return float64(d.Hits*int64(s.PageHitCost) + d.Misses*int64(s.PageMissCost) + d.Dirtied*int64(s.PageDirtyCost))
	case ReadBytes:
		return float64(d.ReadBytes)
	case WriteBytes:
		return float64(d.WriteBytes)
	case WALBytes:
		return float64(d.WALBytes)
	}
	return 0
}

// DefaultBurst is Options.Burst's default.
const DefaultBurst = 100 * time.Millisecond

// DefaultWALBurst is Options.WALBurst's default.
const DefaultWALBurst = 10 * time.Millisecond

// Options tune the pacing itself, not the limits.
type Options struct {
	// MinSleep is the smallest debt worth sleeping for; smaller debts carry
	// over to the next delay point. Default 1 ms (time.Sleep's floor here
	// is ~1.1 ms, so shorter sleeps would oversleep anyway).
	MinSleep time.Duration
	// Burst is how much unused allowance, in time at the limit's rate, a
	// limit keeps for later: it absorbs oversleeps, the work done between
	// delay points and stalls (a WAL fsync forced by a ring eviction, the
	// scheduler giving the CPU to other processes), after which the
	// workers catch up instead of losing that time. Default 100 ms: with
	// 20 ms, stalls longer than that cost a vacuum at cost delay 2 ms 1 to
	// 6 % of its allowance on a busy 2-core machine (the forfeited
	// allowance in Stats). Over any window the limit lets through at most
	// rate x (window + Burst + MinSleep).
	Burst time.Duration
	// WALBurst is Burst for the WAL limit alone. The WAL a vacuum inserts is
	// what a standby must receive and replay, so banked allowance spent at
	// once is replication lag: a VACUUM FULL under a 21.5 MB/s limit that
	// inserted no WAL for 67 ms then inserted at 100 MB/s (up to 100 ms of
	// burst, 2 MB), and its synchronous standby's replay lag jumped from
	// about 0.3 to 1.76 MB (experiment 5, pg_stat_replication read every 5 ms).
	// Default 10 ms: the timer's oversleeps (about 1 ms) are still absorbed,
	// while a stalled vacuum's WAL rate falls behind the limit rather than
	// catching up in a burst.
	WALBurst time.Duration
	// WALGate tells the throttle how far behind the standbys are, for the
	// WAL lag bound (Throttle.SetWALLagBound); nil: no standby is ever seen
	// and the bound holds nothing back.
	WALGate WALGate
}

// WALGate is the throttle's view of replication, for the WAL lag bound.
type WALGate interface {
	// WALBehind returns how many bytes of the WAL inserted so far the
	// slowest attached standby has not replayed (attached false when no
	// standby is attached: nothing is held then), and a channel closed
	// when that may have changed (a standby reported a position, attached
	// or left). The throttle calls it at delay points, so it must be cheap
	// and must not wait.
	WALBehind() (behind int64, attached bool, changed <-chan struct{})
	// FlushWAL makes the WAL inserted so far durable, so that it can be
	// sent (a standby is sent only flushed WAL), charging the flush to u.
	// The throttle calls it before it holds a worker: the WAL behind is
	// counted from the inserted end, and a worker held for WAL nobody
	// flushes would wait for a standby that cannot catch up.
	FlushWAL(u *usage.Counters) error
}

func (o Options) withDefaults() Options {
	if o.MinSleep <= 0 {
		o.MinSleep = time.Millisecond
	}
	if o.Burst <= 0 {
		o.Burst = DefaultBurst
	}
	if o.WALBurst <= 0 {
		o.WALBurst = DefaultWALBurst
	}
	return o
}

// burst is the burst of limit k (WALBurst for the WAL limit, Burst for the others).
func (o Options) burst(k Kind) time.Duration {
	if k == WALBytes {
		return o.WALBurst
	}
	return o.Burst
}

// addUsage returns a + b for the fields the throttle reads.
func addUsage(a, b usage.Reading) usage.Reading {
	a.Hits += b.Hits
	a.Misses += b.Misses
	a.Dirtied += b.Dirtied
	a.ReadBytes += b.ReadBytes
	a.WriteBytes += b.WriteBytes
	a.WALBytes += b.WALBytes
	return a
}
