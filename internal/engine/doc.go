// Package engine is the embedded, PostgreSQL-like storage engine's front
// door: it opens a data directory (exclusively), recovers it after a
// crash, and offers tables, B-tree indexes and MVCC transactions on top of
// the lower packages (vfs, page, storage, wal, buffer, txn, heap, btree,
// vm, fsm, catalog, row).
//
// # Data directory
//
//	<dir>/LOCK          flock'ed by the one process that has it open (Open, Init)
//	<dir>/control       control file (package wal): state, last checkpoint, redo LSN, next xid/oid
//	<dir>/catalog       tables, typed columns, indexes, relfilenodes (package catalog)
//	<dir>/clog          commit log, written at each checkpoint (package txn)
//	<dir>/wal/          WAL segments (package wal)
//	<dir>/base/         relation files <relfilenode>[_vm|_fsm][.N] (package storage)
//	<dir>/vacuum_position/<heap relfilenode>  an unfinished lazy vacuum's position (vacuumpos.go)
//
// Init creates the directory; the control file is written last, so its
// presence is what makes a directory a data directory (Open of anything
// else is ErrNotDataDir). This package owns one on-disk layout, the Main of
// the RmgrXLOG checkpoint record (Info 0x01, 21 bytes, little-endian):
//
//	offset size field
//	     0    8 redo LSN (where replay of this checkpoint starts)
//	     8    8 next transaction id
//	    16    4 next OID
//	    20    1 flags: 1 = shutdown checkpoint
//
// and those of the relation file records (relfile.go): RmgrStorage Info
// 0x10 (a fork's creation) and 0x20 (a creation abandoned), Main the
// relfilenode (4 bytes, little-endian) and the fork (1 byte); RmgrXLOG Info
// 0x03 (the end of a primary's recovery), no Main.
//
// # Format version
//
// The control file records the directory's format version (DataVersion,
// 4 in this build: rows with a null bitmap, catalog version 3, and a WAL
// with relation file records, relfile.go). Open refuses any other version
// with ErrUnsupportedVersion; an older one's error names `vacuum-runner
// upgrade --data DIR`, which calls Upgrade: from version 1 or 2 it
// rewrites the catalog, then the control file, each atomically, so a crash
// at any point leaves a directory that Upgrade finishes
// (TestUpgradeIsCrashSafeAtEveryStep); from version 3 it rewrites the
// control file alone.
//
// # Open and recovery
//
// Open takes <dir>/LOCK (ErrInUse after Options.LockTimeout), reads the
// control file and the catalog, and replays the WAL from the control
// file's redo LSN, dispatching each record by resource manager: RmgrXact to
// txn, RmgrHeap to heap, RmgrBtree to btree, RmgrVM to vm, RmgrXLOG
// (full-page images for hint bits, checkpoints, catalog records: Info 0x02,
// Main = the catalog file's bytes, see catalogrec.go; the end of recovery)
// and RmgrStorage (a fork's creation makes its file; an abandoned
// creation's files are removed) here. Records of relations the catalog
// named once and no longer does, or whose creation was abandoned, are
// skipped; a relation whose creation record replay saw is applied. Redo is idempotent by page LSN,
// so replaying after a clean shutdown (only the shutdown checkpoint record
// follows the redo LSN) is a no-op, and the same code path serves both. A
// *wal.CorruptRecordError (torn or damaged record) ends replay: it is
// logged and kept in RecoveryInfo.TornTail, and the log continues at the
// end of the last valid record. Transactions without a commit record are
// aborted. Then the log is reopened at the end, relation files the catalog
// does not reference (an interrupted CREATE or VACUUM FULL) are removed,
// the catalog and the end of recovery are logged (a standby sweeps its
// own orphans there), and a checkpoint is taken; the control file then says "in production"
// until Close writes "shut down" after its final checkpoint.
//
// # Checkpoints
//
// Checkpoint: commit barrier, set the redo pointer, release the barrier;
// flush every dirty buffer; fsync every relation file; write the clog;
// insert and flush the checkpoint record; write the control file; remove
// WAL segments wholly before the redo pointer. Commits hold the barrier
// between their commit record and the clog update, so every commit before
// the redo pointer is in the clog written afterwards, and every one after
// it is replayed. An automatic checkpoint runs on a goroutine owned by the
// DB (stopped by Close) once Options.CheckpointWALBytes of WAL were
// written since the last redo pointer; commits ask for it.
//
// # Concurrency
//
// A DB is safe for concurrent use; a Tx belongs to one goroutine. Locks,
// in acquisition order: a table's vacuum lock (every vacuum, DROP and
// TRUNCATE, for the whole of it; a transaction's TRUNCATE to its end),
// then the wait for the table's users (DROP, TRUNCATE and VACUUM FULL:
// tableUses.exclude), then a table's lock (row operations shared, for one
// call; VACUUM FULL exclusive via lockTable), then DB.mu (row operations
// and Checkpoint shared; DDL, the relfilenode switch and Close exclusive),
// then a unique key's stripe lock (unique.go), then the lower packages'
// locks. tableUses.mu, which guards the table-level locks and the wait-for
// graph, is held only briefly and with none of the others held. Stats and
// Check hold no lock across the whole directory: they walk the tables one
// at a time under the locks a statement takes (eachTable), so a DDL queued
// behind them, and the transactions queued behind it, wait for one table.
//
// Table-level locks (tableuse.go), PostgreSQL's relation locks: each
// transaction that used (read or wrote) a table holds it to its end, and
// DROP, TRUNCATE and VACUUM FULL wait for those transactions; meanwhile a
// transaction's first use of the table waits behind them. A transaction's
// TRUNCATE holds the table, and its vacuum lock, to its end.
//
// Unique indexes: a write checks each key it claims in a unique index
// against the versions already indexed under it (heap.ClaimOf: live,
// gone, or pending on a running transaction) under the key's stripe lock,
// held until its own index entry is in, so two writers of one key never
// both pass. A pending holder is waited for with every lock released
// (txn.Manager.Wait, cancelled by the context of BeginTx), then the check
// runs again: the write fails with ErrUniqueViolation if the holder
// committed, goes ahead if it aborted.
//
// Row changes (READ COMMITTED, Tx.UpdateRow and DeleteRow): a change of a
// row that another open transaction changed waits for it the same way; if
// it rolled back the change is made to the same version, if it committed
// an update the statement follows the update chain (ctid) to the newest
// version and re-runs the caller's Recheck on it (EvalPlanQual), if it
// committed a delete nothing is changed. The heap write comes before the
// unique-key claim, so a concurrent updater of the same row is met as a
// row wait. Update and Delete keep "first updater wins" (ErrConflict).
// DB.LockStats counts waits and deadlocks.
//
// Every wait of one party (a transaction, or a vacuum or DDL run outside
// one) for another is an edge of one wait-for graph (tableUses): a row or
// unique-key wait to the transaction it waits for, a first use of a table
// or a wait for its vacuum lock to the DDL or transaction that holds it, a
// DROP, TRUNCATE or VACUUM FULL to the table's users. The wait that would
// close a cycle fails with ErrDeadlock (40P01 in the server) instead, its
// message naming the table and the cycle, as PostgreSQL's deadlock
// detector does: of the parties of a cycle exactly one fails, and the
// others go on once its transaction ends. The check and the recording of a
// wait happen under one lock, and a table-level waiter checks again at
// each change it wakes for, so no cycle is missed.
//
// The catalog is copy-on-write: DDL changes a clone, saves it atomically,
// then publishes it. Every change that adds or retires relation files
// (CREATE TABLE/INDEX, VACUUM FULL's swap, DROP TABLE, TRUNCATE) goes
// through one primitive, switchCatalog: once the catalog's rename may be
// on disk no error path removes a file. DropTable and TruncateTable take
// the table's vacuum lock, wait for its users, then take its table lock
// exclusively, then DB.mu.
//
// # Invariants
//
//   - Nothing is acknowledged before it is durable: Commit returns after
//     the commit record is fsynced (package txn).
//   - Every index of a table holds an entry (key, TID) for every tuple
//     version that is not dead to everyone and whose key is not NULL;
//     entries of dead versions stay until vacuum removes them. Lookups
//     recheck visibility and the key.
//   - OIDs and relfilenodes are never handed out twice within a run, even
//     by a failed DDL, so WAL of one relation never applies to another.
//   - Check verifies all of the above from the files (see Check).
package engine
