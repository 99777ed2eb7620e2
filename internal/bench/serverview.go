package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// serverLatencyMetric is the engine server's foreground statement latency on /metrics
// (package latency): a histogram per statement kind, with a native histogram beside the
// classic buckets.
const serverLatencyMetric = "vacuumops_statement_latency_seconds"

// nativeHist is a native histogram's counts summed over every series of one metric. Two
// scrapes of a cumulative histogram differ by the histogram of the statements that ended
// between them, at the native histogram's resolution (about 9 % wide buckets for the
// server's factor 1.1, where the classic buckets double).
type nativeHist struct {
	schema int32
	thresh float64        // the zero bucket's upper bound, in seconds
	zero   uint64         // observations in the zero bucket
	counts map[int]uint64 // positive bucket index -> count
}

// scrapeServerLatency reads the engine server's /metrics at url in the protobuf exposition
// (the one that carries native histograms) and sums serverLatencyMetric's series.
func scrapeServerLatency(ctx context.Context, url string) (nativeHist, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nativeHist{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nativeHist{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nativeHist{}, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				return nativeHist{}, fmt.Errorf("scrape %s: no %s", url, serverLatencyMetric)
			}
			return nativeHist{}, fmt.Errorf("scrape %s: %w", url, err)
		}
		if mf.GetName() == serverLatencyMetric {
			h, err := sumNative(&mf)
			if err != nil {
				return nativeHist{}, fmt.Errorf("scrape %s: %w", url, err)
			}
			return h, nil
		}
	}
}

// sumNative adds up the native histograms of mf's series, which must share one schema.
func sumNative(mf *dto.MetricFamily) (nativeHist, error) {
	h := nativeHist{counts: map[int]uint64{}}
	for i, m := range mf.GetMetric() {
		d := m.GetHistogram()
		if d == nil || d.Schema == nil {
			return nativeHist{}, fmt.Errorf("%s: series %d has no native histogram", mf.GetName(), i)
		}
		if i > 0 && d.GetSchema() != h.schema {
			return nativeHist{}, fmt.Errorf("%s: schemas %d and %d in one metric", mf.GetName(), h.schema, d.GetSchema())
		}
		h.schema, h.thresh = d.GetSchema(), max(h.thresh, d.GetZeroThreshold())
		h.zero += d.GetZeroCount()
		// Spans place runs of buckets (the first offset absolute, the next ones gaps after
		// the run before); deltas give each bucket's count as the change from the last one.
		idx, count, deltas := 0, int64(0), d.GetPositiveDelta()
		for j, sp := range d.GetPositiveSpan() {
			if j == 0 {
				idx = int(sp.GetOffset())
			} else {
				idx += int(sp.GetOffset())
			}
			for range sp.GetLength() {
				if len(deltas) == 0 {
					return nativeHist{}, fmt.Errorf("%s: series %d: spans longer than their deltas", mf.GetName(), i)
				}
				count += deltas[0]
				deltas = deltas[1:]
				if count < 0 {
					return nativeHist{}, fmt.Errorf("%s: series %d: a negative bucket count", mf.GetName(), i)
				}
				h.counts[idx] += uint64(count)
				idx++
			}
		}
	}
	return h, nil
}

// since is the histogram of what h holds beyond earlier (a scrape of the same server before
// it): an error when a bucket shrank, as it does when the server restarted between them.
func (h nativeHist) since(earlier nativeHist) (nativeHist, error) {
	if earlier.counts != nil && earlier.schema != h.schema {
		return nativeHist{}, fmt.Errorf("native histogram schema changed from %d to %d", earlier.schema, h.schema)
	}
	d := nativeHist{schema: h.schema, thresh: h.thresh, counts: map[int]uint64{}}
	if h.zero < earlier.zero {
		return nativeHist{}, errors.New("native histogram's zero bucket shrank: the server restarted")
	}
	d.zero = h.zero - earlier.zero
	for k, n := range h.counts {
		if n < earlier.counts[k] {
			return nativeHist{}, fmt.Errorf("native histogram's bucket %d shrank: the server restarted", k)
		}
		if n > earlier.counts[k] {
			d.counts[k] = n - earlier.counts[k]
		}
	}
	for k, n := range earlier.counts {
		if _, ok := h.counts[k]; !ok && n > 0 {
			return nativeHist{}, fmt.Errorf("native histogram's bucket %d vanished: the server restarted", k)
		}
	}
	return d, nil
}

// total is the number of observations in h.
func (h nativeHist) total() uint64 {
	n := h.zero
	for _, c := range h.counts {
		n += c
	}
	return n
}

// quantile is h's q-quantile (0 < q <= 1), interpolated log-linearly inside its bucket
// (bucket i of schema s holds (b^(i-1), b^i] seconds, b = 2^(2^-s)); 0 when h is empty or
// the quantile falls in the zero bucket.
func (h nativeHist) quantile(q float64) time.Duration {
	n := h.total()
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	cum := float64(h.zero)
	if rank <= cum {
		return 0
	}
	keys := make([]int, 0, len(h.counts))
	for k := range h.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	base := math.Exp2(math.Exp2(-float64(h.schema)))
	for _, k := range keys {
		c := float64(h.counts[k])
		if cum+c >= rank {
			lo, hi := math.Pow(base, float64(k-1)), math.Pow(base, float64(k))
			v := lo * math.Pow(hi/lo, (rank-cum)/c)
			return time.Duration(v * float64(time.Second))
		}
		cum += c
	}
	return time.Duration(math.Pow(base, float64(keys[len(keys)-1])) * float64(time.Second))
}

// aloneFigures is the load's p99 alone in ms, as pgbench saw it (client) and as the engine
// server's own histogram did (server; -1: none).
type aloneFigures struct {
	client, server float64
	// spans are the stretches of the load alone and pts the load's transactions that
	// ended in them, for judging its windows once a target is chosen.
	spans [][2]time.Time
	pts   []point
}

// serverMark is a scrape of the engine server's latency histogram at the start of a span
// (serverView); its p99 is then that of the statements that ended in the span.
type serverMark struct {
	r   *runner
	s   *srvSystem
	h   nativeHist
	err error
}

// serverView marks the start of a span on s: a server without metrics (PostgreSQL) gives a
// mark whose p99 is -1.
func (r *runner) serverView(ctx context.Context, s *srvSystem) serverMark {
	m := serverMark{r: r, s: s}
	if s.metrics != "" {
		m.h, m.err = scrapeServerLatency(ctx, s.metrics)
	}
	return m
}

// p99 is the server's own p99, in ms, of the statements that ended since the mark; -1 when
// the server has no metrics, a scrape failed (logged) or no statement ended.
func (m serverMark) p99(ctx context.Context) float64 {
	if m.s.metrics == "" {
		return -1
	}
	err := m.err
	if err == nil {
		var now nativeHist
		if now, err = scrapeServerLatency(ctx, m.s.metrics); err == nil {
			var d nativeHist
			if d, err = now.since(m.h); err == nil && d.total() > 0 {
				return ms(d.quantile(0.99))
			}
		}
	}
	if err != nil {
		m.r.logf("  %s: the server's own latency view: %v", m.s.name, err)
	}
	return -1
}

// serverName prints a figure of the server's own view (-1: none).
func serverName(v float64) string {
	if v < 0 {
		return "none"
	}
	return fmt.Sprintf("%.3f ms", v)
}

// lawTarget is the foreground p99 target the adaptive runs are given, in the engine server's
// own terms: the judged target (goal, between pgbench's p99 alone and beside the unthrottled
// VACUUM) moved to the same place between the server's own p99s of those two stretches. The
// server times a statement from the kernel's receipt of its message to the end of its
// execution; pgbench's latency adds the client's own waits for a CPU (on this 2-core machine
// the VACUUM delays pgbench's threads too) and the reply's way back, which the server cannot
// see: given the judged target as is, the law held its view at it while pgbench's p99 stood
// above it (the make bench of 2026-12-07: 0.3-0.45 ms above). The two are taken to grow
// together in proportion, linearly: pgbench's latency is the server's plus the waits the same
// CPU contention makes. Without the server's figures, or with a bracket that does not rise,
// the judged target itself.
func lawTarget(alone, unthrottled, goal, serverAlone, serverUnthrottled float64) float64 {
	if serverAlone <= 0 || serverUnthrottled <= serverAlone || unthrottled <= alone {
		return goal
	}
	return serverAlone + (goal-alone)*(serverUnthrottled-serverAlone)/(unthrottled-alone)
}
