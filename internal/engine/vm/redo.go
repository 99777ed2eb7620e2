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
	vb, i, bit := Locate(h)
	if ref := rec.Blocks[0]; ref.Fork != storage.VMFork || ref.Block != vb {
		return fmt.Errorf("vm redo of record at %X: block 0 is fork %d block %d, want VM block %d", uint64(rec.StartLSN), ref.Fork, ref.Block, vb)
	}
	if err := apply(env, rec, 0, func(p page.Page) error {
		bm := bitmap(p, true)
		if bm == nil {
			return fmt.Errorf("visibility map block %d has a bad header", vb)
		}
		bm[i] |= 1 << bit
		return nil
	}); err != nil {
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
