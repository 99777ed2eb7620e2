package txn

import "errors"

// XID is a 64-bit transaction id. Ids are assigned in increasing order and
// never reused.
type XID uint64

// Reserved transaction ids.
const (
	// InvalidXID is no transaction (an unset xmax).
	InvalidXID XID = 0
	// BootstrapXID wrote the initial catalog; always committed.
	BootstrapXID XID = 1
	// FrozenXID is always committed and visible to every snapshot.
	FrozenXID XID = 2
	// FirstNormalXID is the first id Begin assigns.
	FirstNormalXID XID = 3
)

// IsNormal reports whether x is an ordinary (assigned) transaction id.
func (x XID) IsNormal() bool { return x >= FirstNormalXID }

// Status is a transaction's state in the commit log.
type Status uint8

// Transaction states. The values are the clog's 2-bit codes.
const (
	InProgress Status = 0
	Committed  Status = 1
	Aborted    Status = 2
)

// String names the status, for messages.
func (s Status) String() string {
	switch s {
	case InProgress:
		return "in progress"
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	}
	return "invalid"
}

// WAL record kinds of wal.RmgrXact (Record.Info).
const (
	InfoCommit uint8 = 1
	InfoAbort  uint8 = 2
)

// ErrTxnFinished is returned when a transaction that already committed or
// aborted is committed or aborted again.
var ErrTxnFinished = errors.New("transaction already finished")

// ErrDeadlock is returned by a Wait that would close a cycle of waiting transactions
// (PostgreSQL 40P01); the caller's transaction should roll back.
var ErrDeadlock = errors.New("deadlock detected")

// ErrNoLog is returned by Commit and Abort of a writing transaction when no
// WAL log is attached (see SetLog).
var ErrNoLog = errors.New("transaction manager has no WAL log")
