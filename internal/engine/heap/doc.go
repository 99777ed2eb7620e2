// Package heap stores a table's rows as MVCC tuple versions in slotted
// pages (PostgreSQL's heapam.c, heapam_visibility.c, pruneheap.c and
// vacuumlazy.c's heap half). Row bytes are opaque here (package row encodes
// them).
//
// # Exported API (summary for the engine and vacuum)
//
//	Open(d Deps, rel storage.RelFileNode) *Rel   // Deps{Pool, Storage, Log, Txns}; owns the rel's VM and FSM
//	Create(d Deps, rel) (*Rel, error)            // creates the main fork file (VM/FSM forks appear on first use), then Open
//	(*Rel).Insert(t *txn.Txn, data, s) (page.TID, error)      // ErrTupleTooLarge
//	(*Rel).Delete(t, tid, s) error                            // ErrNotFound, ErrConcurrentUpdate
//	(*Rel).Update(t, tid, data, s) (page.TID, error)          // new version; same errors
//	(*Rel).DeleteNewest, UpdateNewest                         // same, on a version newer than t's snapshot
//	(*Rel).Examine(tid, s) (TupleHeader, data, ok, error)     // any version, no visibility check
//	(*Rel).ClaimOf(h, self) Claim                             // live / gone / pending on xid (SnapshotDirty)
//	(*Rel).Fetch(snap, tid, s) (data []byte, visible bool, err)
//	(*Rel).Scan(ctx, snap, s, fn func(page.TID, []byte) error) error // BulkRead ring when s == nil
//	(*Rel).NBlocks() (uint32, error), (*Rel).VM() *vm.Map, (*Rel).FSM() *fsm.Map, (*Rel).Node()
//	// vacuum-facing
//	(*Rel).Visible(h *TupleHeader, snap) (bool, hints uint16)  // HeapTupleSatisfiesMVCC
//	(*Rel).SatisfiesVacuum(h *TupleHeader, horizon) (VacuumStatus, hints uint16) // Live Dead RecentlyDead InsertInProgress DeleteInProgress
//	(*Rel).ScanForVacuum(blk, horizon, s) (ScanResult, error)      // lazy vacuum pass 1 (read-only on pages with dead slots)
//	(*Rel).ReclaimBlock(blk, offs, horizon, s) (VacuumResult, error) // lazy vacuum pass 2: dead tuples and LP_DEAD -> LP_UNUSED
//	(*Rel).ScanForVacuumPinned, ReclaimBlockPinned(..., vmr *vm.Reader) // the same, the VM page kept pinned by vmr
//	(*Rel).ReclaimBlockAfterScan(blk, offs, hint, horizon, s, vmr)  // pass 2 trusting pass 1's ScanResult.Reclaim while the page LSN has not moved
//	(*Rel).PruneBlock(blk, horizon, s) (PruneResult, error)
//	(*Rel).VacuumBlock(blk, offs, horizon, s) (VacuumResult, error)
//	(*Rel).SetAllVisible(blk, horizon, s) (bool, error)
//	(*Rel).TrailingEmptyBlocks(s) (newNBlocks uint32, err)    // blocks at the end with no items
//	(*Rel).Truncate(nblocks, s) error                         // main+VM+FSM, WAL-logged and flushed first
//	(*Rel).CountTuples(ctx, horizon, s) (TupleCounts, error)
//	(*Rel).CountTuplesReadOnly(ctx, horizon, s) (TupleCounts, error) // sets no hint bits: no WAL
//	(*Rel).CountTuplesPaced(ctx, horizon, s, hook) (TupleCounts, error) // hook after each page
//	(*Rel).CountPage(blk, horizon, s) (TupleCounts, error)              // one page
//	(*Rel).RecordFreeSpace(blk, s) error, (*Rel).RebuildFSM(ctx, s) error
//	(*Rel).ScanLiveForRewrite(ctx, horizon, s, hook func() error, fn RewriteFunc) error // every tuple not Dead
//	(*Rel).InsertRaw(h TupleHeader, data, s) (page.TID, error) // VACUUM FULL target: keeps xmin/xmax
//	(*Rel).NewBulkLoader(s) *BulkLoader; (*BulkLoader).Add(h, data) (page.TID, error); Finish() error
//	                                      // InsertRaw a page at a time: one WAL record per page (no concurrent inserters)
//	(*Rel).LinePointer(tid, s) (page.ItemID, TupleHeader, error) // for Check
//	Redo(env *redo.Env, rec *wal.Record) error                 // every RmgrHeap record
//	EncodeTuple / DecodeTuple, HeaderSize, MaxTupleData, MaxItemSize
//
// Lazy vacuum per page: skip when VM().IsSet(blk); res := ScanForVacuum(blk,
// h), which leaves a page with dead slots unchanged and finishes one without
// (FSM, VM bit); remember res.DeadOffsets (dead tuples and LP_DEAD pointers)
// in the dead-TID store; after the index pass, ReclaimBlock(blk,
// thoseOffsets, h) frees the slots and the tuples' storage in one vacuum
// record, records FSM and sets the VM bit when it can. So each page is
// dirtied, written and full-page-imaged once per vacuum, not once for the
// prune and again for the vacuum (PostgreSQL's lazy vacuum does both; the
// older PruneBlock + VacuumBlock pair still does). Then TrailingEmptyBlocks +
// Truncate (table held exclusively).
//
// # Tuple layout (one page item; integers little-endian)
//
//	offset size field
//	     0    8 xmin      inserting transaction
//	     8    8 xmax      deleting/updating transaction, 0 = none
//	    16    4 ctid.blk  block of the newer version (self when none)
//	    20    2 ctid.off  offset of the newer version (self when none)
//	    22    2 infomask  hint and state bits, see below
//	    24    2 datalen   length of the row bytes that follow
//	    26    2 reserved  zero
//	    28      data      datalen bytes of opaque row data
//
// The item length is HeaderSize+datalen (a decoder rejects any mismatch).
// Infomask bits: XminCommitted, XminInvalid (inserter aborted),
// XmaxCommitted, XmaxInvalid (no deleter, or it aborted), Updated (ctid
// points at a newer version). The four xmin/xmax bits are hints: set after
// a clog lookup, not WAL-logged, set under the page's exclusive lock (a scan
// collects them under its share lock and applies them in a short exclusive
// section, so no byte is ever written under a share lock) with
// buffer.MarkDirtyHint, which images the page when wal_log_hints requires.
//
// # Visibility (snapshot: txn.Snapshot)
//
// A tuple is visible when its xmin is the snapshot's own xid or committed
// and not in progress for the snapshot, and its xmax is unset, aborted,
// still running for the snapshot, or committed after the snapshot; a
// transaction never sees what it deleted itself. Delete and Update refuse a
// tuple that is invisible (ErrNotFound) or whose xmax is set by another
// transaction that is running or committed after the snapshot
// (ErrConcurrentUpdate: first updater wins, no waiting). The error is a
// *ConcurrentUpdateError naming that xmax, whether it still runs, and the
// newer version's TID after an update, so the engine can wait for it and
// follow the update chain; DeleteNewest and UpdateNewest then change a
// version whose inserter committed after the snapshot (READ COMMITTED).
//
// # Vacuum classification (against a horizon, txn.Manager.OldestXmin)
//
// Dead: inserter aborted, or deleter committed below the horizon.
// RecentlyDead: deleter committed at or above the horizon. Live: inserter
// committed, no live deleter. InsertInProgress / DeleteInProgress: the
// inserter / deleter is still running. A page is all-visible when every
// tuple is Live with xmin below the horizon and no LP_DEAD slot remains.
//
// # Page-level invariants
//
//   - A dead tuple's slot becomes LP_UNUSED only through VacuumBlock or
//     ReclaimBlock, called after every index dropped its entries: either
//     the tuple was first pruned to LP_DEAD (storage reclaimed, slot kept:
//     index entries still point at it), or ReclaimBlock frees tuple and
//     slot together. A slot is reused only once unused, so an index entry
//     never reaches a new tuple.
//   - No heap-only tuples or redirects: every version has index entries.
//   - FlagAllVisible on the page mirrors the VM bit (the bit implies the
//     flag). Insert/Delete/Update on an all-visible page clear both and say
//     so in their WAL record; heap redo clears the VM bit whatever the heap
//     page's LSN (vm.ClearForRedo).
//   - The page header's prune xid is the smallest xmax set on the page
//     since the last prune (a hint for opportunistic work; not pruned on
//     read in this version).
//
// # WAL records (RmgrHeap, Record.XID = the acting transaction)
//
//	InfoInsert   Blocks[0] main page, Data = off u16 | flags u8 | tuple bytes
//	InfoDelete   Blocks[0] main page, Data = off u16 | flags u8 (xmax = XID)
//	InfoUpdate   Blocks[0] new page,  Data = newOff u16 | flags u8 | oldOff u16 | tuple
//	             Blocks[1] old page (absent when flags has sameBlock),
//	             Data = oldOff u16 | flags u8
//	InfoPrune    Blocks[0] main page, Data = pruneXID u64 | n u16 | n×off u16 (set LP_DEAD, compact)
//	InfoVacuum   Blocks[0] main page, Data = n u16 | n×off u16 (LP_DEAD or dead tuple -> LP_UNUSED, compact)
//	InfoVacuumVisible Blocks[0] main page, Data as InfoVacuum, then FlagAllVisible set;
//	             Blocks[1] the VM page holding Blocks[0]'s bit, which is set (no data):
//	             a page vacuum that leaves the page all-visible, in one record
//	InfoTruncate no blocks, Main = rel u32 | nblocks u32 (main, VM and FSM forks)
//	InfoNewPage  Blocks[0] WillInit, Data = lower u16 | upper u16 | page[:lower] | page[upper:]
//	             (a whole page written by a BulkLoader; redo validates it)
//
// Flags: initPage (the page was new: redo initialises it; the block ref is
// WillInit), allVisibleCleared (clear FlagAllVisible and the VM bit).
// Redo is idempotent through redo.ReadBlock/Finish (skip when the page LSN
// is already at the record's end) and reproduces the same offsets and
// layout (items are added at the logged offsets, and Compact is
// deterministic). Hint bits are not reproduced; visible content is.
package heap
