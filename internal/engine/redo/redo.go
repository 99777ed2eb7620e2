package redo

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Env is what redo routines may use.
type Env struct {
	Pool    *buffer.Pool
	Storage *storage.Manager
	// Skip reports relations whose files are gone for good (retired from
	// the catalog, or a creation abandoned); their records are ignored.
	Skip func(rel storage.RelFileNode) bool
}

// Action says what the caller must do with the block ReadBlock returned.
type Action int

// Actions.
const (
	Apply   Action = iota // apply the record's change, set page LSN, MarkDirty
	Done                  // already applied or restored from an image: just release
	Skipped               // relation gone: nothing to do (buffer is nil)
)

// String names the action, for messages and tests.
func (a Action) String() string {
	switch a {
	case Apply:
		return "apply"
	case Done:
		return "done"
	case Skipped:
		return "skipped"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// ReadBlock returns rec.Blocks[i]'s buffer pinned and exclusively locked.
// With a full-page image it restores the image, sets the page LSN to
// rec.EndLSN, marks it dirty and returns Done. Otherwise, if the page LSN
// is >= rec.EndLSN it returns Done, else Apply. A block past the end of
// its fork is created by extending with zeroed pages (Apply on a new page).
// The caller must Unlock and Release the buffer unless Skipped.
//
// A block with an image or marked WillInit is read with ReadOrZero: its old
// content does not matter (it may be a torn write that fails its
// checksum). Any other block must read cleanly; a checksum failure there is
// returned, naming the file and block.
func ReadBlock(env *Env, rec *wal.Record, i int) (*buffer.Buffer, Action, error) {
	if i < 0 || i >= len(rec.Blocks) {
		return nil, Skipped, fmt.Errorf("redo %s: block reference %d of %d", describe(rec), i, len(rec.Blocks))
	}
	br := &rec.Blocks[i]
	if env.Skip != nil && env.Skip(br.Rel) {
		return nil, Skipped, nil
	}
	if br.Image != nil && len(br.Image) != page.Size {
		return nil, Skipped, fmt.Errorf("redo %s: image of %d bytes", describe(rec), len(br.Image))
	}
	b, err := extendTo(env, br)
	if err != nil {
		return nil, Skipped, fmt.Errorf("redo %s: %w", describe(rec), err)
	}
	if b == nil {
		tag := buffer.Tag{Rel: br.Rel, Fork: br.Fork, Block: br.Block}
		if br.Image != nil || br.WillInit {
			b, err = env.Pool.ReadOrZero(tag, nil)
		} else {
			b, err = env.Pool.Read(tag, nil)
		}
		if err != nil {
			return nil, Skipped, fmt.Errorf("redo %s: %w", describe(rec), err)
		}
		b.Lock()
	}
	p := b.Page()
	if br.Image != nil {
		copy(p, br.Image)
		p.SetLSN(uint64(rec.EndLSN))
		b.MarkDirty(nil)
		return b, Done, nil
	}
	if !p.IsNew() && p.LSN() >= uint64(rec.EndLSN) {
		return b, Done, nil
	}
	return b, Apply, nil
}

// extendTo makes sure br's fork exists and reaches br.Block. When it had to
// extend, it returns the target block's buffer (zeroed, pinned, locked);
// otherwise nil.
func extendTo(env *Env, br *wal.BlockRef) (*buffer.Buffer, error) {
	n, err := env.Storage.NBlocks(br.Rel, br.Fork)
	if err != nil {
		return nil, err
	}
	if br.Block < n {
		return nil, nil
	}
	if n == 0 {
		if err := env.Storage.Create(br.Rel, br.Fork); err != nil {
			return nil, err
		}
	}
	for {
		b, err := env.Pool.Extend(br.Rel, br.Fork, nil)
		if err != nil {
			return nil, err
		}
		got := b.Tag().Block
		if got >= br.Block {
			if got != br.Block {
				b.Unlock()
				b.Release()
				return nil, fmt.Errorf("extend %s: got block %d, want %d", env.Storage.Path(br.Rel, br.Fork), got, br.Block)
			}
			return b, nil
		}
		b.Unlock()
		b.Release()
	}
}

// Finish sets the page LSN to rec.EndLSN, marks the buffer dirty, unlocks
// and releases it (the tail of every Apply).
func Finish(b *buffer.Buffer, rec *wal.Record) {
	b.Page().SetLSN(uint64(rec.EndLSN))
	b.MarkDirty(nil)
	b.Unlock()
	b.Release()
}

// Release unlocks and releases a buffer ReadBlock returned with Done (a
// convenience for redo routines: Done needs no further change).
func Release(b *buffer.Buffer) {
	if b != nil {
		b.Unlock()
		b.Release()
	}
}

func describe(rec *wal.Record) string {
	return fmt.Sprintf("record rmgr %d info %d at LSN %X", rec.Rmgr, rec.Info, uint64(rec.StartLSN))
}
