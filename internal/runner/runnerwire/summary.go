package runnerwire

import (
	"encoding/json"
	"fmt"
)

// Exit codes of vacuum-runner. The operator decides a run's outcome from them.
const (
	ExitOK         = 0 // success
	ExitInternal   = 1 // internal error (retryable)
	ExitBadInput   = 2 // bad flags or spec, unknown table, not a data directory, unsupported format
	ExitBusy       = 3 // data directory still locked after --lock-timeout (retryable)
	ExitCorruption = 4 // corruption found; file and block named on stderr
	ExitCancelled  = 5 // SIGTERM or SIGINT; the summary is still written
	ExitNoSpace    = 6 // not enough free space for VACUUM FULL; nothing changed
	// ExitNeedsRecovery: the data directory needs crash recovery and its last opener was not
	// an earlier attempt of this run (and allowCrashRecovery is not set); nothing changed.
	// Not corruption and not retried: reason NeedsRecovery.
	ExitNeedsRecovery = 7
)

// Summary phases: the outcome the runner reports in its termination log.
const (
	SummarySucceeded = "Succeeded"
	SummaryFailed    = "Failed"
	SummaryCancelled = "Cancelled"
)

// Stop reasons (Summary.StopReason): why a run ended before every table was complete, while
// exiting 0.
const (
	// StopReasonWindowClosed: the run was stopped at RunSpec.StopAt (or --stop-after).
	StopReasonWindowClosed = "WindowClosed"
	// StopReasonWindowTooShort: a VACUUM FULL was not started because its estimate (table
	// pages divided by the pages per second its throttle allows) exceeded the time left
	// before StopAt.
	StopReasonWindowTooShort = "WindowTooShort"
)

// MaxSummaryBytes is the most a Summary may take in the termination log (Kubernetes keeps at
// most 4096 bytes of a termination message).
const MaxSummaryBytes = 4096

// Summary is what the runner writes to --termination-log on exit.
type Summary struct {
	// Phase is Succeeded, Failed or Cancelled.
	Phase string `json:"phase"`
	// ExitCode is the runner's exit code (see Exit*).
	ExitCode int `json:"exitCode"`
	// Message says what happened in one line; on failure, why.
	Message string `json:"message"`
	// Totals sum every table processed.
	Totals Totals `json:"totals"`
	// Tables holds per-table results, as many as fit under MaxSummaryBytes.
	Tables []TableResult `json:"tables"`
	// TablesOmitted counts the tables left out of Tables for space.
	TablesOmitted int `json:"tablesOmitted"`
	// Server is the server an online run reached (absent for a data directory).
	Server *ServerIdentity `json:"server"`
	// StopReason is "" (every table complete, or a failure), WindowClosed or WindowTooShort.
	StopReason string `json:"stopReason"`
	// ResumeNote says why a run asked to resume started its tables at block 0 (a PostgreSQL
	// server cannot resume); "" otherwise.
	ResumeNote string `json:"resumeNote"`
	// Replication is the standbys' lag as the run last read it, with the largest it saw (as
	// Progress.Replication): a run shorter than the operator's progress interval has it here
	// only. Absent for a volume and while no standby was seen.
	Replication *Replication `json:"replication"`
	// Foreground is the engine server's foreground as the run last read it (its latency
	// view after the last VACUUM ended) and ForegroundBaseline the read just before the
	// first VACUUM, as in Progress: a run shorter than the operator's progress interval has
	// them here only. Null for a volume and for PostgreSQL, which has no latency histogram.
	Foreground         *Foreground `json:"foreground"`
	ForegroundBaseline *Foreground `json:"foregroundBaseline"`
}

// ServerIdentity is a server as an online run found it.
type ServerIdentity struct {
	// Kind is "PostgreSQL" or "engine server".
	Kind string `json:"kind"`
	// Version is the server's version().
	Version string `json:"version"`
	// SystemIdentifier is pg_control_system()'s system_identifier, in decimal.
	SystemIdentifier string `json:"systemIdentifier"`
}

// Report is the output of `vacuum --json` and `full --json`.
type Report struct {
	Tables []TableResult `json:"tables"`
	Totals Totals        `json:"totals"`
	// Server is the server an online run reached (absent for a data directory).
	Server *ServerIdentity `json:"server"`
	// StopReason, ResumeNote, Replication, Foreground and ForegroundBaseline are as in
	// Summary.
	StopReason         string       `json:"stopReason"`
	ResumeNote         string       `json:"resumeNote"`
	Replication        *Replication `json:"replication"`
	Foreground         *Foreground  `json:"foreground"`
	ForegroundBaseline *Foreground  `json:"foregroundBaseline"`
}

// Rate compares a throttle's limit with what the vacuum achieved, in cost units or bytes per
// second. Configured 0 means no limit.
type Rate struct {
	Configured float64 `json:"configured"`
	Achieved   float64 `json:"achieved"`
}

// IndexResult is one index of a vacuumed table.
type IndexResult struct {
	Name           string `json:"name"`
	Pages          int64  `json:"pages"`
	EntriesRemoved int64  `json:"entriesRemoved"`
}

// TableResult is what vacuuming one table did, the facts VACUUM VERBOSE prints.
type TableResult struct {
	Table              string  `json:"table"`
	Mode               Mode    `json:"mode"`
	Skipped            bool    `json:"skipped"`
	PagesTotal         int64   `json:"pagesTotal"`
	PagesScanned       int64   `json:"pagesScanned"`
	PagesRemoved       int64   `json:"pagesRemoved"`
	PagesRemaining     int64   `json:"pagesRemaining"`
	TuplesRemoved      int64   `json:"tuplesRemoved"`
	TuplesRemaining    int64   `json:"tuplesRemaining"`
	IndexPasses        int64   `json:"indexPasses"`
	ElapsedSeconds     float64 `json:"elapsedSeconds"`
	PagesPerSecond     float64 `json:"pagesPerSecond"`
	BytesRead          int64   `json:"bytesRead"`
	BytesWritten       int64   `json:"bytesWritten"`
	WALBytes           int64   `json:"walBytes"`
	WALFlushes         int64   `json:"walFlushes"`
	WALRecords         int64   `json:"walRecords"`
	WALFullPageImages  int64   `json:"walFullPageImages"`
	RingDirtyEvictions int64   `json:"ringDirtyEvictions"`
	BufferHits         int64   `json:"bufferHits"`
	BufferMisses       int64   `json:"bufferMisses"`
	BuffersDirtied     int64   `json:"buffersDirtied"`
	// SleptSeconds is the time the throttle slept; null when the server does not report it
	// (PostgreSQL counts no time its VACUUM sleeps for vacuum_cost_delay).
	SleptSeconds *float64      `json:"sleptSeconds"`
	Indexes      []IndexResult `json:"indexes"`
	CostRate     Rate          `json:"costRate"`
	ReadRate     Rate          `json:"readRate"`
	WriteRate    Rate          `json:"writeRate"`
	WALRate      Rate          `json:"walRate"`
	// Complete: the table's vacuum ran to its end in this run (or had nothing to do). A
	// table stopped by StopAt, or not reached before it, is not complete.
	Complete bool `json:"complete"`
	// BlockReached is the heap block below which the table is done: where a resume
	// continues (PagesTotal when complete).
	BlockReached int64 `json:"blockReached"`
	// ResumedFromBlock is the block this run's vacuum of the table started at (0 unless
	// resumed).
	ResumedFromBlock int64 `json:"resumedFromBlock"`
	// PagesLeftBehind counts the pages below ResumedFromBlock that are not all-visible: rows
	// changed there since the stop, or tuples an earlier window's vacuum could not yet remove
	// (recently dead at its horizon). A resume leaves them for the next vacuum without it.
	PagesLeftBehind int64 `json:"pagesLeftBehind"`
	// Notices are the server's VACUUM VERBOSE messages for the table (online runs; empty
	// for the engine's own vacuum, whose figures are the fields above).
	Notices []string `json:"notices"`
}

// Totals are the sums over every table of a run, with run-wide rates.
type Totals struct {
	TablesVacuumed     int64   `json:"tablesVacuumed"`
	TablesSkipped      int64   `json:"tablesSkipped"`
	PagesTotal         int64   `json:"pagesTotal"`
	PagesScanned       int64   `json:"pagesScanned"`
	PagesRemoved       int64   `json:"pagesRemoved"`
	PagesRemaining     int64   `json:"pagesRemaining"`
	TuplesRemoved      int64   `json:"tuplesRemoved"`
	TuplesRemaining    int64   `json:"tuplesRemaining"`
	IndexPasses        int64   `json:"indexPasses"`
	ElapsedSeconds     float64 `json:"elapsedSeconds"`
	PagesPerSecond     float64 `json:"pagesPerSecond"`
	BytesRead          int64   `json:"bytesRead"`
	BytesWritten       int64   `json:"bytesWritten"`
	WALBytes           int64   `json:"walBytes"`
	WALFlushes         int64   `json:"walFlushes"`
	WALRecords         int64   `json:"walRecords"`
	WALFullPageImages  int64   `json:"walFullPageImages"`
	RingDirtyEvictions int64   `json:"ringDirtyEvictions"`
	BufferHits         int64   `json:"bufferHits"`
	BufferMisses       int64   `json:"bufferMisses"`
	BuffersDirtied     int64   `json:"buffersDirtied"`
	// SleptSeconds is the time the throttle slept, summed over the tables; null when the
	// server does not report it (PostgreSQL).
	SleptSeconds *float64 `json:"sleptSeconds"`
	CostRate     Rate     `json:"costRate"`
	ReadRate     Rate     `json:"readRate"`
	WriteRate    Rate     `json:"writeRate"`
	WALRate      Rate     `json:"walRate"`
}

// TruncateSummary encodes s in at most limit bytes (MaxSummaryBytes when limit <= 0): it keeps
// the totals and the longest prefix of s.Tables that fits, adding the tables it leaves out to
// TablesOmitted, and shortens the message only if even no tables do not fit. It returns the
// summary it encoded and its JSON.
func TruncateSummary(s Summary, limit int) (Summary, []byte, error) {
	if limit <= 0 {
		limit = MaxSummaryBytes
	}
	if s.Tables == nil {
		s.Tables = []TableResult{}
	}
	all := s.Tables
	encode := func(n int) (Summary, []byte, error) {
		t := s
		t.Tables = all[:n]
		t.TablesOmitted = s.TablesOmitted + len(all) - n
		b, err := json.Marshal(t)
		return t, b, err
	}
	if t, b, err := encode(len(all)); err != nil || len(b) <= limit {
		return t, b, err
	}
	// Find the largest n whose encoding fits; sizes grow with n.
	lo, hi := 0, len(all) // encode(lo) may not fit; encode(hi) does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		_, b, err := encode(mid)
		if err != nil {
			return Summary{}, nil, err
		}
		if len(b) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	t, b, err := encode(lo)
	if err != nil || len(b) <= limit {
		return t, b, err
	}
	return shortenMessage(t, limit)
}

// shortenMessage cuts t.Message to the longest prefix (marked with "...") that lets t fit in
// limit bytes.
func shortenMessage(t Summary, limit int) (Summary, []byte, error) {
	msg := []rune(t.Message)
	withPrefix := func(k int) (Summary, []byte, error) {
		u := t
		u.Message = ""
		if k > 0 {
			u.Message = string(msg[:k]) + "..."
		}
		b, err := json.Marshal(u)
		return u, b, err
	}
	u, b, err := withPrefix(0)
	if err != nil {
		return Summary{}, nil, err
	}
	if len(b) > limit {
		return Summary{}, nil, fmt.Errorf("summary without tables or message takes %d bytes, over the limit of %d", len(b), limit)
	}
	lo, hi := 0, len(msg)-1 // withPrefix(lo) fits; the whole message does not
	for lo < hi {
		mid := (lo + hi + 1) / 2
		_, mb, err := withPrefix(mid)
		if err != nil {
			return Summary{}, nil, err
		}
		if len(mb) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == 0 {
		return u, b, nil
	}
	return withPrefix(lo)
}
