package engine

import (
	"errors"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
)

// Errors callers branch on with errors.Is. Several are the lower packages'
// sentinels re-exported, so a check against either name works.
var (
	// ErrNoSuchTable: the named table does not exist.
	ErrNoSuchTable = catalog.ErrNoSuchTable
	// ErrNoSuchIndex: the named index does not exist.
	ErrNoSuchIndex = catalog.ErrNoSuchIndex
	// ErrExists: CreateTable or CreateIndex with a name already in use.
	ErrExists = catalog.ErrExists
	// ErrBadDefinition: a table or index definition is invalid (no columns,
	// duplicate column, index on a bytes column...).
	ErrBadDefinition = catalog.ErrBadDef
	// ErrWrongType: a row value does not match its column type (the error
	// is a *row.TypeError naming the column and the expected type).
	ErrWrongType = row.ErrWrongType
	// ErrNotNull: NULL in a NOT NULL column (a *row.ValueError naming it).
	ErrNotNull = row.ErrNotNull
	// ErrTooLong: text longer than its varchar(n) or char(n) column.
	ErrTooLong = row.ErrTooLong
	// ErrOutOfRange: an integer outside its int2 or int4 column's range.
	ErrOutOfRange = row.ErrOutOfRange
	// ErrInvalidText: text that is not UTF-8 or holds a NUL byte.
	ErrInvalidText = row.ErrInvalidText
	// ErrWrongColumnCount: a row has more or fewer values than columns.
	ErrWrongColumnCount = row.ErrWrongColumnCount
	// ErrTupleTooLarge: an encoded row does not fit in a page.
	ErrTupleTooLarge = heap.ErrTupleTooLarge
	// ErrKeyTooLong: a row's index key is longer than the B-tree takes
	// (btree.MaxKeySize bytes encoded; PostgreSQL 54000).
	ErrKeyTooLong = btree.ErrKeyTooLong
	// ErrNotFound: Update or Delete of a TID that holds no row visible to
	// the transaction.
	ErrNotFound = heap.ErrNotFound
	// ErrConflict: Update or Delete of a row another transaction changed
	// concurrently (first updater wins; retry in a new transaction).
	// UpdateRow and DeleteRow wait and re-check instead (READ COMMITTED).
	ErrConflict = heap.ErrConcurrentUpdate
	// ErrTableRewritten: a Scan or IndexRange whose table VACUUM FULL
	// rewrote while the callback ran (every TID changed); start again.
	ErrTableRewritten = errors.New("table rewritten during the scan")
	// ErrClosed: the DB (or the transaction's DB) is closed.
	ErrClosed = errors.New("database is closed")
	// ErrTxDone: the transaction has already committed or rolled back.
	ErrTxDone = errors.New("transaction already finished")
	// ErrInUse: another process (or another DB in this process) holds the
	// data directory's lock.
	ErrInUse = errors.New("data directory in use")
	// ErrNotDataDir: Open of a directory that Init did not create.
	ErrNotDataDir = errors.New("not an initialized data directory")
	// ErrAlreadyInitialised: Init of a directory that already holds one.
	ErrAlreadyInitialised = errors.New("data directory already initialized")
	// ErrCorrupt: a file every data directory needs (control file, catalog,
	// commit log, the WAL up to the last checkpoint) is missing or damaged;
	// Open refuses rather than start with a part of the committed data.
	ErrCorrupt = errors.New("data directory is damaged")
	// ErrNeedsRecovery: an fsync of relation files or of a directory
	// failed, or a catalog switch may or may not have reached the disk, so
	// what was written before it may be lost or the directory may name
	// either state; every later write, commit and checkpoint is refused
	// until the data directory is reopened (recovery replays the WAL,
	// which still covers them, and reads the catalog that survived).
	// Reads keep working.
	ErrNeedsRecovery = errors.New("writes refused after a failed fsync: reopen the data directory to recover")
	// ErrReadOnly: a write, DDL, vacuum or checkpoint on a hot standby
	// (OpenStandby), as PostgreSQL's 25006 in recovery.
	ErrReadOnly = errors.New("cannot execute a write on a hot standby (read-only: the directory is in recovery)")
	// ErrStandbyConflict: a hot standby's replay cancelled the transaction
	// because the record it had to apply removes rows the transaction's
	// snapshot may still see (after waiting MaxStandbyStreamingDelay), as
	// PostgreSQL's 40001 "conflict with recovery".
	ErrStandbyConflict = errors.New("canceling statement due to conflict with recovery: replay would remove rows the snapshot may still see")
	// ErrRecoveryRefused: Open of a directory that needs crash recovery,
	// which Options.AllowRecovery refused for the opener the control file
	// names (the error says which). Nothing was changed.
	ErrRecoveryRefused = errors.New("data directory needs crash recovery, not allowed for this opener")
	// ErrUnsupportedVersion: the directory was written by an unknown
	// format version.
	ErrUnsupportedVersion = errors.New("unsupported data directory version")
)
