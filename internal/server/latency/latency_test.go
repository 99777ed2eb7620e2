package latency

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestPercentilesCoverTheLastTenSecondsOnly(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	r := newAt(c.now)
	// 990 fast selects of 1 ms and 10 slow ones of 100 ms: p50 1 ms, p99 1 ms, p99.9 100 ms.
	for i := range 1000 {
		d := time.Millisecond
		if i%100 == 0 {
			d = 100 * time.Millisecond
		}
		r.Observe("select", d)
	}
	r.Observe("vacuum", time.Second) // an unknown kind counts as other
	got := r.Snapshot()
	if len(got) != 2 || got[0].Kind != "select" || got[1].Kind != "other" {
		t.Fatalf("kinds %+v", got)
	}
	s := got[0]
	within := func(d, want time.Duration) bool { return d >= want*999/1000 && d <= want*1001/1000 }
	if s.Count != 1000 || !within(s.P50, time.Millisecond) || !within(s.P99, time.Millisecond) ||
		!within(s.P999, 100*time.Millisecond) || !within(s.Max, 100*time.Millisecond) {
		t.Fatalf("select figures %+v", s)
	}
	// Nine seconds on, the slow ones are still in the window; after eleven they are gone.
	c.add(9 * time.Second)
	r.Observe("select", 2*time.Millisecond)
	if s := r.Snapshot()[0]; s.Count != 1001 {
		t.Fatalf("after 9 s: count %d, want 1001", s.Count)
	}
	c.add(2 * time.Second)
	got = r.Snapshot()
	if len(got) != 1 || got[0].Count != 1 || !within(got[0].Max, 2*time.Millisecond) {
		t.Fatalf("after 11 s: %+v, want only the one 2 ms select", got)
	}
	c.add(time.Hour)
	if got := r.Snapshot(); len(got) != 0 {
		t.Fatalf("an hour later: %+v, want nothing", got)
	}
	// /metrics keeps everything (cumulative).
	if n := testutil.CollectAndCount(r.Collector(), "vacuumops_statement_latency_seconds"); n != 2 {
		t.Fatalf("metric series %d, want 2 (select, other)", n)
	}
	var m dto.Metric
	obs, err := r.prom.GetMetricWithLabelValues("select")
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetHistogram().GetSampleCount(); n != 1001 {
		t.Fatalf("/metrics select count %d, want 1001 (cumulative)", n)
	}
}
