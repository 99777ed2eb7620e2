package btree

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// BulkDeleteStats are the results of one BulkDelete pass.
type BulkDeleteStats struct {
	PagesScanned     int64 // tree pages visited (meta page excluded)
	EntriesRemoved   int64
	EntriesRemaining int64 // entries left on the leaves visited
	Pages            int64 // blocks in the index when the pass ended, meta included
}

// BulkDelete removes every entry whose TID the callback reports dead. It
// visits the blocks in physical order (1..n, re-reading n at the end so
// pages added by concurrent splits are visited too), deletes matching
// items of each leaf in place with one WAL record per changed page, and
// calls pageHook after each page (the vacuum's throttle and cancellation
// point; its error stops the pass and is returned).
//
// The pass takes no index-level lock, only each page's exclusive lock in
// turn, one page at a time: deleting items from a leaf changes neither its
// high key nor its links nor any other page, so a descent or a scan (page
// share locks, entries copied out under them) sees the leaf before or after
// the deletion, and an insert (index write lock, the leaf re-read under its
// exclusive lock) finds the same leaf either way. Holding the index write
// lock instead made every lookup of the index queue behind each leaf's
// dead-entry lookups and WAL record (docs/benchmarks/online-cost.md).
// Holding one page lock at a time, it cannot deadlock with a split, which
// locks pages left to right and child before parent.
//
// Splits only ever move entries to new blocks at the end of the fork, so
// an entry is never moved behind the pass; an entry moved ahead of it is
// seen again (deletion is idempotent).
func (ix *Index) BulkDelete(callback func(page.TID) bool, s *buffer.Strategy, pageHook func() error) (BulkDeleteStats, error) {
	var st BulkDeleteStats
	nblocks, err := ix.nblocks()
	if err != nil {
		return st, err
	}
	var dead []page.OffsetNumber // reused from leaf to leaf
	for blk := storage.BlockNumber(1); ; blk++ {
		if blk >= nblocks {
			if nblocks, err = ix.nblocks(); err != nil {
				return st, err
			}
			if blk >= nblocks {
				break
			}
		}
		var removed, remaining int64
		removed, remaining, dead, err = ix.bulkDeletePage(blk, callback, s, dead[:0])
		if err != nil {
			return st, err
		}
		st.PagesScanned++
		st.EntriesRemoved += removed
		st.EntriesRemaining += remaining
		if pageHook != nil {
			if err := pageHook(); err != nil {
				return st, err
			}
		}
	}
	st.Pages = int64(nblocks)
	return st, nil
}

func (ix *Index) nblocks() (storage.BlockNumber, error) {
	n, err := ix.d.Storage.NBlocks(ix.rel, storage.MainFork)
	if err != nil {
		return 0, fmt.Errorf("index %d: %w", ix.rel, err)
	}
	return n, nil
}

// bulkDeletePage deletes the dead entries of one page if it is a leaf.
// dead is scratch space for the page's dead offsets (returned, maybe
// grown, for the next page): one pass over the leaf, each entry's TID read
// in place (no key copied) and looked up in the caller's set, and no
// allocation per entry.
func (ix *Index) bulkDeletePage(blk storage.BlockNumber, callback func(page.TID) bool, s *buffer.Strategy, dead []page.OffsetNumber) (removed, remaining int64, _ []page.OffsetNumber, err error) {
	// Read (and pin) the page before locking it: a miss is a disk read, and
	// under the lock it would stall every lookup of this leaf for its
	// duration. Pages are never deleted, so the block is the same page after.
	b, err := ix.read(blk, s)
	if err != nil {
		return 0, 0, dead, err
	}
	// The page's lock only, no index lock: see BulkDelete.
	b.Lock()
	if b.Page().IsNew() { // extended but never initialised (crash between extend and log)
		b.Unlock()
		b.Release()
		return 0, 0, dead, nil
	}
	n, err := loadNode(b.Page())
	if err != nil || !n.op.isLeaf() {
		b.Unlock()
		b.Release()
		if err != nil {
			return 0, 0, dead, ix.corrupt(blk, err)
		}
		return 0, 0, dead, nil
	}
	p, layout := b.Page(), n.op.layout
	for off := n.first(); off <= n.last(); off++ {
		tid, err := leafTID(p.ItemData(page.OffsetNumber(off)), layout)
		if err != nil {
			b.Unlock()
			b.Release()
			return 0, 0, dead, ix.corrupt(blk, err)
		}
		if callback(tid) {
			dead = append(dead, page.OffsetNumber(off))
		}
	}
	remaining = int64(n.entries() - len(dead))
	if len(dead) == 0 {
		b.Unlock()
		b.Release()
		return 0, remaining, dead, nil
	}
	p.DeleteItems(dead)
	cs := changeSet{ix: ix}
	cs.add(b, encodeDeleteOp(dead), false)
	if err := cs.commit(InfoBulkDelete, s); err != nil {
		return 0, 0, dead, fmt.Errorf("bulk delete on index %d block %d: %w", ix.rel, blk, err)
	}
	return int64(len(dead)), remaining, dead, nil
}

// CleanupStats describe the index after a vacuum (PostgreSQL's
// btvacuumcleanup figures).
type CleanupStats struct {
	Pages          int64 // blocks, meta page included
	Entries        int64 // entries on leaf pages
	LeafPages      int64
	EmptyLeafPages int64 // leaves with no entries (kept: pages are not deleted)
}

// Cleanup scans every page (physical order, share locks) and counts pages
// and entries.
func (ix *Index) Cleanup(s *buffer.Strategy) (CleanupStats, error) {
	return ix.CleanupPaced(s, nil)
}

// CleanupPaced is Cleanup calling pageHook (when not nil) after every
// page read: a vacuum's delay point; its error stops the scan.
func (ix *Index) CleanupPaced(s *buffer.Strategy, pageHook func() error) (CleanupStats, error) {
	var st CleanupStats
	n, err := ix.nblocks()
	if err != nil {
		return st, err
	}
	st.Pages = int64(n)
	for blk := storage.BlockNumber(1); blk < n; blk++ {
		b, err := ix.read(blk, s)
		if err != nil {
			return st, err
		}
		b.RLock()
		var nd node
		if !b.Page().IsNew() {
			nd, err = loadNode(b.Page())
		}
		count := 0
		if err == nil && nd.p != nil {
			count = nd.entries()
		}
		b.RUnlock()
		b.Release()
		if err != nil {
			return st, ix.corrupt(blk, err)
		}
		if nd.p != nil && nd.op.isLeaf() {
			st.LeafPages++
			st.Entries += int64(count)
			if count == 0 {
				st.EmptyLeafPages++
			}
		}
		if pageHook != nil {
			if err := pageHook(); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}
