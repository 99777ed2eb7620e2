package runnerwire

// Phase is where one table's vacuum is, as GET /progress names it. These strings are declared
// here and nowhere else: the engine has its own enum (vacuum.Phase), which the runner maps to
// these in one function (convert.go), and the operator copies them into a run's status
// unchanged.
type Phase string

// Progress phases of one table, in the order a table may pass through them.
const (
	PhaseInitializing      Phase = "initializing"
	PhaseScanningHeap      Phase = "scanning heap"
	PhaseVacuumingIndexes  Phase = "vacuuming indexes"
	PhaseVacuumingHeap     Phase = "vacuuming heap"
	PhaseCleaningUpIndexes Phase = "cleaning up indexes"
	PhaseTruncatingHeap    Phase = "truncating heap"
	PhaseRewritingHeap     Phase = "rewriting heap"
	PhaseRebuildingIndexes Phase = "rebuilding indexes"
	PhaseDone              Phase = "done"
)

// Phases returns every progress phase in the order a table may pass through them.
func Phases() []Phase {
	return []Phase{
		PhaseInitializing, PhaseScanningHeap, PhaseVacuumingIndexes, PhaseVacuumingHeap,
		PhaseCleaningUpIndexes, PhaseTruncatingHeap, PhaseRewritingHeap, PhaseRebuildingIndexes,
		PhaseDone,
	}
}

// When a throttle change (PUT /throttle) takes effect, as Progress.ThrottleApplies says.
const (
	// ThrottleAppliesImmediately: at the vacuum's next delay point (the engine).
	ThrottleAppliesImmediately = "Immediately"
	// ThrottleAppliesNextTable: from the next table started (PostgreSQL, which cannot
	// re-throttle a running manual VACUUM).
	ThrottleAppliesNextTable = "NextTable"
)

// Progress is the body of GET /progress: a snapshot of the whole run. Phase and Table are
// those of the table started last; counters are sums over the run so far; per-second rates
// cover the last 5 seconds. A figure has one Go name wherever it goes (PagesScanned here, in
// TableResult and Totals, and in the VacuumRun's status); the JSON keys are the wire's and
// stay as they were (heapBlocksScanned is PagesScanned).
type Progress struct {
	Phase          Phase  `json:"phase"`
	Table          string `json:"table"`
	TablesDone     int64  `json:"tablesDone"`
	TablesTotal    int64  `json:"tablesTotal"`
	PagesTotal     int64  `json:"heapBlocksTotal"`
	PagesScanned   int64  `json:"heapBlocksScanned"`
	PagesVacuumed  int64  `json:"heapBlocksVacuumed"`
	IndexPasses    int64  `json:"indexPasses"`
	DeadTuples     int64  `json:"deadTuples"`
	DeadTupleBytes int64  `json:"deadTupleBytes"`
	TuplesRemoved  int64  `json:"tuplesRemoved"`
	BytesRead      int64  `json:"bytesRead"`
	BytesWritten   int64  `json:"bytesWritten"`
	WALBytes       int64  `json:"walBytes"`
	WALFlushes     int64  `json:"walFlushes"`
	BufferHits     int64  `json:"bufferHits"`
	BufferMisses   int64  `json:"bufferMisses"`
	BuffersDirtied int64  `json:"buffersDirtied"`
	// SleptSeconds is the time the throttle slept so far; null when the server does not
	// report it (PostgreSQL).
	SleptSeconds        *float64        `json:"sleptSeconds"`
	ElapsedSeconds      float64         `json:"elapsedSeconds"`
	PagesPerSecond      float64         `json:"pagesPerSecond"`
	ReadBytesPerSecond  float64         `json:"readBytesPerSecond"`
	WriteBytesPerSecond float64         `json:"writeBytesPerSecond"`
	WALBytesPerSecond   float64         `json:"walBytesPerSecond"`
	Percent             float64         `json:"percent"`
	Tables              []TableProgress `json:"tables"`
	// ThrottleApplies says when a PUT /throttle takes effect: Immediately or NextTable.
	ThrottleApplies string `json:"throttleApplies"`
	// Foreground is the server's own traffic as its latency view read at this poll;
	// ForegroundBaseline is the same read just before the vacuum started. Both are null
	// for a volume and for PostgreSQL, which has no latency histogram.
	Foreground         *Foreground `json:"foreground"`
	ForegroundBaseline *Foreground `json:"foregroundBaseline"`
	// Paused: a PUT /pause holds the run at its next delay point. PausedSeconds is the time
	// it has spent paused in all (not counted in SleptSeconds).
	Paused        bool    `json:"paused"`
	PausedSeconds float64 `json:"pausedSeconds"`
	// Adaptive is the adaptive throttle's binding, budget and time bound by each (the
	// engine server, once a target was set; null before).
	Adaptive *AdaptiveProgress `json:"adaptive"`
	// Replication is the standbys' largest lag, now and during the run (replication.go).
	Replication *Replication `json:"replication"`
}

// Foreground is the engine server's foreground over the window of its
// vacuumops_statement_latency view (the row of all statements): how many statements ended
// in the last WindowSeconds, per second, and their latency percentiles. A window with no
// statement has Statements 0 and no percentiles.
type Foreground struct {
	WindowSeconds       int64   `json:"windowSeconds"`
	Statements          int64   `json:"statements"`
	StatementsPerSecond float64 `json:"statementsPerSecond"`
	P50Microseconds     int64   `json:"p50Microseconds"`
	P99Microseconds     int64   `json:"p99Microseconds"`
}

// Pause is the body of PUT /pause (and its answer).
type Pause struct {
	Paused bool `json:"paused"`
}

// TableProgress is one table done or in flight.
type TableProgress struct {
	Name          string  `json:"name"`
	Phase         Phase   `json:"phase"`
	Percent       float64 `json:"percent"`
	TuplesRemoved int64   `json:"tuplesRemoved"`
}
