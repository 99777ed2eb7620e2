package online_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// The foreground in a run's progress: the engine server's own figures, read from its latency
// view, checked here against the server's other histogram of the same statements (/metrics).

// freeAddr is a free loopback address (a test-only race with other listeners).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// bucket is one cumulative bucket of a Prometheus histogram.
type bucket struct {
	le    float64 // seconds
	count uint64
}

// foregroundBuckets scrapes /metrics and sums vacuumops_statement_latency_seconds' cumulative
// buckets over every kind (the series are per kind; the foreground is all of them).
func foregroundBuckets(t *testing.T, metricsAddr string) []bucket {
	t.Helper()
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	sum := map[float64]uint64{}
	if f := fams["vacuumops_statement_latency_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				if !math.IsInf(b.GetUpperBound(), 1) { // +Inf is the sample count, added next
					sum[b.GetUpperBound()] += b.GetCumulativeCount()
				}
			}
			sum[math.Inf(1)] += m.GetHistogram().GetSampleCount()
		}
	}
	var out []bucket
	for le, n := range sum {
		out = append(out, bucket{le, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

// bucketOf returns the bounds (seconds) of the bucket holding the statement of the given
// rank (1-based) in the histogram after minus before.
func bucketOf(t *testing.T, before, after []bucket, rank uint64) (lo, hi float64) {
	t.Helper()
	prev := map[float64]uint64{}
	for _, b := range before {
		prev[b.le] = b.count
	}
	lo = 0
	for _, b := range after {
		if b.count-prev[b.le] >= rank {
			return lo, b.le
		}
		lo = b.le
	}
	t.Fatalf("no bucket holds rank %d: before %v, after %v", rank, before, after)
	return 0, 0
}

// countOf is a histogram's count (its +Inf bucket; 0 before any statement).
func countOf(h []bucket) uint64 {
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1].count
}

// rankOf is the rank HdrHistogram's ValueAtQuantile(q) reads among n values.
func rankOf(q float64, n int64) uint64 { return uint64(max(1, int64(q/100*float64(n)+0.5))) }

func TestForegroundInProgressIsTheServersHistogramOverTheSameWindow(t *testing.T) {
	metrics := freeAddr(t)
	addr := startEngineServer(t, "--metrics-listen", metrics)
	// The setup's statements are not foreground (a vacuum-runner application name).
	setup, err := pgx.Connect(context.Background(),
		fmt.Sprintf("postgres://app:%s@%s/postgres?sslmode=disable&application_name=vacuum-runner-setup", enginePassword, addr))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = setup.Close(context.Background()) }()
	createUpdatedOrders(t, setup)
	before := foregroundBuckets(t, metrics)

	// The application: point lookups and updates for 2.5 s, counted as they succeed.
	app := engineConn(t, addr)
	var (
		lmu        sync.Mutex
		statements int64
		loadEnd    time.Time
	)
	loadDone := make(chan error, 1)
	go func() {
		ctx := context.Background()
		end := time.Now().Add(2500 * time.Millisecond)
		for i := int64(1); time.Now().Before(end); i++ {
			var n int64
			if err := app.QueryRow(ctx, "SELECT n FROM orders WHERE id = $1", i%20000+1).Scan(&n); err != nil {
				loadDone <- fmt.Errorf("lookup: %w", err)
				return
			}
			if _, err := app.Exec(ctx, "UPDATE orders SET n = n + 1 WHERE id = $1", (i*7)%20000+1); err != nil {
				loadDone <- fmt.Errorf("update: %w", err)
				return
			}
			lmu.Lock()
			statements += 2
			lmu.Unlock()
		}
		lmu.Lock()
		loadEnd = time.Now()
		lmu.Unlock()
		loadDone <- nil
	}()
	time.Sleep(time.Second) // the baseline covers the load's first second

	type seen struct {
		at time.Time
		p  runnerwire.Progress
	}
	var (
		pmu   sync.Mutex
		polls []seen
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run, err := online.New(ctx, engineTarget(t, addr), online.Options{Parallelism: 1, Tables: []string{"orders"},
		Throttle: limits(100*time.Millisecond, 1), PollInterval: 200 * time.Millisecond, // minutes of VACUUM
		OnProgress: func(p runnerwire.Progress) { pmu.Lock(); polls = append(polls, seen{time.Now(), p}); pmu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	vacuumed := make(chan error, 1)
	go func() { _, err := run.Vacuum(ctx); vacuumed <- err }()

	if err := <-loadDone; err != nil {
		t.Fatal(err)
	}
	lmu.Lock()
	total, ended := statements, loadEnd
	lmu.Unlock()
	// A poll that started after the load's last statement was recorded: its window holds
	// the whole load (2.5 s of a 10 s window) and nothing else.
	var last runnerwire.Progress
	waitUntil(t, 10*time.Second, "a progress poll after the load ended", func() bool {
		pmu.Lock()
		defer pmu.Unlock()
		for _, s := range polls {
			if s.at.After(ended.Add(500 * time.Millisecond)) {
				last = s.p
				return true
			}
		}
		return false
	})
	after := foregroundBuckets(t, metrics)
	var view runnerwire.Foreground
	var window int32
	if err := setup.QueryRow(context.Background(), `SELECT window_seconds, count, p50_us, p99_us
		FROM vacuumops_statement_latency WHERE kind = 'all'`).Scan(&window, &view.Statements, &view.P50Microseconds, &view.P99Microseconds); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-vacuumed; err == nil {
		t.Error("the cancelled run returned no error")
	}

	fg, base := last.Foreground, last.ForegroundBaseline
	if fg == nil || base == nil {
		t.Fatalf("progress %+v has no foreground or no baseline on the engine server", last)
	}
	// The server times each statement and each autocommit UPDATE's implicit commit (half
	// the statements are UPDATEs).
	recorded := total + total/2
	t.Logf("load: %d statements; foreground %+v; baseline %+v", total, *fg, *base)
	if fg.Statements != recorded || view.Statements != recorded {
		t.Errorf("foreground counts %d statements, the view %d, the application ran %d and committed %d autocommit updates",
			fg.Statements, view.Statements, total, total/2)
	}
	if fg.WindowSeconds != 10 || window != 10 || fg.StatementsPerSecond != float64(recorded)/10 {
		t.Errorf("foreground window %d s at %.1f/s, want the view's 10 s and %d/10", fg.WindowSeconds, fg.StatementsPerSecond, recorded)
	}
	if fg.P50Microseconds != view.P50Microseconds || fg.P99Microseconds != view.P99Microseconds {
		t.Errorf("foreground p50/p99 %d/%d us, the view's all row %d/%d us", fg.P50Microseconds, fg.P99Microseconds,
			view.P50Microseconds, view.P99Microseconds)
	}
	// /metrics, the server's cumulative histogram of the same statements: the interval's
	// count is the load's, and each percentile lies in the bucket that holds its rank
	// (HdrHistogram keeps 3 significant digits and whole microseconds).
	if n := countOf(after) - countOf(before); int64(n) != recorded {
		t.Errorf("/metrics counted %d foreground statements and commits over the load, want %d", n, recorded)
	}
	for _, q := range []struct {
		name string
		pct  float64
		us   int64
	}{{"p50", 50, fg.P50Microseconds}, {"p99", 99, fg.P99Microseconds}} {
		lo, hi := bucketOf(t, before, after, rankOf(q.pct, recorded))
		got := float64(q.us) / 1e6
		if got < lo*0.999-1e-6 || got > hi*1.001 {
			t.Errorf("foreground %s %d us is outside /metrics' bucket (%g s, %g s] that holds its rank", q.name, q.us, lo, hi)
		}
	}
	if base.Statements <= 0 || base.Statements >= recorded || base.P99Microseconds <= 0 {
		t.Errorf("baseline %+v: want some of the load's first second (under %d statements) with a p99", *base, recorded)
	}
	if last.ThrottleApplies != runnerwire.ThrottleAppliesImmediately {
		t.Errorf("progress says a throttle change applies %q on the engine server, want Immediately", last.ThrottleApplies)
	}
}
