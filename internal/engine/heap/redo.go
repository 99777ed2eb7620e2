package heap

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/redo"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/vm"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Redo replays one RmgrHeap record. It is idempotent: each block is
// changed only when redo.ReadBlock says its LSN is behind the record.
func Redo(env *redo.Env, rec *wal.Record) error {
	if rec.Rmgr != wal.RmgrHeap {
		return fmt.Errorf("heap redo of record at %X: rmgr %d", uint64(rec.StartLSN), rec.Rmgr)
	}
	var err error
	switch rec.Info {
	case InfoInsert:
		err = redoInsert(env, rec)
	case InfoDelete:
		err = redoDelete(env, rec)
	case InfoUpdate:
		err = redoUpdate(env, rec)
	case InfoPrune:
		err = redoOffsets(env, rec, func(p page.Page, data []byte) error {
			pruneXID, offs, err := decodePrune(data)
			if err != nil {
				return err
			}
			for _, off := range offs {
				p.SetDead(off)
			}
			p.Compact()
			p.SetPruneXID(pruneXID)
			return nil
		})
	case InfoVacuum:
		err = redoOffsets(env, rec, func(p page.Page, data []byte) error { return redoVacuum(InfoVacuum, p, data) })
	case InfoVacuumVisible:
		err = redoVacuumVisible(env, rec)
	case InfoTruncate:
		err = redoTruncate(env, rec)
	case InfoNewPage:
		err = redoOffsets(env, rec, func(p page.Page, data []byte) error { return decodeNewPage(p, data) })
	default:
		err = &RecordError{Info: rec.Info, Reason: "unknown record kind"}
	}
	if err != nil {
		return fmt.Errorf("heap redo of record at %X: %w", uint64(rec.StartLSN), err)
	}
	return nil
}

// redoVacuum frees the logged slots of p and compacts it.
func redoVacuum(info uint8, p page.Page, data []byte) error {
	offs, err := decodeOffsets(info, data)
	if err != nil {
		return err
	}
	for _, off := range offs {
		p.SetUnused(off)
	}
	p.Compact()
	return nil
}

// redoVacuumVisible replays InfoVacuumVisible: the vacuum of the heap page
// with its FlagAllVisible set, then the bit in the VM page. Each block is
// applied or skipped by its own LSN, as for the two records it replaces.
func redoVacuumVisible(env *redo.Env, rec *wal.Record) error {
	if len(rec.Blocks) != 2 {
		return &RecordError{Info: rec.Info, Reason: fmt.Sprintf("%d blocks, want 2", len(rec.Blocks))}
	}
	if err := applyBlock(env, rec, 0, func(p page.Page) error {
		if err := redoVacuum(rec.Info, p, rec.Blocks[0].Data); err != nil {
			return err
		}
		p.SetFlags(p.Flags() | page.FlagAllVisible)
		return nil
	}); err != nil {
		return err
	}
	return vm.RedoSetBit(env, rec, 1, rec.Blocks[0].Block)
}

// applyBlock runs fn on block i of rec when it needs the change.
func applyBlock(env *redo.Env, rec *wal.Record, i int, fn func(p page.Page) error) error {
	if i >= len(rec.Blocks) {
		return &RecordError{Info: rec.Info, Reason: fmt.Sprintf("missing block %d", i)}
	}
	if rec.Blocks[i].Fork != storage.MainFork {
		return &RecordError{Info: rec.Info, Reason: fmt.Sprintf("block %d is fork %d", i, rec.Blocks[i].Fork)}
	}
	b, act, err := redo.ReadBlock(env, rec, i)
	if err != nil {
		return err
	}
	switch act {
	case redo.Skipped:
		return nil
	case redo.Done:
		b.Unlock()
		b.Release()
		return nil
	}
	if err := fn(b.Page()); err != nil {
		b.Unlock()
		b.Release()
		return fmt.Errorf("block %d: %w", rec.Blocks[i].Block, err)
	}
	redo.Finish(b, rec)
	return nil
}

// clearVM clears the VM bit of block i's page when its op says so, whatever
// the heap page's LSN (as PostgreSQL does).
func clearVM(env *redo.Env, rec *wal.Record, i int, flags uint8) error {
	if flags&flagAllVisibleCleared == 0 {
		return nil
	}
	ref := rec.Blocks[i]
	return vm.ClearForRedo(env, ref.Rel, ref.Block)
}

// prepare applies the page-level flags of an op: initialise a new page,
// clear the all-visible flag.
func prepare(p page.Page, flags uint8) {
	if flags&flagInitPage != 0 {
		page.Init(p, 0)
	}
	if flags&flagAllVisibleCleared != 0 {
		p.SetFlags(p.Flags() &^ page.FlagAllVisible)
	}
}

func redoInsert(env *redo.Env, rec *wal.Record) error {
	if len(rec.Blocks) != 1 {
		return &RecordError{Info: rec.Info, Reason: fmt.Sprintf("%d blocks", len(rec.Blocks))}
	}
	op, err := decodeTupleOp(rec.Info, rec.Blocks[0].Data, true)
	if err != nil {
		return err
	}
	if err := clearVM(env, rec, 0, op.flags); err != nil {
		return err
	}
	return applyBlock(env, rec, 0, func(p page.Page) error {
		prepare(p, op.flags)
		return addAt(p, op.tuple, op.off)
	})
}

// addAt re-adds a logged tuple at exactly its original slot.
func addAt(p page.Page, tup []byte, off page.OffsetNumber) error {
	got, err := p.AddItem(tup, off)
	if err != nil {
		return fmt.Errorf("re-add tuple at offset %d: %w", off, err)
	}
	if got != off {
		return fmt.Errorf("re-added tuple landed at offset %d, want %d", got, off)
	}
	return nil
}

// redoMarkDeleted sets xmax on the tuple at off.
func redoMarkDeleted(p page.Page, off page.OffsetNumber, xid txn.XID, next page.TID, updated bool) error {
	item, h, _, err := tupleAt(p, off)
	if err != nil {
		return fmt.Errorf("tuple at offset %d: %w", off, err)
	}
	markDeleted(item, &h, xid, next, updated)
	setPruneXID(p, xid)
	return nil
}

func redoDelete(env *redo.Env, rec *wal.Record) error {
	if len(rec.Blocks) != 1 {
		return &RecordError{Info: rec.Info, Reason: fmt.Sprintf("%d blocks", len(rec.Blocks))}
	}
	op, err := decodeTupleOp(rec.Info, rec.Blocks[0].Data, false)
	if err != nil {
		return err
	}
	if err := clearVM(env, rec, 0, op.flags); err != nil {
		return err
	}
	self := page.TID{Block: uint32(rec.Blocks[0].Block), Off: op.off}
	return applyBlock(env, rec, 0, func(p page.Page) error {
		prepare(p, op.flags&^flagInitPage)
		return redoMarkDeleted(p, op.off, txn.XID(rec.XID), self, false)
	})
}

func redoUpdate(env *redo.Env, rec *wal.Record) error {
	if len(rec.Blocks) < 1 || len(rec.Blocks) > 2 {
		return &RecordError{Info: rec.Info, Reason: fmt.Sprintf("%d blocks", len(rec.Blocks))}
	}
	nop, err := decodeTupleOp(rec.Info, rec.Blocks[0].Data, true)
	if err != nil {
		return err
	}
	same := nop.flags&flagSameBlock != 0
	if same != (len(rec.Blocks) == 1) {
		return &RecordError{Info: rec.Info, Reason: "same-block flag disagrees with the block count"}
	}
	xid := txn.XID(rec.XID)
	newTID := page.TID{Block: uint32(rec.Blocks[0].Block), Off: nop.off}
	if err := clearVM(env, rec, 0, nop.flags); err != nil {
		return err
	}
	err = applyBlock(env, rec, 0, func(p page.Page) error {
		prepare(p, nop.flags)
		if err := addAt(p, nop.tuple, nop.off); err != nil {
			return err
		}
		if same {
			return redoMarkDeleted(p, nop.oldOff, xid, newTID, true)
		}
		return nil
	})
	if err != nil || same {
		return err
	}
	oop, err := decodeTupleOp(InfoDelete, rec.Blocks[1].Data, false)
	if err != nil {
		return err
	}
	if oop.off != nop.oldOff {
		return &RecordError{Info: rec.Info, Reason: fmt.Sprintf("old offset %d vs %d", oop.off, nop.oldOff)}
	}
	if err := clearVM(env, rec, 1, oop.flags); err != nil {
		return err
	}
	return applyBlock(env, rec, 1, func(p page.Page) error {
		prepare(p, oop.flags&^flagInitPage)
		return redoMarkDeleted(p, oop.off, xid, newTID, true)
	})
}

// redoOffsets applies a prune, vacuum or new-page record's block 0.
func redoOffsets(env *redo.Env, rec *wal.Record, fn func(p page.Page, data []byte) error) error {
	if len(rec.Blocks) != 1 {
		return &RecordError{Info: rec.Info, Reason: fmt.Sprintf("%d blocks", len(rec.Blocks))}
	}
	data := rec.Blocks[0].Data
	return applyBlock(env, rec, 0, func(p page.Page) error { return fn(p, data) })
}

func redoTruncate(env *redo.Env, rec *wal.Record) error {
	rel, nblocks, err := decodeTruncate(rec.Main)
	if err != nil {
		return err
	}
	node := storage.RelFileNode(rel)
	if env.Skip != nil && env.Skip(node) {
		return nil
	}
	return truncateForks(env.Pool, env.Storage, node, nblocks)
}
