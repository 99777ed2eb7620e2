// Package btree is the B-tree index on int64 keys, after PostgreSQL's
// nbtree (Lehman & Yao trees with right links and high keys), simplified;
// our own code.
//
// # Entries and order
//
// An entry is (key int64, heap TID). Entries are unique as pairs; a key may
// repeat. Order is by key, then TID block, then TID offset, so duplicates
// of a key sit in TID order and every entry has one place in the tree.
//
// # Pages (all integers little-endian)
//
// Block 0 is the meta page; every other block is a tree page. All are
// page.Page slotted pages with a 32-byte special space. Tree page special
// space:
//
//	offset size field
//	     0    4 left sibling   block, 0 = none (leftmost on its level)
//	     4    4 right sibling  block, 0 = none (rightmost on its level)
//	     8    4 level          0 = leaf
//	    12    2 flags          1 leaf, 2 meta, 4 has high key
//	    14    2 version        layoutVersion (1)
//	    16    8 high key       key      } valid with flag 4: an upper bound
//	    24    4                TID block} (exclusive) of the page's entries
//	    28    2                TID off  } and the first entry of the right
//	    30    2 zero                      sibling; rightmost pages have none
//
// Meta page special space: root block u32 @0, root level u32 @4, magic
// "BTRE" @8, flags = 2 @12, version @14, zeros to 32. The meta page has no
// items.
//
// Items, in line-pointer order = entry order:
//
//	leaf item      key i64, TID block u32, TID offset u16        (14 bytes)
//	internal item  the same 14 bytes (separator) + child block u32 (18 bytes)
//
// An internal item's child holds the entries >= its separator and below
// the next item's separator (or below the page's high key). The separator of
// the first item of an internal page is ignored (minus infinity).
//
// # Invariants (checked by Index.Check)
//
//   - Entries on a page strictly ascend; every entry is < the page's high
//     key and >= the left sibling's high key.
//   - A page has a high key iff it has a right sibling; the right sibling's
//     left link points back; the leftmost page of a level has no left link.
//   - For each downlink, the child is one level down, its high key equals
//     the next separator (or the parent's high key), and consecutive
//     children are right-linked.
//   - Pages are never deleted or reused, so a split only ever moves entries
//     to a new block at the end of the fork (BulkDelete relies on this).
//
// # Concurrency
//
// An index-level sync.RWMutex: lookups and range scans take it shared for
// the descent and for each leaf page they read, and call back outside any
// lock; inserts take it exclusively for the whole descent and split; bulk
// delete takes it exclusively for one leaf at a time, so foreground lookups
// interleave with a vacuum. Page content locks follow the buffer pool's
// protocol (share to read, exclusive to change, MarkDirty, WAL insert, set
// LSN). Range scans follow right links, so a split between two page visits
// cannot hide entries from them.
//
// # WAL (rmgr wal.RmgrBtree)
//
// Every change is one record whose block references carry their own
// operation as the first byte of BlockRef.Data:
//
//	1 init      special space (32) + count u16 + items    rebuild the page (WillInit)
//	2 insert    offset u16 + item                          insert at offset
//	3 set-left  block u32                                  set the left link
//	4 delete    count u16 + offsets u16...                 delete items (bulk delete)
//	5 meta      meta special space (32)                    rebuild the meta page (WillInit)
//
// An insert that splits logs every page it changed — both halves as init
// images, the old right sibling's new left link, the parent's new downlink
// (or the new root and meta page) — in a single record, so redo never sees
// half a split. Create and Build log their pages as init/meta. Redo applies
// each block through redo.ReadBlock / redo.Finish, so it is idempotent by
// page LSN and honours full-page images. Info (InfoCreate, InfoInsert, ...)
// names the record kind for reports; redo does not depend on it.
//
// # Vacuum
//
// BulkDelete visits blocks 1..n in physical order (re-reading n so pages
// added by concurrent splits are visited), removes the entries whose TIDs
// the callback reports dead with one WAL record per changed leaf, and calls
// the page hook (throttle and cancellation point) after each page. Emptied
// leaves stay in the tree; Cleanup counts them.
package btree
