package controllers

import (
	"github.com/prometheus/client_golang/prometheus"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Metrics are the manager's Prometheus metrics about runs. A nil *Metrics records nothing.
type Metrics struct {
	runsTotal      *prometheus.CounterVec
	runDuration    *prometheus.HistogramVec
	pagesProcessed *prometheus.CounterVec
	bytesProcessed *prometheus.CounterVec
	lastSuccess    *prometheus.GaugeVec
	corruption     *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg (controller-runtime's
// metrics.Registry in the manager).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		runsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vacuum_runs_total", Help: "Runs ended, by policy and result (Succeeded, Failed, Cancelled).",
		}, []string{"policy", "result"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vacuum_run_duration_seconds", Help: "Time from a run's first pod start to its end.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16),
		}, []string{"policy", "result"}),
		pagesProcessed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vacuum_pages_processed_total", Help: "Heap pages scanned by ended runs.",
		}, []string{"policy"}),
		bytesProcessed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vacuum_bytes_processed_total", Help: "Bytes read, written and WAL-logged by ended runs.",
		}, []string{"policy", "kind"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vacuum_last_success_timestamp_seconds", Help: "When the policy's last successful run ended (Unix time).",
		}, []string{"policy"}),
		corruption: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vacuum_corruption_found_total", Help: "Runs that found corruption, by policy.",
		}, []string{"policy"}),
	}
	reg.MustRegister(m.runsTotal, m.runDuration, m.pagesProcessed, m.bytesProcessed, m.lastSuccess, m.corruption)
	return m
}

// runEnded records a run that reached its final phase.
func (m *Metrics) runEnded(run *vacuumv1alpha1.VacuumRun) {
	if m == nil {
		return
	}
	policy, result := run.Spec.PolicyName, string(run.Status.Phase)
	m.runsTotal.WithLabelValues(policy, result).Inc()
	if st, end := run.Status.StartTime, run.Status.CompletionTime; st != nil && end != nil {
		m.runDuration.WithLabelValues(policy, result).Observe(end.Sub(st.Time).Seconds())
	}
	if t := run.Status.Totals; t != nil {
		m.pagesProcessed.WithLabelValues(policy).Add(float64(t.PagesScanned))
		m.bytesProcessed.WithLabelValues(policy, "read").Add(float64(t.BytesRead))
		m.bytesProcessed.WithLabelValues(policy, "written").Add(float64(t.BytesWritten))
		m.bytesProcessed.WithLabelValues(policy, "wal").Add(float64(t.WALBytes))
	}
	if run.Status.Phase == vacuumv1alpha1.RunSucceeded && run.Status.CompletionTime != nil {
		m.lastSuccess.WithLabelValues(policy).Set(float64(run.Status.CompletionTime.Unix()))
	}
	if cond := failedReason(run); cond == vacuumv1alpha1.ReasonCorruptionFound {
		m.corruption.WithLabelValues(policy).Inc()
	}
}
