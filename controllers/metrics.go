package controllers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// Metrics are the manager's Prometheus metrics. Every per-policy series carries the
// policy's namespace beside its name, so the same name in two namespaces stays apart.
//
// Counters and the duration histogram count run ends this manager saw. The gauges are
// rebuilt from the API objects on every reconcile (a policy's status, a run's status), so
// they are back, with the same values, once a restarted manager has reconciled: alerts on
// them do not go silent or fire falsely across a restart. A nil *Metrics records nothing.
type Metrics struct {
	runsTotal      *prometheus.CounterVec
	runDuration    *prometheus.HistogramVec
	pagesProcessed *prometheus.CounterVec
	bytesProcessed *prometheus.CounterVec
	corruption     *prometheus.CounterVec

	lastSuccess      *prometheus.GaugeVec
	policyCreated    *prometheus.GaugeVec
	scheduleInterval *prometheus.GaugeVec
	activeRuns       *prometheus.GaugeVec
	corruptionHalted *prometheus.GaugeVec

	runPendingSince *prometheus.GaugeVec
	runStart        *prometheus.GaugeVec
	runDeadline     *prometheus.GaugeVec
	runProgress     *prometheus.GaugeVec

	adaptiveBudget       *prometheus.GaugeVec
	adaptiveBoundSeconds *prometheus.CounterVec
}

// Metric names, for the dashboard and alert tests that check what they query exists.
const (
	MetricRunsTotal             = "vacuum_runs_total"
	MetricRunDuration           = "vacuum_run_duration_seconds"
	MetricPagesProcessed        = "vacuum_processed_pages_total"
	MetricBytesProcessed        = "vacuum_processed_bytes_total"
	MetricCorruptionFound       = "vacuum_corruption_found_total"
	MetricLastSuccess           = "vacuum_last_success_timestamp_seconds"
	MetricPolicyCreated         = "vacuum_policy_created_timestamp_seconds"
	MetricScheduleInterval      = "vacuum_policy_schedule_interval_seconds"
	MetricActiveRuns            = "vacuum_policy_active_runs"
	MetricCorruptionHalted      = "vacuum_policy_corruption_halted"
	MetricRunPendingSince       = "vacuum_run_pending_since_timestamp_seconds"
	MetricRunStart              = "vacuum_run_start_timestamp_seconds"
	MetricRunDeadline           = "vacuum_run_deadline_timestamp_seconds"
	MetricRunProgress           = "vacuum_run_progress_ratio"
	MetricAdaptiveBudget        = "vacuum_run_adaptive_budget_ratio"
	MetricAdaptiveBoundSeconds  = "vacuum_adaptive_bound_seconds_total"
	labelNamespace, labelPolicy = "namespace", "policy"
)

// NewMetrics creates the metrics and registers them with reg (controller-runtime's
// metrics.Registry in the manager).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	np := []string{labelNamespace, labelPolicy}
	npr := []string{labelNamespace, labelPolicy, "run"}
	gauge := func(name, help string, labels []string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	m := &Metrics{
		runsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRunsTotal, Help: "Runs ended, by policy and result (Succeeded, Failed, Cancelled, Interrupted).",
		}, append(np, "result")),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricRunDuration, Help: "Time from a run's first pod start to its end.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16),
		}, append(np, "result")),
		pagesProcessed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPagesProcessed, Help: "Heap pages scanned by ended runs.",
		}, np),
		bytesProcessed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricBytesProcessed, Help: "Bytes read, written and WAL-logged by ended runs, by kind (read, written, wal).",
		}, append(np, "kind")),
		corruption: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricCorruptionFound, Help: "Runs that found corruption, by policy.",
		}, np),
		lastSuccess: gauge(MetricLastSuccess,
			"When the policy's last successful run ended (Unix time), from status.lastSuccessfulTime.", np),
		policyCreated: gauge(MetricPolicyCreated, "When the policy was created (Unix time).", np),
		scheduleInterval: gauge(MetricScheduleInterval,
			"Seconds between the policy's last two schedule ticks; absent for a policy without a schedule.", np),
		activeRuns: gauge(MetricActiveRuns, "The policy's runs not finished yet (status.active).", np),
		corruptionHalted: gauge(MetricCorruptionHalted,
			"1 while the policy is halted by a run that found corruption (status.corruptionRun), else 0.", np),
		runPendingSince: gauge(MetricRunPendingSince,
			"When a run still Pending was created (Unix time); absent once it runs or ends.", npr),
		runStart: gauge(MetricRunStart, "When a running run's first pod started (Unix time).", npr),
		runDeadline: gauge(MetricRunDeadline,
			"When a running run's activeDeadlineSeconds ends (Unix time); absent without a deadline.", npr),
		runProgress: gauge(MetricRunProgress, "A running run's progress, 0 to 1.", npr),
		adaptiveBudget: gauge(MetricAdaptiveBudget,
			"A running run's adaptive budget, the effective rate as a share of its static ceiling (0 to 1), by binding; absent without adaptive targets.",
			append(npr, "binding")),
		adaptiveBoundSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricAdaptiveBoundSeconds, Help: "Seconds adaptive runs spent bound by each binding (ForegroundLatency, ReplicationLag, Ceiling, Floor, HardStop).",
		}, append(np, "binding")),
	}
	reg.MustRegister(m.runsTotal, m.runDuration, m.pagesProcessed, m.bytesProcessed, m.corruption,
		m.lastSuccess, m.policyCreated, m.scheduleInterval, m.activeRuns, m.corruptionHalted,
		m.runPendingSince, m.runStart, m.runDeadline, m.runProgress, m.adaptiveBudget, m.adaptiveBoundSeconds)
	return m
}

// runEnded records a run that reached its final phase.
func (m *Metrics) runEnded(run *vacuumv1alpha1.VacuumRun) {
	if m == nil {
		return
	}
	ns, policy, result := run.Namespace, run.Spec.PolicyName, string(run.Status.Phase)
	m.runsTotal.WithLabelValues(ns, policy, result).Inc()
	if st, end := run.Status.StartTime, run.Status.CompletionTime; st != nil && end != nil {
		m.runDuration.WithLabelValues(ns, policy, result).Observe(end.Sub(st.Time).Seconds())
	}
	if t := run.Status.Totals; t != nil {
		m.pagesProcessed.WithLabelValues(ns, policy).Add(float64(t.PagesScanned))
		m.bytesProcessed.WithLabelValues(ns, policy, "read").Add(float64(t.BytesRead))
		m.bytesProcessed.WithLabelValues(ns, policy, "written").Add(float64(t.BytesWritten))
		m.bytesProcessed.WithLabelValues(ns, policy, "wal").Add(float64(t.WALBytes))
	}
	if cond := failedReason(run); cond == vacuumv1alpha1.ReasonCorruptionFound {
		m.corruption.WithLabelValues(ns, policy).Inc()
	}
}

// observePolicy sets the policy's gauges from its status; interval is the time between its
// last two schedule ticks (0: no schedule, or one that does not parse).
func (m *Metrics) observePolicy(p *vacuumv1alpha1.VacuumPolicy, interval time.Duration) {
	if m == nil {
		return
	}
	ns, name := p.Namespace, p.Name
	if t := p.Status.LastSuccessfulTime; t != nil {
		m.lastSuccess.WithLabelValues(ns, name).Set(float64(t.Unix()))
	} else {
		m.lastSuccess.DeleteLabelValues(ns, name)
	}
	m.policyCreated.WithLabelValues(ns, name).Set(float64(p.CreationTimestamp.Unix()))
	if interval > 0 {
		m.scheduleInterval.WithLabelValues(ns, name).Set(interval.Seconds())
	} else {
		m.scheduleInterval.DeleteLabelValues(ns, name)
	}
	m.activeRuns.WithLabelValues(ns, name).Set(float64(len(p.Status.Active)))
	halted := 0.0
	if p.Status.CorruptionRun != "" {
		halted = 1
	}
	m.corruptionHalted.WithLabelValues(ns, name).Set(halted)
}

// forgetPolicy drops the gauges of a policy that is gone.
func (m *Metrics) forgetPolicy(ns, name string) {
	if m == nil {
		return
	}
	match := prometheus.Labels{labelNamespace: ns, labelPolicy: name}
	for _, g := range []*prometheus.GaugeVec{m.lastSuccess, m.policyCreated, m.scheduleInterval, m.activeRuns, m.corruptionHalted} {
		g.DeletePartialMatch(match)
	}
}

// observeRun sets a run's gauges from its status: pending since its creation, or running
// with a start, a deadline and a progress; none once it has ended.
func (m *Metrics) observeRun(run *vacuumv1alpha1.VacuumRun) {
	if m == nil {
		return
	}
	m.forgetRun(run.Namespace, run.Name)
	if run.IsFinished() || !run.DeletionTimestamp.IsZero() {
		return
	}
	l := []string{run.Namespace, run.Spec.PolicyName, run.Name}
	st := run.Status.StartTime
	if st == nil {
		m.runPendingSince.WithLabelValues(l...).Set(float64(run.CreationTimestamp.Unix()))
		return
	}
	m.runStart.WithLabelValues(l...).Set(float64(st.Unix()))
	if d := run.Spec.ActiveDeadlineSeconds; d != nil {
		m.runDeadline.WithLabelValues(l...).Set(float64(st.Unix() + *d))
	}
	m.runProgress.WithLabelValues(l...).Set(float64(run.Status.Percent) / 100)
	if a := run.Status.Adaptive; a != nil && a.Binding != "" {
		m.adaptiveBudget.WithLabelValues(append(l, a.Binding)...).Set(float64(a.BudgetPerMille) / 1000)
	}
}

// adaptiveBound counts the seconds a run's adaptive throttle was newly bound by each
// binding between two folds of its status (a new attempt's runner starts again from 0:
// then all of now is new).
func (m *Metrics) adaptiveBound(run *vacuumv1alpha1.VacuumRun, before, now *vacuumv1alpha1.AdaptiveBoundSeconds) {
	if m == nil || now == nil {
		return
	}
	for _, b := range vacuumv1alpha1.AdaptiveBindings {
		d := now.Of(b) - before.Of(b)
		if d < 0 {
			d = now.Of(b)
		}
		if d > 0 {
			m.adaptiveBoundSeconds.WithLabelValues(run.Namespace, run.Spec.PolicyName, b).Add(float64(d))
		}
	}
}

// forgetRun drops a run's gauges.
func (m *Metrics) forgetRun(ns, name string) {
	if m == nil {
		return
	}
	match := prometheus.Labels{labelNamespace: ns, "run": name}
	for _, g := range []*prometheus.GaugeVec{m.runPendingSince, m.runStart, m.runDeadline, m.runProgress, m.adaptiveBudget} {
		g.DeletePartialMatch(match)
	}
}
