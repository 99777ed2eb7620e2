package heap

import (
	"context"
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/fsm"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/vm"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// ErrNotEmpty is returned by Truncate when a block to be removed still
// holds items.
var ErrNotEmpty = errors.New("heap block is not empty")

// pageEmpty reports whether p holds no item other than unused slots.
func pageEmpty(p page.Page) bool {
	if p.IsNew() {
		return true
	}
	for i := 1; i <= p.NumItems(); i++ {
		if p.Item(page.OffsetNumber(i)).State != page.LPUnused {
			return false
		}
	}
	return true
}

// TrailingEmptyBlocks returns the length the relation would have without
// its trailing empty blocks (no normal, dead or redirect slot): Truncate to
// that length removes them. Equal to NBlocks when the last block has items.
func (r *Rel) TrailingEmptyBlocks(s *buffer.Strategy) (uint32, error) {
	n, err := r.NBlocks()
	if err != nil {
		return 0, err
	}
	for n > 0 {
		empty, err := r.blockEmpty(n-1, s)
		if err != nil {
			return 0, err
		}
		if !empty {
			break
		}
		n--
	}
	return n, nil
}

func (r *Rel) blockEmpty(blk uint32, s *buffer.Strategy) (bool, error) {
	b, err := r.read(blk, s)
	if err != nil {
		return false, err
	}
	b.RLock()
	empty := pageEmpty(b.Page())
	b.RUnlock()
	b.Release()
	return empty, nil
}

// Truncate shortens the relation to nblocks blocks, removing the main,
// VM and FSM pages past it. The blocks must be empty (ErrNotEmpty
// otherwise) and the caller must keep inserters away (the table is held
// exclusively, as PostgreSQL's AccessExclusiveLock does). The truncate
// record is flushed before any file shrinks, since a file truncation
// cannot wait for WAL-before-data at write-out.
func (r *Rel) Truncate(nblocks uint32, s *buffer.Strategy) error {
	n, err := r.NBlocks()
	if err != nil || nblocks >= n {
		return err
	}
	for blk := nblocks; blk < n; blk++ {
		empty, err := r.blockEmpty(blk, s)
		if err != nil {
			return err
		}
		if !empty {
			return fmt.Errorf("truncate relation %d to %d blocks: block %d: %w", r.node, nblocks, blk, ErrNotEmpty)
		}
	}
	r.target.Store(-1)
	rec := &wal.Record{Rmgr: wal.RmgrHeap, Info: InfoTruncate, Main: encodeTruncate(uint32(r.node), nblocks)}
	lsn, err := r.d.Log.Insert(rec, usageOf(s))
	if err != nil {
		return fmt.Errorf("log truncation of relation %d: %w", r.node, err)
	}
	if err := r.d.Log.Flush(lsn, usageOf(s)); err != nil {
		return fmt.Errorf("flush truncation record of relation %d: %w", r.node, err)
	}
	if err := truncateForks(r.d.Pool, r.d.Storage, r.node, nblocks); err != nil {
		return err
	}
	r.fsm.Reset()
	return nil
}

// truncateForks drops buffers and shortens the main fork, then the VM and
// FSM (shared by Truncate and its redo; idempotent).
func truncateForks(pool *buffer.Pool, st *storage.Manager, rel storage.RelFileNode, nblocks uint32) error {
	pool.DropBlocksFrom(rel, storage.MainFork, storage.BlockNumber(nblocks))
	cur, err := st.NBlocks(rel, storage.MainFork)
	if err != nil {
		return fmt.Errorf("size of heap relation %d: %w", rel, err)
	}
	if uint32(cur) > nblocks {
		if err := st.Truncate(rel, storage.MainFork, storage.BlockNumber(nblocks)); err != nil {
			return fmt.Errorf("truncate heap relation %d to %d blocks: %w", rel, nblocks, err)
		}
	}
	if err := vm.TruncateFork(pool, st, rel, storage.BlockNumber(nblocks)); err != nil {
		return err
	}
	return fsm.TruncateFork(pool, st, rel, storage.BlockNumber(nblocks))
}

// RewriteFunc receives one tuple worth keeping in a VACUUM FULL rewrite:
// its old TID, header (xmin, xmax and hints to preserve) and a copy of its
// row bytes.
type RewriteFunc func(tid page.TID, h TupleHeader, data []byte) error

// ScanLiveForRewrite calls fn for every tuple that is not Dead per horizon
// (live, recently dead and in-progress versions all survive a rewrite, as
// in PostgreSQL's rewriteheap), in physical order, with no page lock held.
// hook, when not nil, runs after each page (the vacuum's delay point); its
// error stops the scan.
func (r *Rel) ScanLiveForRewrite(ctx context.Context, horizon txn.XID, s *buffer.Strategy, hook func() error, fn RewriteFunc) error {
	n, err := r.NBlocks()
	if err != nil {
		return err
	}
	type kept struct {
		tid  page.TID
		h    TupleHeader
		data []byte
	}
	var rows []kept
	for blk := uint32(0); blk < n; blk++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		rows = rows[:0]
		err := r.visitPage(blk, s, func(off page.OffsetNumber, h *TupleHeader, data []byte) (uint16, error) {
			st, hints := r.SatisfiesVacuum(h, horizon)
			if st != Dead {
				hh := *h
				hh.Infomask |= hints
				rows = append(rows, kept{page.TID{Block: blk, Off: off}, hh, append([]byte(nil), data...)})
			}
			return hints, nil
		})
		if err != nil {
			return err
		}
		for _, row := range rows {
			if err := fn(row.tid, row.h, row.data); err != nil {
				return err
			}
		}
		if hook != nil {
			if err := hook(); err != nil {
				return err
			}
		}
	}
	return nil
}
