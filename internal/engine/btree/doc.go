// Package btree is the B-tree index, after PostgreSQL's nbtree (Lehman &
// Yao trees with right links and high keys), simplified; our own code.
//
// # Entries and order
//
// An entry is (key, heap TID), the key a byte string of at most
// MaxKeySize bytes. Entries are unique as pairs; a key may repeat. Order
// is by key bytes (bytes.Compare), then TID block, then TID offset, so
// duplicates of a key sit in TID order and every entry has one place in
// the tree (as PostgreSQL 12's nbtree makes the heap TID a tiebreaker key
// column). The tree never interprets keys: its caller encodes them so that
// bytewise order is the order it wants (package row's index keys order
// every column type and multi-column keys as PostgreSQL does). Where
// nbtree compares a scan key with each index tuple column by column
// through the operator class, this tree does one memcmp.
//
// # Pages (all integers little-endian)
//
// Block 0 is the meta page; every other block is a tree page. All are
// page.Page slotted pages (line pointers from the front, items from the
// back). Two page layouts exist; every page's special space names its
// own, and every page of one index has the meta page's layout. Create and
// Build write layout 2; layout-1 indexes, made by earlier builds, keep
// working (inserts, splits, scans, bulk delete, Check, redo) in layout 1,
// and VACUUM FULL rebuilds them in layout 2.
//
// Layout 2 (variable-length keys), tree page special space, 16 bytes:
//
//	offset size field
//	     0    4 left sibling   block, 0 = none (leftmost on its level)
//	     4    4 right sibling  block, 0 = none (rightmost on its level)
//	     8    4 level          0 = leaf
//	    12    2 flags          1 leaf, 2 meta, 4 has high key
//	    14    2 version        2
//
// Items are index tuples that carry their own size, as PostgreSQL's
// IndexTuple does in t_info:
//
//	leaf tuple   TID block u32, TID offset u16, size u16, key       (8 + key bytes)
//	pivot tuple  TID block u32, TID offset u16, size u16, child u32, key (12 + key)
//
// size is the whole tuple's length and must equal the line pointer's. A
// page with a right sibling holds its high key as item 1 (PostgreSQL's
// P_HIKEY), a leaf tuple (key and TID: the first entry of the right
// sibling); its entries then start at item 2. A pivot's child holds the
// entries >= its separator (key, TID) and below the next pivot's (or the
// page's high key); the first pivot of an internal page is minus infinity
// whatever it holds (nbtree truncates it to no key; we keep the bytes).
// Separators are whole entries, not suffix-truncated as nbtree's are.
//
// Layout 1 (earlier builds; integer keys only): special space 32 bytes,
// the 16 above with version 1, then the high key as key i64, TID block
// u32, TID offset u16 and 2 zero bytes; leaf items are key i64, TID block
// u32, TID offset u16 (14 bytes) and internal items add the child u32 (18
// bytes). A layout-1 key k reads as IntKey(k) (a one-column integer key of
// package row), so both layouts order alike; a layout-1 page refuses any
// other key.
//
// Meta page special space (16 bytes in layout 2, 32 zero-padded in 1):
// root block u32 @0, root level u32 @4, magic "BTRE" @8, flags = 2 @12,
// version @14. The meta page has no items.
//
// MaxKeySize (1024) keeps several entries on a page, so a split always
// finds a point where both halves, with their high keys, fit: it divides
// the bytes in half (the rightmost page split at its end keeps 90 % on
// the left, as PostgreSQL's fillfactor does) and moves the point until
// both fit. Build packs pages 90 % full; when the next entry's key is too
// big to be a full page's high key, the last entries move to the next
// page with it.
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
//   - Every page has the meta page's layout, and every item decodes in it.
//   - Pages are never deleted or reused, so a split only ever moves entries
//     to a new block at the end of the fork (BulkDelete relies on this).
//
// # Concurrency
//
// An index-level sync.RWMutex: lookups and range scans take it shared for
// the descent and for each leaf page they read, and call back outside any
// lock; inserts take it exclusively for the whole descent and split; bulk
// delete does not take it at all, only the exclusive lock of the one leaf
// it changes: deleting items in place changes no high key, link or other
// page, so lookups of every other leaf run beside a vacuum, and a lookup of
// that leaf waits only for that page. Page content locks follow the buffer pool's
// protocol (share to read, exclusive to change, MarkDirty, WAL insert, set
// LSN). Range scans follow right links, so a split between two page visits
// cannot hide entries from them.
//
// # WAL (rmgr wal.RmgrBtree)
//
// Every change is one record whose block references carry their own
// operation as the first byte of BlockRef.Data:
//
//	1 init      special space + count u16 + items          rebuild the page (WillInit)
//	2 insert    offset u16 + item                          insert at offset
//	3 set-left  block u32                                  set the left link
//	4 delete    count u16 + offsets u16...                 delete items (bulk delete)
//	5 meta      meta special space                         rebuild the meta page (WillInit)
//
// The special space's version (at its offset 14) gives its size and the
// items' form: layout 1's init items are fixed-size; layout 2's are each
// length u16 + bytes, the high key first when the page has one. An insert
// is redone only if its item decodes as an entry of the page it goes to.
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
