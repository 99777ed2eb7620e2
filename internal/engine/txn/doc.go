// Package txn assigns transaction ids, keeps the commit log (clog), takes
// snapshots and answers "did this transaction commit, and does this
// snapshot see it?" for MVCC. Its ideas follow PostgreSQL's xact.c,
// clog.c, procarray.c and heapam_visibility.c, without wraparound: ids are
// 64 bits and never reused, so nothing is ever frozen.
//
// # Exported API (summary for the engine and heap)
//
//	type XID uint64                    // InvalidXID 0, BootstrapXID 1, FrozenXID 2, FirstNormalXID 3
//	type Status uint8                  // InProgress, Committed, Aborted
//	NewManager(fs, dir, log *wal.Log, nextXID XID) (*Manager, error)
//	                                   // loads <dir>/clog; missing is fine only while nextXID <= FirstNormalXID
//	(*Manager).SetLog(*wal.Log)        // attach the log after recovery (NewManager may get nil)
//	(*Manager).Begin() *Txn            // new xid + snapshot (repeatable read)
//	(*Manager).Commit(t, u) error      // commit record, Flush, clog committed; returns once durable
//	(*Manager).Abort(t, u) error       // abort record (not flushed), clog aborted
//	(*Manager).Status(xid) Status      // clog, else InProgress if active, else Aborted
//	(*Manager).OldestXmin() XID        // horizon: min xmin of active snapshots, or NextXID
//	(*Manager).CheckpointBarrier() func() // no commit between record insert and clog update while held
//	(*Manager).WriteClog() error       // atomic rewrite of <dir>/clog (checkpoint)
//	(*Manager).Redo(rec *wal.Record) error // RmgrXact commit/abort during recovery
//	(*Manager).NextXID() XID / AdvanceNextXID(xid XID) // recovery: call AdvanceNextXID(XID(rec.XID)+1) for every record
//	(*Txn).XID, (*Txn).Snapshot(), (*Txn).MarkWritten() // heap calls MarkWritten before its first WAL record
//	(*Snapshot).IsCurrent(xid), (*Snapshot).InProgress(xid), (*Snapshot).XidVisible(m, xid)
//
// # Transactions and durability
//
// Begin assigns the next xid and takes one snapshot for the whole
// transaction (repeatable read). A transaction that wrote nothing (never
// called MarkWritten) commits without a WAL record or fsync; its commit is
// only recorded in memory, which is harmless because no tuple carries its
// id. A writing transaction's Commit inserts an RmgrXact commit record,
// flushes the log up to it and only then marks the clog, so nothing is
// acknowledged, and no other snapshot can see its changes, before the
// commit is durable. After a crash a transaction with no commit record in
// the replayed WAL is aborted: Status answers Aborted for any xid whose clog
// entry is "in progress" but which is not active in this process.
//
// If the commit record's Flush fails, Commit returns the error and the
// transaction counts as aborted in this process (the WAL's failure is
// sticky, so the engine must stop); after a restart, replay decides.
//
// The commit barrier (an RWMutex: commits hold it shared from record
// insert to clog update, the checkpoint takes it exclusively while it sets
// the redo pointer) guarantees that every commit record before a
// checkpoint's redo pointer is reflected in the clog the checkpoint writes
// afterwards; commits after the redo pointer are replayed.
//
// # Snapshots
//
// A snapshot holds Xmin (every xid below it had finished when the snapshot
// was taken), Xmax (every xid at or above it had not started) and XIP, the
// xids in between that were active. A committed xid is visible to the
// snapshot unless InProgress(xid) says the snapshot still sees it running.
// The snapshot's own xid (Current) is handled by IsCurrent: a transaction
// sees its own inserts and not its own deletes. There are no command ids:
// a scan that updates rows sees the new versions it created.
//
// OldestXmin is the vacuum horizon: the minimum Xmin over all active
// snapshots (NextXID when none is active). A tuple deleted by a committed
// xid below it is dead to every present and future snapshot.
//
// # Waits
//
// Wait(ctx, self, x) blocks transaction self until x ends (or ctx is
// done). The manager keeps the wait-for graph (self -> x); a Wait whose
// x already waits, directly or through others, for self would close a
// cycle and returns ErrDeadlock at once, so in every cycle exactly the
// transaction that closed it is told. Waits and Deadlocks count them.
// Nothing of this is on disk.
//
// # Clog file layout (<dir>/clog, little-endian)
//
//	offset size field
//	     0    4 magic    "VCLG"
//	     4    2 version  1
//	     6    2 reserved zero
//	     8    8 nextXID  first xid not covered (entries cover xids 0..nextXID-1)
//	    16    4 length   bytes of status data that follow (= ceil(nextXID/4))
//	    20    4 crc      CRC32C of bytes 0..19 and the data
//	    24      data     2 bits per xid: xid x is bits 2*(x%4)..+1 of byte x/4;
//	                     0 in progress, 1 committed, 2 aborted (3 is invalid)
//
// The file is written by WriteClog to <dir>/clog.tmp, fsynced, renamed over
// <dir>/clog, and the directory is fsynced, so a crash leaves the old or the
// new file complete. A file that fails its CRC, magic, version or length
// checks is reported as *CorruptClogError; it is never silently ignored.
//
// # WAL records (RmgrXact)
//
// InfoCommit and InfoAbort carry the transaction id in Record.XID and no
// blocks or data. Redo sets the clog entry and advances NextXID.
package txn
