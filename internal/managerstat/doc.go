// Package managerstat measures a running manager process from outside, as a platform team's
// monitoring would: its Prometheus exposition (controller-runtime's reconcile-time
// histograms, client-go's request counters, the Go runtime's memory statistics), read by
// Scrape, and its kernel accounting (CPU time and resident set size from /proc), read by
// ReadProc. Figures over an interval are the difference of two samples (Sample.Sub,
// Proc.Sub); quantiles are estimated from histogram buckets as Prometheus's
// histogram_quantile estimates them (linear within a bucket), so they are only as fine as
// the buckets.
package managerstat
