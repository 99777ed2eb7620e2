package bench

import (
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// Foreground is the application the vacuum competes with: Workers
// goroutines, each doing random point lookups through one index (a
// transaction per lookup), pausing Think between lookups. Latencies are
// recorded from the last Reset on.
type Foreground struct {
	db      *engine.DB
	index   string
	keys    int64 // keys are drawn from [0, keys)
	think   time.Duration
	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	lat     []time.Duration
	errs    atomic.Int64
	lastErr atomic.Value
	since   time.Time
}

// StartForeground starts workers goroutines looking up keys uniformly
// drawn from [0, keys) through index.
func StartForeground(db *engine.DB, index string, keys int64, workers int, think time.Duration, seed int64) *Foreground {
	f := &Foreground{db: db, index: index, keys: max(keys, 1), think: think, stop: make(chan struct{}), since: time.Now()}
	for w := range workers {
		f.wg.Add(1)
		go f.work(rand.New(rand.NewSource(seed + int64(w))))
	}
	return f
}

func (f *Foreground) work(rng *rand.Rand) {
	defer f.wg.Done()
	for {
		select {
		case <-f.stop:
			return
		default:
		}
		key := rng.Int63n(f.keys)
		t0 := time.Now()
		if err := f.lookup(key); err != nil {
			f.errs.Add(1)
			f.lastErr.Store(err)
		} else {
			f.record(t0, time.Since(t0))
		}
		if f.think > 0 {
			time.Sleep(f.think)
		}
	}
}

// record adds the latency of a lookup that started at t0, unless it started
// before the last Reset: such a lookup belongs to the warm-up. Samples go
// straight to the shared slice (a few thousand a second, so the lock is
// cheap), which keeps Reset and Snapshot exact: a per-worker buffer
// flushed later once let warm-up samples into the measured window.
func (f *Foreground) record(t0 time.Time, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t0.Before(f.since) {
		return
	}
	f.lat = append(f.lat, d)
}

func (f *Foreground) lookup(key int64) error {
	tx, err := f.db.Begin()
	if err != nil {
		return err
	}
	_, err = tx.IndexLookup(f.index, key)
	if rerr := tx.Rollback(); err == nil {
		err = rerr
	}
	return err
}

// Reset discards the latencies recorded so far (the warm-up); a lookup
// under way at the Reset is not counted either.
func (f *Foreground) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lat = f.lat[:0]
	f.since = time.Now()
}

// Snapshot returns the latency statistics of the lookups finished since the
// last Reset, without stopping.
func (f *Foreground) Snapshot() Latency {
	f.mu.Lock()
	defer f.mu.Unlock()
	return latencyOf(slices.Clone(f.lat), time.Since(f.since))
}

// Stop stops the workers and returns the statistics since the last Reset
// and the first lookup error, if any lookup failed.
func (f *Foreground) Stop() (Latency, error) {
	close(f.stop)
	f.wg.Wait()
	var err error
	if n := f.errs.Load(); n > 0 {
		err = fmt.Errorf("%d foreground lookups failed, last: %v", n, f.lastErr.Load())
	}
	return f.Snapshot(), err
}

// Latency summarises lookup latencies.
type Latency struct {
	Count    int
	Duration time.Duration
	P50, P99 time.Duration
	Max      time.Duration
}

// PerSecond is lookups per second over the measured window.
func (l Latency) PerSecond() float64 {
	if l.Duration <= 0 {
		return 0
	}
	return float64(l.Count) / l.Duration.Seconds()
}

// latencyOf computes the statistics of lat (which it sorts).
func latencyOf(lat []time.Duration, window time.Duration) Latency {
	l := Latency{Count: len(lat), Duration: window}
	if len(lat) == 0 {
		return l
	}
	slices.Sort(lat)
	l.P50 = percentile(lat, 0.50)
	l.P99 = percentile(lat, 0.99)
	l.Max = lat[len(lat)-1]
	return l
}

// percentile returns the nearest-rank q-quantile of sorted s (non-empty).
func percentile(s []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
