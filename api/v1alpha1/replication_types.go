package v1alpha1

// ReplicationStatus is the largest replication lag among the server's standbys, as its
// pg_stat_replication shows them, for an online run (the engine server and PostgreSQL
// alike): bytes of WAL the primary has and the standby has not replayed, and the standby's
// replay lag. The figures "now" are those of the runner's last poll; the "max" ones the
// largest at any poll of the run.
type ReplicationStatus struct {
	// standbys is how many standbys pg_stat_replication listed at the last poll.
	// +optional
	Standbys int32 `json:"standbys,omitempty"`
	// lagBytes is the largest standby's lag in bytes at the last poll.
	// +optional
	LagBytes int64 `json:"lagBytes,omitempty"`
	// replayLag is the largest standby's replay lag at the last poll, as a duration string
	// ("503ms").
	// +optional
	ReplayLag string `json:"replayLag,omitempty"`
	// maxLagBytes is the largest lag in bytes at any poll of the run.
	// +optional
	MaxLagBytes int64 `json:"maxLagBytes,omitempty"`
	// maxReplayLag is the largest replay lag at any poll of the run.
	// +optional
	MaxReplayLag string `json:"maxReplayLag,omitempty"`
	// lag is lagBytes and replayLag for printing ("2.6MiB/503ms").
	// +optional
	Lag string `json:"lag,omitempty"`
	// maxLag is maxLagBytes and maxReplayLag for printing.
	// +optional
	MaxLag string `json:"maxLag,omitempty"`
}
