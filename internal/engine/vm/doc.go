// Package vm is the visibility map: one bit per heap page, set when every
// tuple on the page is visible to every transaction (PostgreSQL's
// visibilitymap.c, without the all-frozen bit: 64-bit xids never freeze).
// Lazy vacuum skips pages whose bit is set.
//
// # Exported API (summary)
//
//	New(pool *buffer.Pool, st *storage.Manager, log *wal.Log, rel storage.RelFileNode) *Map
//	(*Map).IsSet(heapBlk, s) (bool, error)     // false beyond the end of the fork
//	(*Map).Set(heapBlk, heapBuf, s) error      // WAL-logged (RmgrVM InfoSetAllVisible); sets the
//	                                           // heap page's FlagAllVisible too when heapBuf != nil
//	(*Map).Clear(heapBlk, s) (bool, error)     // NOT logged: the caller's heap record covers it
//	(*Map).Count(nHeapBlocks, s) (int, error)  // all-visible pages below nHeapBlocks
//	(*Map).Truncate(nHeapBlocks) error         // drop VM pages/bits past a truncated heap (not logged:
//	                                           // the heap truncate record's redo calls it again)
//	(*Map).SetWith(heapBlk, heapBuf, s, rec) error // Set inside the caller's heap record rec
//	                                           // (appended as its VM block): one record, not two
//	Redo(env *redo.Env, rec *wal.Record) error // RmgrVM records
//	RedoSetBit(env, rec, i, heapBlk) error     // the VM block of a record written through SetWith
//	ClearForRedo(env, rel, heapBlk) error      // heap redo clears the bit, as PostgreSQL does
//	TruncateFork(pool, st, rel, nHeapBlocks) error // Truncate without a Map (heap truncate redo)
//	BitsPerPage, Locate(heapBlk) (vmBlk, byteIdx, bit)
//
// # Layout
//
// The map lives in the relation's VM fork. Each VM page is a standard page
// (page.Init with Size-HeaderSize bytes of special space: lower = upper =
// special = 32), so it has an LSN and a checksum; the bitmap is the special
// space, BitsPerPage = 8160*8 = 65280 heap pages per VM page. Heap block h
// is bit h%8 of byte (h%BitsPerPage)/8 of VM block h/BitsPerPage. An
// all-zero (new) VM page means "no bit set".
//
// # Invariants and WAL
//
//   - A set bit implies the heap page's FlagAllVisible is set and every
//     tuple on it is visible to all. The converse may fail (a bit lost to a
//     clear replayed after a newer set): that only costs a vacuum visit.
//   - Setting is WAL-logged: one RmgrVM InfoSetAllVisible record with
//     Blocks[0] = the VM page and, when given, Blocks[1] = the heap page
//     (whose FlagAllVisible it sets); Main = heap block (uint32 LE). The
//     caller holds the heap page's exclusive lock; Set takes the VM page's
//     lock after it (lock order heap page, then VM page, everywhere).
//     SetWith instead appends the VM page to the caller's own heap record
//     (heap's InfoVacuumVisible), whose redo calls RedoSetBit.
//   - Clearing is never logged by itself: every heap change that clears a
//     bit (insert, delete, update on an all-visible page) records that fact
//     in its own heap record, and heap redo calls ClearForRedo whatever the
//     heap page's LSN says, exactly as PostgreSQL's heap redo does. A torn
//     VM page fails its checksum and is read as zeros (ReadOrZero): every
//     bit clear, which is always safe.
//   - The fork is extended on demand by Set, one page at a time; reads past
//     its end answer "not set" without extending.
package vm
