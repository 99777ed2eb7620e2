// Package latency measures the server's foreground statement latency: per statement kind,
// an HdrHistogram over a sliding window of the last seconds (for the
// vacuumops_statement_latency view, which the runner and the operator read for the
// foreground p50/p99 during a vacuum) and a cumulative Prometheus histogram (for /metrics).
//
// Which statements are foreground is the caller's decision (package sql: not VACUUM, not
// sessions whose application_name starts with vacuum-runner). A Recorder is safe for
// concurrent use; Observe takes one short lock, and a Snapshot holds it only to copy the
// current second (it merges the window outside it).
package latency

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/client_golang/prometheus"
)

// Window is the span the view's figures cover: the last Window, in one-second slots.
const Window = 10 * time.Second

const slots = int(Window / time.Second)

// Histogram range: 1 µs to 1 hour, 3 significant digits (0.1 % error on a percentile).
const (
	lowestMicros  = 1
	highestMicros = int64(time.Hour / time.Microsecond)
	sigFigs       = 3
)

// Kinds are the statement kinds, in the order the view lists them.
var Kinds = []string{"select", "insert", "update", "delete", "copy", "commit", "other"}

// All is the row of every foreground statement whatever its kind, listed after Kinds: one
// histogram of the same range and precision as the kinds' rows, recorded as each statement
// is (not merged from the kinds' percentiles), so a reader gets the foreground's p99 at once.
// /metrics has no such series: sum the kinds' buckets there.
const All = "all"

// Recorder holds every kind's histograms.
type Recorder struct {
	now  func() time.Time
	prom *prometheus.HistogramVec

	mu    sync.Mutex
	kinds map[string]*window
	// recent is every foreground statement over the last RecentMax, in RecentSlot slots:
	// the adaptive throttle's signal, which the one-second slots are too coarse for.
	recent *ring
}

// Recent is the span RecentQuantile covers, in slots of RecentSlot, and the shortest one
// RecentQuantileSince covers; RecentMax the longest. The adaptive throttle steps every
// 100 ms, so it judges a change after Recent/RecentSlot periods at the soonest.
const (
	Recent     = 500 * time.Millisecond
	RecentSlot = 100 * time.Millisecond
	RecentMax  = 2 * time.Second
)

// window is one kind's sliding window of one-second slots: secs[cur] covers the second that
// started at start, the slots before it (modulo the ring's length) the seconds before.
//
// A slot is never reset: the rotation puts a new histogram in the place of the oldest, so a
// slot that is no longer current never changes again and Snapshot merges those outside the
// lock (see Snapshot).
type window struct {
	secs  []*hdrhistogram.Histogram
	cur   int
	start time.Time
}

func newWindow(now time.Time) *window {
	w := &window{secs: make([]*hdrhistogram.Histogram, slots), start: now.Truncate(time.Second)}
	for i := range w.secs {
		w.secs[i] = newHistogram()
	}
	return w
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(lowestMicros, highestMicros, sigFigs)
}

// New returns an empty recorder.
func New() *Recorder { return newAt(time.Now) }

func newAt(now func() time.Time) *Recorder {
	return &Recorder{now: now, kinds: map[string]*window{},
		prom: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vacuumops_statement_latency_seconds",
			Help: "Foreground statement latency by statement kind (VACUUM and vacuum-runner sessions excluded).",
			// Classic buckets from 100 µs to about 13 s, and a native histogram for
			// scrapers that take one.
			Buckets:                     prometheus.ExponentialBuckets(0.0001, 2, 18),
			NativeHistogramBucketFactor: 1.1,
		}, []string{"kind"})}
}

// Collector is the /metrics histogram.
func (r *Recorder) Collector() prometheus.Collector { return r.prom }

// advance rotates w's one-second slots up to now (r.mu is held).
func (w *window) advance(now time.Time) {
	k := int(now.Sub(w.start) / time.Second)
	if k <= 0 {
		return
	}
	for range min(k, len(w.secs)) {
		w.cur = (w.cur + 1) % len(w.secs)
		w.secs[w.cur] = newHistogram()
	}
	w.start = w.start.Add(time.Duration(k) * time.Second)
}

// current is the slot that receives new values.
func (w *window) current() *hdrhistogram.Histogram { return w.secs[w.cur] }

const recentSlots = int(RecentMax / RecentSlot)

// ring is the recent window: RecentMax in slots of RecentSlot, the newest at index newest
// and the older ones before it (modulo the ring's length).
type ring struct {
	slots   []*hdrhistogram.Histogram
	newest  int       // index of the slot that started at start
	start   time.Time // when the newest slot began
	scratch *hdrhistogram.Histogram
}

func newRing(now time.Time) *ring {
	r := &ring{slots: make([]*hdrhistogram.Histogram, recentSlots), start: now.Truncate(RecentSlot),
		scratch: hdrhistogram.New(lowestMicros, highestMicros, sigFigs)}
	for i := range r.slots {
		r.slots[i] = hdrhistogram.New(lowestMicros, highestMicros, sigFigs)
	}
	return r
}

// advance rotates the ring up to now: each slot that ends is the newest no longer.
func (r *ring) advance(now time.Time) {
	k := int(now.Sub(r.start) / RecentSlot)
	if k <= 0 {
		return
	}
	for range min(k, len(r.slots)) {
		r.newest = (r.newest + 1) % len(r.slots)
		r.slots[r.newest].Reset()
	}
	r.start = r.start.Add(time.Duration(k) * RecentSlot)
}

// merge merges the newest slots into the scratch histogram, from the newest back, and
// stops after the slot with which they cover at least Recent and hold at least minCount
// statements, before a slot that began before since, or at RecentMax. enough is false
// only when since stopped it short of both. The result is valid until the next merge.
func (r *ring) merge(since time.Time, minCount int64) (h *hdrhistogram.Histogram, enough bool) {
	r.scratch.Reset()
	start := r.start
	for i := range r.slots {
		if start.Before(since) {
			return r.scratch, false
		}
		r.scratch.Merge(r.slots[(r.newest-i+len(r.slots))%len(r.slots)])
		if time.Duration(i+1)*RecentSlot >= Recent && r.scratch.TotalCount() >= minCount {
			break
		}
		start = start.Add(-RecentSlot)
	}
	return r.scratch, true
}

// RecentQuantile returns the foreground's latency at quantile q (0..100) over the last
// Recent, and the number of statements it covers (0: none, the figure is then 0).
func (r *Recorder) RecentQuantile(q float64) (time.Duration, int64) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recent == nil {
		return 0, 0
	}
	r.recent.advance(now)
	h, _ := r.recent.merge(time.Time{}, 0) // no count wanted: the loop ends at Recent
	return time.Duration(h.ValueAtQuantile(q)) * time.Microsecond, h.TotalCount()
}

// RecentQuantileSince is the adaptive throttle's signal: the foreground's latency at
// quantile q (0..100) over as few of the newest RecentSlot slots as cover Recent and hold
// at least minCount statements (at most RecentMax of them), counting no slot that began
// before since (the throttle's last change: what it judges must have run under it). A
// percentile over a few hundred statements is set by the slowest two or three, which on a
// busy machine one stall makes; minCount makes one judgement cover enough statements
// that a stall is not the p99. It returns the figure, the statements it covers, and
// enough: false when since cut the span short of both Recent and minCount (the caller
// then waits), true when RecentMax did (a foreground too slow to fill minCount is judged
// on what RecentMax holds).
func (r *Recorder) RecentQuantileSince(q float64, since time.Time, minCount int64) (d time.Duration, n int64, enough bool) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recent == nil {
		return 0, 0, false
	}
	r.recent.advance(now)
	h, enough := r.recent.merge(since, minCount)
	return time.Duration(h.ValueAtQuantile(q)) * time.Microsecond, h.TotalCount(), enough
}

// Judgement is the adaptive throttle's reading of the recent window (RecentJudgement).
type Judgement struct {
	// Quantile is the latency at the quantile asked for over the statements judged; when
	// Over decided the judgement early, the least the full judgement's figure can be.
	Quantile time.Duration
	// Count is the statements judged.
	Count int64
	// Enough is RecentQuantileSince's enough, or Over.
	Enough bool
	// Over: too few statements ran since the last change for a full judgement, but so
	// many of them were slower than the limit that the full judgement, at the
	// foreground's present rate, cannot hold it whatever the rest take.
	Over bool
	// Firm is the latency that at least as many of the statements judged took as the
	// early verdict needs (its need-th slowest; 0 when fewer were judged): a figure
	// above a bound stands for the foreground only when Firm is above it too, not one
	// stall of the machine that held up a statement of each client.
	Firm time.Duration
	// Above is how many of the statements judged took longer than the limit (0 with no
	// limit), at the histogram's precision and at most AboveMax: the count a caller tests
	// the quantile against the limit with, where Quantile is one order statistic of them.
	Above int64
}

// RecentJudgement is RecentQuantileSince at quantile q with an early verdict over limit at
// quantile early (at most q). A full judgement covers minCount statements, or at a slower
// foreground what RecentMax holds (at 200 statements a second, 400 in 2 s): the throttle
// could change its budget only that often, and a start too fast for the target would
// spend whole seconds over it. When fewer statements ran since the change but more of
// them were slower than limit than a judgement at quantile early of earlyCount statements
// allows (its (100-early) % of the statements the last RecentMax held, up to earlyCount),
// that verdict is known: over. The judgement is then Enough and Over, its Quantile the latency of the
// slowest statement the verdict needs, the least that judgement's quantile could be: a
// bound the cut and HardStop can act on without reading one stall of the machine (a
// statement of each client held up at once) as the foreground's percentile.
func (r *Recorder) RecentJudgement(q, early float64, since time.Time, minCount, earlyCount int64, limit time.Duration) Judgement {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recent == nil {
		return Judgement{}
	}
	r.recent.advance(now)
	h, enough := r.recent.merge(since, minCount)
	j := Judgement{Quantile: time.Duration(h.ValueAtQuantile(q)) * time.Microsecond, Count: h.TotalCount(), Enough: enough}
	if j.Count == 0 {
		return j
	}
	if limit > 0 {
		j.Above = countAbove(h, limit.Microseconds())
	}
	if enough {
		j.Quantile = time.Duration(h.ValueAtQuantile(unbiasedQuantile(q, j.Count))) * time.Microsecond
	}
	full := max(j.Count, min(earlyCount, r.recent.total()))
	need := int64(math.Floor((1-min(q, early)/100)*float64(full))) + 1
	if need > j.Count {
		return j
	}
	// The need-th slowest statement: at least need statements took this long or longer.
	rank := j.Count - need + 1
	v := time.Duration(h.ValueAtQuantile(100*float64(rank)/float64(j.Count))) * time.Microsecond
	j.Firm = v
	if enough || limit <= 0 {
		return j
	}
	if v > limit {
		j.Quantile, j.Enough, j.Over = v, true, true
	}
	return j
}

// unbiasedQuantile is the quantile to read from n statements for a figure of quantile q
// that is as likely above the true q-quantile as below it, or above: the j-th slowest
// statement is at or above it when at least j of the n were, which happens with the
// probability P(Poisson(m) >= j), m = n (100-q)/100 the statements expected above it; the
// figure is the slowest j for which that is at least one half (the slowest of all when
// none is: m under ln 2, too few statements for any sound figure, which a caller prevents
// with minCount). The histogram's own rank, the nearest to q n, is lower: at m = 0.74 (181
// statements, the p99.59) the second slowest, above the quantile only 17 % of the time, a
// figure that would judge the foreground faster than it is. It returns the quantile whose
// rank in the histogram (round to nearest) is n-j+1.
func unbiasedQuantile(q float64, n int64) float64 {
	m := float64(n) * (100 - q) / 100
	j := 1.0
	switch {
	case m > 50:
		j = math.Floor(m + 1.0/3) // the Poisson median, within one of the exact j
	case m > 0:
		term := math.Exp(-m)
		tail := 1 - term // P(X >= 1)
		for k := 1.0; ; k++ {
			term *= m / k // P(X = k)
			if tail-term < 0.5 {
				break
			}
			tail -= term
			j = k + 1
		}
	}
	rank := max(1, float64(n)-j+1)
	return 100 * (rank - 0.25) / float64(n)
}

// RecentRate is the foreground's statements per second over the last RecentMax.
func (r *Recorder) RecentRate() float64 {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recent == nil {
		return 0
	}
	r.recent.advance(now)
	return float64(r.recent.total()) / RecentMax.Seconds()
}

// total is the statements of every slot of the ring: those of the last RecentMax.
func (r *ring) total() int64 {
	var n int64
	for _, h := range r.slots {
		n += h.TotalCount()
	}
	return n
}

// Observe records one statement of kind (one of Kinds; anything else counts as "other").
func (r *Recorder) Observe(kind string, d time.Duration) {
	if !known(kind) {
		kind = "other"
	}
	r.prom.WithLabelValues(kind).Observe(d.Seconds())
	us := min(max(int64(d/time.Microsecond), lowestMicros), highestMicros)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range []string{kind, All} {
		w := r.kinds[k]
		if w == nil {
			w = newWindow(now)
			r.kinds[k] = w
		}
		w.advance(now)
		_ = w.current().RecordValue(us) // in range by construction
	}
	if r.recent == nil {
		r.recent = newRing(now)
	}
	r.recent.advance(now)
	_ = r.recent.slots[r.recent.newest].RecordValue(us)
}

func known(kind string) bool {
	for _, k := range Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// Stats are one kind's figures over the window.
type Stats struct {
	Kind                     string
	Count                    int64
	P50, P90, P99, P999, Max time.Duration
	Mean                     time.Duration
}

// Snapshot returns the figures of every kind seen in the last Window (kinds in Kinds order,
// then All; a kind with no statement in the window is left out).
//
// It holds the lock every Observe takes only to copy each kind's current second and take
// its older seconds, which never change again; the merging and the percentiles, milliseconds
// of work on a busy window, happen after the lock is released. Merging under the lock (as it
// once did) stopped every foreground statement for that long at each read of the view, which
// an online run makes every second while it vacuums (docs/benchmarks/online-cost.md).
func (r *Recorder) Snapshot() []Stats {
	type taken struct {
		kind  string
		h     *hdrhistogram.Histogram   // a copy of the current second
		older []*hdrhistogram.Histogram // the seconds before it
	}
	now := r.now()
	r.mu.Lock()
	all := make([]taken, 0, len(r.kinds))
	for kind, w := range r.kinds {
		w.advance(now)
		t := taken{kind: kind, h: w.current().Clone(), older: make([]*hdrhistogram.Histogram, 0, len(w.secs)-1)}
		for i, h := range w.secs {
			if i != w.cur {
				t.older = append(t.older, h)
			}
		}
		all = append(all, t)
	}
	r.mu.Unlock()
	var out []Stats
	for _, t := range all {
		kind, h := t.kind, t.h
		for _, o := range t.older {
			h.Merge(o)
		}
		if h.TotalCount() == 0 {
			continue
		}
		us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
		out = append(out, Stats{Kind: kind, Count: h.TotalCount(),
			P50: us(h.ValueAtQuantile(50)), P90: us(h.ValueAtQuantile(90)), P99: us(h.ValueAtQuantile(99)),
			P999: us(h.ValueAtQuantile(99.9)), Max: us(h.Max()), Mean: time.Duration(h.Mean() * float64(time.Microsecond))})
	}
	order := map[string]int{All: len(Kinds)}
	for i, k := range Kinds {
		order[k] = i
	}
	sort.Slice(out, func(i, j int) bool { return order[out[i].Kind] < order[out[j].Kind] })
	return out
}

// AboveMax is the most Judgement.Above counts: a caller testing a quantile against a
// limit needs only whether a few statements were slower, and each count is a search.
const AboveMax = 64

// countAbove is how many of h's n values are above limit (in h's unit), at h's precision,
// counted up to AboveMax: a binary search over the slowest values' ranks, each read as
// unbiasedQuantile reads one (no allocation, unlike a walk of h's buckets).
func countAbove(h *hdrhistogram.Histogram, limit int64) int64 {
	n := h.TotalCount()
	slowest := func(j int64) int64 { // the j-th slowest value, 1 <= j <= n
		return h.ValueAtQuantile(100 * (float64(n-j+1) - 0.25) / float64(n))
	}
	lo, hi := int64(0), min(n, AboveMax) // slowest(lo) > limit holds (lo = 0: vacuously)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if slowest(mid) > limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
