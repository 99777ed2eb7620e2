package managerstat

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one scrape of a /metrics endpoint: its metric families by name.
type Sample map[string]*dto.MetricFamily

// Scrape reads the text exposition at url (plain HTTP).
func Scrape(ctx context.Context, url string) (Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scrape %s: %s: %s", url, resp.Status, b)
	}
	return Parse(resp.Body)
}

// Parse reads a text exposition.
func Parse(r io.Reader) (Sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse exposition: %w", err)
	}
	return Sample(fams), nil
}

// Labels selects series: every listed label must have the given value.
type Labels map[string]string

func (l Labels) match(m *dto.Metric) bool {
	for k, v := range l {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k {
				found = lp.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Sum is the sum of the values of the counter or gauge series of name that match sel (0 when
// there is none).
func (s Sample) Sum(name string, sel Labels) float64 {
	var sum float64
	f, ok := s[name]
	if !ok {
		return 0
	}
	for _, m := range f.GetMetric() {
		if !sel.match(m) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

// Histogram is a cumulative histogram: Counts[i] observations at most Bounds[i] (the last
// bound is +Inf).
type Histogram struct {
	Bounds []float64
	Counts []float64
	Count  float64
	Sum    float64
}

// Histogram adds up the histogram series of name that match sel (they must share bounds).
func (s Sample) Histogram(name string, sel Labels) (Histogram, error) {
	var h Histogram
	f, ok := s[name]
	if !ok {
		return h, fmt.Errorf("no metric %s", name)
	}
	for _, m := range f.GetMetric() {
		if !sel.match(m) || m.Histogram == nil {
			continue
		}
		mh := m.GetHistogram()
		bounds := make([]float64, 0, len(mh.GetBucket())+1)
		counts := make([]float64, 0, len(mh.GetBucket())+1)
		for _, b := range mh.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
			counts = append(counts, float64(b.GetCumulativeCount()))
		}
		if len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1) {
			bounds = append(bounds, math.Inf(1))
			counts = append(counts, float64(mh.GetSampleCount()))
		}
		if h.Bounds == nil {
			h.Bounds, h.Counts = bounds, make([]float64, len(bounds))
		} else if !sameBounds(h.Bounds, bounds) {
			return h, fmt.Errorf("%s: series with different buckets", name)
		}
		for i := range counts {
			h.Counts[i] += counts[i]
		}
		h.Count += float64(mh.GetSampleCount())
		h.Sum += mh.GetSampleSum()
	}
	if h.Bounds == nil {
		return h, fmt.Errorf("no series of %s matches %v", name, map[string]string(sel))
	}
	return h, nil
}

func sameBounds(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Sub is h minus an earlier sample of the same histogram: the observations in between. A
// histogram without bounds (not observed before) subtracts as zero.
func (h Histogram) Sub(earlier Histogram) (Histogram, error) {
	if earlier.Bounds == nil {
		return h, nil
	}
	if !sameBounds(h.Bounds, earlier.Bounds) {
		return Histogram{}, fmt.Errorf("histograms with different buckets")
	}
	out := Histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts)), Count: h.Count - earlier.Count, Sum: h.Sum - earlier.Sum}
	for i := range h.Counts {
		out.Counts[i] = h.Counts[i] - earlier.Counts[i]
	}
	return out, nil
}

// Quantile estimates the q-quantile (0 < q < 1) as Prometheus's histogram_quantile does:
// linearly within the bucket that holds it, the first bucket starting at 0; in the +Inf
// bucket, the highest finite bound. NaN when there are no observations.
func (h Histogram) Quantile(q float64) float64 {
	n := len(h.Counts)
	if n == 0 || h.Counts[n-1] == 0 {
		return math.NaN()
	}
	rank := q * h.Counts[n-1]
	i := sort.Search(n, func(i int) bool { return h.Counts[i] >= rank })
	if i == n-1 && math.IsInf(h.Bounds[i], 1) {
		if n < 2 {
			return math.NaN()
		}
		return h.Bounds[n-2]
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = h.Bounds[i-1], h.Counts[i-1]
	}
	in := h.Counts[i] - below
	if in == 0 {
		return h.Bounds[i]
	}
	return lo + (h.Bounds[i]-lo)*(rank-below)/in
}
