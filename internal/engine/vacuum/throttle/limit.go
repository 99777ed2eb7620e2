package throttle

import "time"

const (
	ringBuckets = 50
	bucketWidth = 100 * time.Millisecond // ring covers the last 5 s
)

// limit is the pacing state of one rate limit of one throttle. Its pacing
// times (allowT, the arguments named act) are on the run's active clock:
// time since the root throttle's start minus the time the run was paused,
// so no allowance accrues while paused. The ring is on the wall clock
// (since the root's start), so recent rates fall to 0 during a pause. All
// fields are guarded by the root's mutex.
//
// The allowance A(t) = allowA + rate*(t-allowT) is the number of units the
// limit has allowed since it was (re)enabled; it is continuous across rate
// changes. pos is the consumption position: each charge of u units sets
// pos = max(pos, A(now)-burst) + u. A charge is cleared when A reaches its
// pos, i.e. at time timeAt(pos).
type limit struct {
	rate  float64 // units per second; 0 = off
	burst float64 // units of unused allowance kept
	gen   uint64  // bumped when the limit is re-enabled: old positions are void

	allowT time.Duration
	allowA float64
	pos    float64

	// Accounting.
	consumed       float64 // every unit charged, limited or not
	activeConsumed float64 // units charged while the limit was on
	allowedBefore  float64 // allowance of earlier enabled periods
	forfeited      float64 // allowance unclaimed for longer than burst
	ring           [ringBuckets]float64
	head           int64 // bucket number of ring's newest bucket
}

func (l *limit) allowance(now time.Duration) float64 {
	return l.allowA + l.rate*(now-l.allowT).Seconds()
}

// timeAt is when the allowance reaches p.
func (l *limit) timeAt(p float64) time.Duration {
	return l.allowT + time.Duration((p-l.allowA)/l.rate*float64(time.Second))
}

// charge records u units at wall time now (active time act) and, when the
// limit is on, returns the position the charge must wait for.
func (l *limit) charge(now, act time.Duration, u float64) (pos float64, on bool) {
	l.consumed += u
	l.ringAdd(now, u)
	if l.rate == 0 {
		return 0, false
	}
	l.activeConsumed += u
	if floor := l.allowance(act) - l.burst; floor > l.pos {
		l.forfeited += floor - l.pos
		l.pos = floor
	}
	l.pos += u
	return l.pos, true
}

// set changes the rate at active time now. Outstanding debt (pos - A(now)) keeps its
// size in units, so a waiter's wait scales with the new rate: no debt is
// forgiven or added. A limit turned on starts fresh with no credit.
func (l *limit) set(now time.Duration, rate, burst float64) {
	switch {
	case l.rate > 0 && rate > 0:
		l.allowA, l.allowT = l.allowance(now), now
	case l.rate > 0 && rate == 0:
		l.allowedBefore += l.allowance(now)
	case l.rate == 0 && rate > 0:
		l.gen++
		l.allowA, l.allowT, l.pos = 0, now, 0
	}
	l.rate, l.burst = rate, burst
}

func (l *limit) allowed(now time.Duration) float64 {
	if l.rate == 0 {
		return l.allowedBefore
	}
	return l.allowedBefore + l.allowance(now)
}

func (l *limit) advance(now time.Duration) int64 {
	b := int64(now / bucketWidth)
	if b-l.head >= ringBuckets {
		l.ring = [ringBuckets]float64{}
	} else {
		for i := l.head + 1; i <= b; i++ {
			l.ring[i%ringBuckets] = 0
		}
	}
	l.head = max(l.head, b)
	return b
}

func (l *limit) ringAdd(now time.Duration, u float64) {
	b := l.advance(now)
	l.ring[b%ringBuckets] += u
}

// recent is the units per second consumed over the last ~5 s (the window
// starts at the oldest bucket the ring holds, or at start).
func (l *limit) recent(now, start time.Duration) float64 {
	b := l.advance(now)
	sum := 0.0
	for _, v := range l.ring {
		sum += v
	}
	from := max(start, time.Duration(b-ringBuckets+1)*bucketWidth)
	if w := (now - from).Seconds(); w > 0 {
		return sum / w
	}
	return 0
}
