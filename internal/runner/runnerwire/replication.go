package runnerwire

// Replication is the largest replication lag among the server's standbys, as its
// pg_stat_replication shows them (the engine server and PostgreSQL alike): per standby, the
// bytes between the primary's current WAL position (pg_current_wal_lsn()) and what the
// standby has replayed, and its replay_lag. LagBytes and LagSeconds are the largest at this
// poll; MaxLagBytes and MaxLagSeconds the largest at any poll of the run. Standbys is how
// many pg_stat_replication listed at this poll. Progress.Replication is null for a volume,
// when the view could not be read, and while no standby has been seen in the run.
type Replication struct {
	Standbys      int64   `json:"standbys"`
	LagBytes      int64   `json:"lagBytes"`
	LagSeconds    float64 `json:"lagSeconds"`
	MaxLagBytes   int64   `json:"maxLagBytes"`
	MaxLagSeconds float64 `json:"maxLagSeconds"`
}
