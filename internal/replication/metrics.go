package replication

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descSlotInvalidations = prometheus.NewDesc("engine_server_replication_slot_invalidations_total",
		"Replication slots invalidated for holding more WAL than --max-slot-wal-keep-size.", nil, nil)
	descSlotRetained = prometheus.NewDesc("engine_server_replication_slot_retained_bytes",
		"WAL a replication slot holds behind the flushed end of WAL (0 once invalidated).", []string{"slot"}, nil)
	descLagBytes = prometheus.NewDesc("engine_server_replication_lag_bytes",
		"Bytes of flushed WAL a standby has not yet sent, written, flushed or replayed.", []string{"application_name", "kind"}, nil)
	descLagSeconds = prometheus.NewDesc("engine_server_replication_lag_seconds",
		"Write, flush and replay lag of a standby, as pg_stat_replication's write_lag, flush_lag, replay_lag.",
		[]string{"application_name", "kind"}, nil)
)

// Collector is the primary's replication metrics for /metrics.
func (p *Primary) Collector() prometheus.Collector { return collector{p} }

type collector struct{ p *Primary }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSlotInvalidations
	ch <- descSlotRetained
	ch <- descLagBytes
	ch <- descLagSeconds
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	p := c.p
	ch <- prometheus.MustNewConstMetric(descSlotInvalidations, prometheus.CounterValue, float64(p.Invalidations()))
	end := p.log.FlushedLSN()
	for _, sl := range p.slots.List() {
		v := 0.0
		if !sl.Invalidated && sl.RestartLSN != 0 {
			v = float64(behind(end, sl.RestartLSN))
		}
		ch <- prometheus.MustNewConstMetric(descSlotRetained, prometheus.GaugeValue, v, sl.Name)
	}
	for _, s := range p.Standbys() {
		name := s.AppName
		for kind, pos := range map[string]int64{"sent": s.SentLagBytes, "write": behind(end, s.Write), "flush": s.FlushLagBytes, "replay": s.ReplayBytes} {
			ch <- prometheus.MustNewConstMetric(descLagBytes, prometheus.GaugeValue, float64(pos), name, kind)
		}
		for kind, d := range map[string]float64{"write": s.WriteLag.Seconds(), "flush": s.FlushLag.Seconds(), "replay": s.ReplayLag.Seconds()} {
			if d >= 0 {
				ch <- prometheus.MustNewConstMetric(descLagSeconds, prometheus.GaugeValue, d, name, kind)
			}
		}
	}
}
