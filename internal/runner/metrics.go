package runner

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// progressCollector exports the run's progress as Prometheus metrics, read at each scrape.
type progressCollector struct{ s *runState }

type metricDef struct {
	name  string
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(runnerwire.Progress) float64
}

func gauge(name, help string, f func(runnerwire.Progress) float64) metricDef {
	return metricDef{"vacuum_runner_" + name, prometheus.NewDesc("vacuum_runner_"+name, help, nil, nil), prometheus.GaugeValue, f}
}

func counter(name, help string, f func(runnerwire.Progress) float64) metricDef {
	return metricDef{"vacuum_runner_" + name, prometheus.NewDesc("vacuum_runner_"+name, help, nil, nil), prometheus.CounterValue, f}
}

var progressMetrics = []metricDef{
	gauge("tables", "Tables the run will vacuum.", func(p runnerwire.Progress) float64 { return float64(p.TablesTotal) }),
	gauge("tables_done", "Tables finished.", func(p runnerwire.Progress) float64 { return float64(p.TablesDone) }),
	gauge("progress_ratio", "Progress of the whole run, 0 to 1.", func(p runnerwire.Progress) float64 { return p.Percent / 100 }),
	gauge("heap_blocks", "Heap blocks of the tables started.", func(p runnerwire.Progress) float64 { return float64(p.PagesTotal) }),
	counter("heap_blocks_scanned_total", "Heap blocks scanned.", func(p runnerwire.Progress) float64 { return float64(p.PagesScanned) }),
	counter("heap_blocks_vacuumed_total", "Heap blocks vacuumed.", func(p runnerwire.Progress) float64 { return float64(p.PagesVacuumed) }),
	counter("index_passes_total", "Index vacuum passes.", func(p runnerwire.Progress) float64 { return float64(p.IndexPasses) }),
	gauge("dead_tuples", "Dead tuple ids held in memory.", func(p runnerwire.Progress) float64 { return float64(p.DeadTuples) }),
	gauge("dead_tuple_bytes", "Memory of the dead tuple ids held.", func(p runnerwire.Progress) float64 { return float64(p.DeadTupleBytes) }),
	counter("tuples_removed_total", "Dead tuples removed.", func(p runnerwire.Progress) float64 { return float64(p.TuplesRemoved) }),
	counter("read_bytes_total", "Relation bytes read.", func(p runnerwire.Progress) float64 { return float64(p.BytesRead) }),
	counter("written_bytes_total", "Relation bytes written.", func(p runnerwire.Progress) float64 { return float64(p.BytesWritten) }),
	counter("wal_bytes_total", "WAL bytes inserted.", func(p runnerwire.Progress) float64 { return float64(p.WALBytes) }),
	counter("wal_flushes_total", "WAL flushes.", func(p runnerwire.Progress) float64 { return float64(p.WALFlushes) }),
	counter("buffer_hits_total", "Buffer pool hits.", func(p runnerwire.Progress) float64 { return float64(p.BufferHits) }),
	counter("buffer_misses_total", "Buffer pool misses.", func(p runnerwire.Progress) float64 { return float64(p.BufferMisses) }),
	counter("buffers_dirtied_total", "Buffers dirtied.", func(p runnerwire.Progress) float64 { return float64(p.BuffersDirtied) }),
	counter("slept_seconds_total", "Time the throttle made workers sleep.", func(p runnerwire.Progress) float64 { return ptr.Deref(p.SleptSeconds, 0) }),
	gauge("elapsed_seconds", "Time since the run started.", func(p runnerwire.Progress) float64 { return p.ElapsedSeconds }),
	gauge("pages_per_second", "Heap pages scanned per second over the last 5 s.", func(p runnerwire.Progress) float64 { return p.PagesPerSecond }),
	gauge("read_bytes_per_second", "Bytes read per second over the last 5 s.", func(p runnerwire.Progress) float64 { return p.ReadBytesPerSecond }),
	gauge("write_bytes_per_second", "Bytes written per second over the last 5 s.", func(p runnerwire.Progress) float64 { return p.WriteBytesPerSecond }),
	gauge("wal_bytes_per_second", "WAL bytes per second over the last 5 s.", func(p runnerwire.Progress) float64 { return p.WALBytesPerSecond }),
}

// phaseMetric is the one labelled runner metric.
const phaseMetric = "vacuum_runner_phase"

var phaseDesc = prometheus.NewDesc(phaseMetric, "1 for the phase of the table started last.", []string{"phase", "table"}, nil)

// Describe implements prometheus.Collector.
func (c *progressCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range progressMetrics {
		ch <- m.desc
	}
	ch <- phaseDesc
}

// Collect implements prometheus.Collector.
func (c *progressCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.s.progress()
	for _, m := range progressMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(p))
	}
	ch <- prometheus.MustNewConstMetric(phaseDesc, prometheus.GaugeValue, 1, string(p.Phase), p.Table)
}

// MetricNames are the names of the runner's own metrics on its /metrics (which also serves
// the Go runtime's go_* and process_* ones), for dashboards and alerts checked against them.
func MetricNames() []string {
	names := make([]string, 0, len(progressMetrics)+1)
	for _, m := range progressMetrics {
		names = append(names, m.name)
	}
	return append(names, phaseMetric)
}
