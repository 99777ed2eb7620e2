package bench

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vacuumops/vacuum-operator/internal/server/latency"
)

// TestTheServersViewIsTheP99OfTheStatementsBetweenTwoScrapes: the engine server's own
// latency histogram, scraped from /metrics before and after a span, gives the p99 of the
// statements that ended in it alone, within the native histogram's resolution, whatever
// came before the first scrape.
func TestTheServersViewIsTheP99OfTheStatementsBetweenTwoScrapes(t *testing.T) {
	rec := latency.New()
	reg := prometheus.NewRegistry()
	reg.MustRegister(rec.Collector())
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	ctx := context.Background()

	// Before the span: slow statements that must not count.
	for range 500 {
		rec.Observe("select", 20*time.Millisecond)
	}
	before, err := scrapeServerLatency(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The span: 980 fast statements of two kinds and 20 at 3 ms, so that its p99 (rank 990)
	// falls among the slow ones.
	for i := range 980 {
		kind := "select"
		if i%2 == 0 {
			kind = "other"
		}
		rec.Observe(kind, 200*time.Microsecond)
	}
	for range 20 {
		rec.Observe("select", 3*time.Millisecond)
	}
	after, err := scrapeServerLatency(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	span, err := after.since(before)
	if err != nil {
		t.Fatal(err)
	}
	if n := span.total(); n != 1000 {
		t.Fatalf("%d statements in the span, want 1000", n)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 200 * time.Microsecond}, {0.99, 3 * time.Millisecond}} {
		got := span.quantile(c.q)
		if r := float64(got) / float64(c.want); r < 0.9 || r > 1.1 {
			t.Errorf("quantile %.2f = %v, want %v within 10 %%", c.q, got, c.want)
		}
	}
	if _, err := before.since(after); err == nil {
		t.Error("a histogram that shrank (a restarted server) gave a span")
	}
}

// TestTheLawsTargetSitsAtTheJudgedTargetsPlaceInTheServersBracket: the target moves
// linearly from pgbench's bracket to the server's; without a rising bracket it stays.
func TestTheLawsTargetSitsAtTheJudgedTargetsPlaceInTheServersBracket(t *testing.T) {
	for _, c := range []struct {
		name                                   string
		alone, un, goal, serverAlone, serverUn float64
		want                                   float64
	}{
		{"a quarter of the way", 0.5, 2.5, 1.0, 0.1, 1.7, 0.5},
		{"at the bottom", 0.5, 2.5, 0.5, 0.1, 1.7, 0.1},
		{"no server view", 0.5, 2.5, 1.0, -1, -1, 1.0},
		{"a server bracket that does not rise", 0.5, 2.5, 1.0, 0.3, 0.3, 1.0},
		{"a judged bracket that does not rise", 0.5, 0.5, 0.5, 0.1, 1.7, 0.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := lawTarget(c.alone, c.un, c.goal, c.serverAlone, c.serverUn); got < c.want-1e-9 || got > c.want+1e-9 {
				t.Fatalf("lawTarget = %g, want %g", got, c.want)
			}
		})
	}
}
