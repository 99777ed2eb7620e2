package vm

import (
	"encoding/binary"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/redo"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Redo replays an RmgrVM record.
func Redo(env *redo.Env, rec *wal.Record) error {
	if rec.Rmgr != wal.RmgrVM || rec.Info != InfoSetAllVisible {
		return fmt.Errorf("vm redo of record at %X: unexpected rmgr %d info %d", uint64(rec.StartLSN), rec.Rmgr, rec.Info)
	}
	if len(rec.Main) != 4 || len(rec.Blocks) < 1 || len(rec.Blocks) > 2 {
		return fmt.Errorf("vm redo of record at %X: malformed (main %d bytes, %d blocks)", uint64(rec.StartLSN), len(rec.Main), len(rec.Blocks))
	}
	h := storage.BlockNumber(binary.LittleEndian.Uint32(rec.Main))
	if err := RedoSetBit(env, rec, 0, h); err != nil {
		return err
	}
	if len(rec.Blocks) == 2 {
		if ref := rec.Blocks[1]; ref.Fork != storage.MainFork || ref.Block != h {
			return fmt.Errorf("vm redo of record at %X: block 1 is fork %d block %d, want heap block %d", uint64(rec.StartLSN), ref.Fork, ref.Block, h)
		}
		return apply(env, rec, 1, func(p page.Page) error {
			p.SetFlags(p.Flags() | page.FlagAllVisible)
			return nil
		})
	}
	return nil
}

// RedoSetBit replays the VM half of a record written through SetWith:
// block i of rec must be the VM page holding heap block h's bit, which is
// set unless the VM page's LSN says the record is already applied.
func RedoSetBit(env *redo.Env, rec *wal.Record, i int, h storage.BlockNumber) error {
	if i < 0 || i >= len(rec.Blocks) {
		return fmt.Errorf("vm redo of record at %X: no block %d", uint64(rec.StartLSN), i)
	}
	vb, _, _ := Locate(h)
	if ref := rec.Blocks[i]; ref.Fork != storage.VMFork || ref.Block != vb {
		return fmt.Errorf("vm redo of record at %X: block %d is fork %d block %d, want VM block %d", uint64(rec.StartLSN), i, ref.Fork, ref.Block, vb)
	}
	return setBitForRedo(env, rec, i, h)
}

// setBitForRedo sets heap block h's bit in block i of rec, the VM page.
func setBitForRedo(env *redo.Env, rec *wal.Record, i int, h storage.BlockNumber) error {
	vb, idx, bit := Locate(h)
	return apply(env, rec, i, func(p page.Page) error {
		bm := bitmap(p, true)
		if bm == nil {
			return fmt.Errorf("visibility map block %d has a bad header", vb)
		}
		bm[idx] |= 1 << bit
		return nil
	})
}

// apply runs fn on block i of rec when redo.ReadBlock says it is needed.
func apply(env *redo.Env, rec *wal.Record, i int, fn func(page.Page) error) error {
	b, act, err := redo.ReadBlock(env, rec, i)
	if err != nil {
		return fmt.Errorf("vm redo of record at %X block %d: %w", uint64(rec.StartLSN), i, err)
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
		return fmt.Errorf("vm redo of record at %X: %w", uint64(rec.StartLSN), err)
	}
	redo.Finish(b, rec)
	return nil
}

// ClearForRedo clears heap block h's bit during recovery, whatever the VM
// page's LSN (heap redo calls it for records that cleared the bit). A VM
// page past the fork's end has no bit to clear.
func ClearForRedo(env *redo.Env, rel storage.RelFileNode, h storage.BlockNumber) error {
	if env.Skip != nil && env.Skip(rel) {
		return nil
	}
	vb, i, bit := Locate(h)
	n, err := env.Storage.NBlocks(rel, storage.VMFork)
	if err != nil {
		return fmt.Errorf("visibility map of relation %d: %w", rel, err)
	}
	if vb >= n {
		return nil
	}
	b, err := env.Pool.ReadOrZero(buffer.Tag{Rel: rel, Fork: storage.VMFork, Block: vb}, nil)
	if err != nil {
		return fmt.Errorf("read visibility map block %d of relation %d: %w", vb, rel, err)
	}
	defer b.Release()
	clearBit(b, i, bit, nil)
	return nil
}
