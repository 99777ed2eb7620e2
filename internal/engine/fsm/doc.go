// Package fsm is the free space map: how many bytes each heap page can
// still take, so an insert finds a page with room instead of extending the
// table (PostgreSQL's freespace.c, flattened to one level).
//
// # Exported API (summary)
//
//	New(pool *buffer.Pool, st *storage.Manager, rel storage.RelFileNode) *Map
//	(*Map).Record(heapBlk, free int, s) error   // remember a page's free bytes
//	(*Map).Get(heapBlk, s) (int, error)         // lower bound of free bytes (category*32)
//	(*Map).Search(need int, s) (blk, ok, err)   // a page with at least need bytes, if any
//	(*Map).Truncate(nHeapBlocks) error          // forget pages past a truncated heap
//	(*Map).Reset()                              // drop the in-memory search hints
//	Category(free) uint8, BytesPerPage, Locate(heapBlk)
//
// # Layout
//
// The map lives in the relation's FSM fork. Each FSM page is a standard
// page (page.Init with Size-HeaderSize bytes of special space) whose
// special space holds one byte per heap page: BytesPerPage = 8160 heap
// pages per FSM page. Heap block h is byte h%BytesPerPage of FSM block
// h/BytesPerPage. The byte is the free-space category free/32 (capped at
// 255): category c promises at least c*32 free bytes.
//
// # Invariants
//
//   - The map is a hint and is NOT WAL-logged, as in PostgreSQL: callers
//     re-check a page's real free space under its lock and correct the map
//     when it was wrong. Pages are read with ReadOrZero, so a torn, corrupt
//     or missing FSM page is simply "no free space known" (zeros).
//   - FSM pages never carry an LSN (0), so writing them never forces a WAL
//     flush.
//   - In memory, the Map keeps per FSM page an upper bound of its largest
//     category (so full pages are skipped without being read) and the slot
//     where the next search starts (spreading concurrent inserters, like
//     PostgreSQL's fp_next_slot). Both are hints rebuilt lazily.
package fsm
