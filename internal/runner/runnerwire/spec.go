package runnerwire

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mode says which kind of vacuum a run performs.
type Mode string

const (
	// ModeLazy is a plain VACUUM: dead tuples are removed in place.
	ModeLazy Mode = "Lazy"
	// ModeFull is VACUUM FULL: each table is rewritten and its indexes rebuilt.
	ModeFull Mode = "Full"
)

// RunSpec is everything `vacuum-runner run` needs for one execution. Absent fields take the
// defaults listed in Resolve.
type RunSpec struct {
	// DataDir is the engine data directory to vacuum. The operator mounts the volume (with
	// its sub-path) at DefaultDataDir and sets this to it. Exactly one of DataDir and Server
	// is set.
	DataDir string `json:"dataDir,omitempty"`
	// Server is a running database server to vacuum through SQL (an online run).
	Server *ServerTarget `json:"server,omitempty"`
	// Mode is Lazy or Full (case-insensitive on input; Lazy when absent).
	Mode Mode `json:"mode,omitempty"`
	// Tables to vacuum; empty means every table.
	Tables []string `json:"tables,omitempty"`
	// Throttle limits the whole run; one budget is shared by all its workers.
	Throttle *Throttle `json:"throttle,omitempty"`
	// RingSize is the vacuum ring in bytes: 0 = no ring, else 128Ki to 16Gi.
	RingSize *resource.Quantity `json:"ringSize,omitempty"`
	// BufferPoolSize is the runner's buffer pool in bytes.
	BufferPoolSize *resource.Quantity `json:"bufferPoolSize,omitempty"`
	// Parallelism is the number of tables vacuumed at once, 1 to 64.
	Parallelism *int32 `json:"parallelism,omitempty"`
	// IndexWorkers is the number of indexes of one table vacuumed at once, 0 to 64
	// (0 = the table's worker does them one by one).
	IndexWorkers *int32 `json:"indexWorkers,omitempty"`
	// MaintenanceWorkMem bounds each worker's dead-tuple store (Lazy) or each index build's
	// sort memory (Full), 1Mi to 1Ti.
	MaintenanceWorkMem *resource.Quantity `json:"maintenanceWorkMem,omitempty"`
	// Truncate lets a lazy vacuum give empty pages at the end of a table back to the
	// filesystem.
	Truncate *bool `json:"truncate,omitempty"`
	// MinDeadTuplePercent skips tables whose dead share is below it, 0 to 100.
	MinDeadTuplePercent *int32 `json:"minDeadTuplePercent,omitempty"`
	// TableOverrides give single tables their own throttle; unset fields inherit Throttle.
	TableOverrides []TableOverride `json:"tableOverrides,omitempty"`
	// RunID identifies the run across its attempts (the operator sets the VacuumRun's UID).
	// The runner records it as the data directory's opener, so a later attempt of the same
	// run may finish the crash recovery an earlier one needed.
	RunID string `json:"runID,omitempty"`
	// Identify, with a server target, only identifies the server: the runner connects,
	// reads its version and system identifier, writes them to the summary's Server and
	// exits 0 without vacuuming. The operator does this before it takes the server's lock.
	Identify bool `json:"identify,omitempty"`
	// AllowCrashRecovery lets the runner replay the WAL of a data directory that was not
	// shut down cleanly even when its last opener was not an earlier attempt of this run
	// (else exit 7, NeedsRecovery: the app's own engine should recover it).
	AllowCrashRecovery bool `json:"allowCrashRecovery,omitempty"`
	// StopAt, when set, is when the run stops (a maintenance window's end): every table's
	// vacuum stops at its next delay point and the runner ends as `--stop-after` makes it
	// end: exit 0, StopReason WindowClosed, each unfinished table complete false with the
	// block it reached (its position is saved in the data directory or the server). A VACUUM
	// FULL whose estimate exceeds the time left is not started (StopReason WindowTooShort).
	StopAt *metav1.Time `json:"stopAt,omitempty"`
	// Resume continues each table's lazy vacuum from its saved position, or from block 0
	// where there is none. PostgreSQL servers cannot resume: their tables start at block 0.
	Resume bool `json:"resume,omitempty"`
	// FullPagesPerSecond is the rate (heap pages per second) the last complete VACUUM FULL
	// of the policy achieved, 0 when there was none: with StopAt, a FULL's estimate is its
	// table's pages divided by it instead of by the pages per second the throttle allows.
	FullPagesPerSecond int64 `json:"fullPagesPerSecond,omitempty"`
}

// Throttle is a set of vacuum limits. In a RunSpec or a PUT /throttle body an absent field
// takes its default; in a TableOverride it takes the run's value.
type Throttle struct {
	// CostDelay is how long the vacuum sleeps each time it has spent CostLimit, 0 to 100ms;
	// 0 disables cost throttling.
	CostDelay *metav1.Duration `json:"costDelay,omitempty"`
	// CostLimit is the cost budget between sleeps, 1 to 10000.
	CostLimit *int32 `json:"costLimit,omitempty"`
	// PageHitCost is charged for a page found in the buffer pool, 0 to 10000.
	PageHitCost *int32 `json:"pageHitCost,omitempty"`
	// PageMissCost is charged for a page read from storage, 0 to 10000.
	PageMissCost *int32 `json:"pageMissCost,omitempty"`
	// PageDirtyCost is charged for a page the vacuum dirties, 0 to 10000.
	PageDirtyCost *int32 `json:"pageDirtyCost,omitempty"`
	// MaxReadBytesPerSecond caps relation bytes read per second; 0 = no limit.
	MaxReadBytesPerSecond *resource.Quantity `json:"maxReadBytesPerSecond,omitempty"`
	// MaxWriteBytesPerSecond caps relation bytes written per second; 0 = no limit.
	MaxWriteBytesPerSecond *resource.Quantity `json:"maxWriteBytesPerSecond,omitempty"`
	// MaxWALBytesPerSecond caps WAL bytes inserted per second; 0 = no limit.
	MaxWALBytesPerSecond *resource.Quantity `json:"maxWALBytesPerSecond,omitempty"`
	// Adaptive makes the rate follow the foreground's latency and the standbys' lag, the
	// limits above being its ceiling (a server target only; see Adaptive).
	Adaptive *Adaptive `json:"adaptive,omitempty"`
}

// ServerTarget is a database server reached over the network, with libpq's connection
// conventions. In a pod everything comes from here: no PG* environment variable and no
// ~/.pgpass is read.
type ServerTarget struct {
	// Address is HOST:PORT of one ready endpoint ("10.0.0.7:5432", "[fd00::7]:5432"); the
	// operator resolves the Service through its EndpointSlices.
	Address string `json:"address,omitempty"`
	// Database is the database whose tables are vacuumed.
	Database string `json:"database,omitempty"`
	// User is the role the runner connects as.
	User string `json:"user,omitempty"`
	// UserFile is the path of a file holding the role's name (a mounted Secret key), read
	// when User is empty.
	UserFile string `json:"userFile,omitempty"`
	// PasswordFile is the path of a file holding the password (a mounted Secret key).
	PasswordFile string `json:"passwordFile,omitempty"`
	// SSLMode is disable, require, verify-ca or verify-full (require when absent).
	SSLMode string `json:"sslMode,omitempty"`
	// SSLRootCertFile is the path of the CA bundle verify-ca and verify-full check the
	// server's certificate against.
	SSLRootCertFile string `json:"sslRootCertFile,omitempty"`
	// SystemIdentifier, when set, is the server the run was identified as and locked for
	// (pg_control_system()); a server answering with another one is refused (exit 3)
	// before any table is touched.
	SystemIdentifier string `json:"systemIdentifier,omitempty"`
}

// TableOverride gives one table its own throttle.
type TableOverride struct {
	// Table is the table's name.
	Table string `json:"table"`
	// Throttle fields that are set replace the run's; the others inherit them.
	Throttle Throttle `json:"throttle"`
}
