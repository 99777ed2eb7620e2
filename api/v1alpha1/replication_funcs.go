package v1alpha1

import (
	"strings"
	"time"
)

// FormatBytes writes a byte count for people, as FormatBytesPerSecond does a rate:
// 512 -> "512B", 2821778 -> "2.6MiB".
func FormatBytes(v int64) string { return strings.TrimSuffix(FormatBytesPerSecond(v), "/s") }

// formatLag writes a replay lag in seconds as a duration string rounded to the
// millisecond ("503ms", "1.5s").
func formatLag(seconds float64) string {
	if seconds <= 0 || seconds != seconds { // NaN too
		return "0s"
	}
	return time.Duration(seconds * float64(time.Second)).Round(time.Millisecond).String()
}

// SetReplication writes the standbys' largest lag, now and over the run, from the runner's
// figures (bytes and seconds).
func (s *VacuumRunStatus) SetReplication(standbys int32, lagBytes int64, lagSeconds float64, maxLagBytes int64, maxLagSeconds float64) {
	lagBytes, maxLagBytes = max(lagBytes, 0), max(maxLagBytes, lagBytes, 0)
	r := &ReplicationStatus{Standbys: standbys, LagBytes: lagBytes, MaxLagBytes: maxLagBytes,
		ReplayLag: formatLag(lagSeconds), MaxReplayLag: formatLag(max(maxLagSeconds, lagSeconds))}
	r.Lag = FormatBytes(lagBytes) + "/" + r.ReplayLag
	r.MaxLag = FormatBytes(maxLagBytes) + "/" + r.MaxReplayLag
	s.Replication = r
}
