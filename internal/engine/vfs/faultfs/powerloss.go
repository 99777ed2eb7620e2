package faultfs

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
)

// TearSize is the granularity of torn writes: a device writes whole 4 KiB
// sectors, so a torn page keeps some of its 4 KiB halves and loses others.
const TearSize = 4096

// PowerLossOptions tune what PowerLoss leaves behind.
type PowerLossOptions struct {
	// TearProb is the probability that an undone write of two or more whole
	// TearSize chunks (an 8 KiB page write, say) is torn instead of fully
	// undone: some of its chunks keep the new bytes (at least one), the
	// others revert (at least one). For an 8 KiB write that is one half
	// new, one half old.
	TearProb float64
	// Seed makes the tearing decisions reproducible.
	Seed uint64
}

type dirOpKind int

const (
	opCreate dirOpKind = iota + 1
	opRemove
	opRename
	opMkdir
)

// dirOp is one directory operation in the journal.
type dirOp struct {
	seq     uint64
	kind    dirOpKind
	path    string
	newPath string   // opRename
	dirs    []string // directories that must be synced after it
	saved   *captured
	isDir   bool // opRemove of a directory
}

// PowerLoss cuts the power: it waits for the operations in flight, closes
// every file and lock opened through fs, reverts every file to its durable
// state and makes fs dead (every later operation returns ErrPoweredOff).
//
// Durable means: file contents and sizes as of each file's last successful
// Sync (later writes and truncations are undone, newest first, possibly
// torn, see PowerLossOptions), and directory entries as of the last
// SyncDir of their directory (later creations vanish, later removals and
// renames are reverted). A kept torn chunk beyond the file's durable size
// is lost with the size. A second call returns ErrPoweredOff.
func (fs *FS) PowerLoss(opts PowerLossOptions) error {
	fs.life.Lock()
	defer fs.life.Unlock()
	if fs.dead.Swap(true) {
		return ErrPoweredOff
	}
	fs.meta.Lock()
	defer fs.meta.Unlock()
	var errs []error
	for f := range fs.open {
		if err := f.closeInner(); err != nil {
			errs = append(errs, err)
		}
	}
	fs.open = nil
	fs.locksMu.Lock()
	locks := fs.locks
	fs.locks = nil
	fs.locksMu.Unlock()
	for h := range locks {
		h.once.Do(func() { h.err = h.inner.Close() })
	}

	rnd := rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15))
	paths := make([]string, 0, len(fs.nodes))
	for p := range fs.nodes {
		paths = append(paths, p)
	}
	slices.Sort(paths) // deterministic tearing for a given seed
	for _, p := range paths {
		if err := fs.revertFile(p, fs.nodes[p].undo, rnd, opts.TearProb); err != nil {
			errs = append(errs, err)
		}
	}
	for _, op := range slices.Backward(fs.journal) {
		if fs.durable(op) {
			continue
		}
		if err := fs.undoDirOp(op); err != nil {
			errs = append(errs, err)
		}
	}
	fs.nodes, fs.journal = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("faultfs: power loss: %w", err)
	}
	return nil
}

// revertFile applies undo to path, newest change first.
func (fs *FS) revertFile(path string, undo []undoRec, rnd *rand.Rand, tearProb float64) error {
	if len(undo) == 0 {
		return nil
	}
	f, err := fs.inner.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	protected := map[int64]bool{} // chunks holding kept bytes of a torn write
	for _, r := range slices.Backward(undo) {
		var keep map[int64]bool
		if tearProb > 0 && r.n >= 2*TearSize && r.n%TearSize == 0 && r.off%TearSize == 0 && rnd.Float64() < tearProb {
			keep = tear(r, rnd)
		}
		for pos := 0; pos < len(r.saved); {
			abs := r.off + int64(pos)
			c := abs / TearSize
			end := min(int((c+1)*TearSize-r.off), len(r.saved))
			if !protected[c] && !keep[c] {
				if _, err := f.WriteAt(r.saved[pos:end], abs); err != nil {
					return fmt.Errorf("revert %s at %d: %w", path, abs, err)
				}
			}
			pos = end
		}
		for c := range keep {
			protected[c] = true
		}
		size, err := f.Size()
		if err != nil {
			return err
		}
		if size != r.oldSize {
			if err := f.Truncate(r.oldSize); err != nil {
				return fmt.Errorf("revert size of %s to %d: %w", path, r.oldSize, err)
			}
			for c := range protected {
				if c*TearSize >= r.oldSize {
					delete(protected, c)
				}
			}
		}
	}
	return nil
}

// tear picks the chunks of r that keep their new bytes: at least one, and
// at least one fewer than all.
func tear(r undoRec, rnd *rand.Rand) map[int64]bool {
	first, n := r.off/TearSize, r.n/TearSize
	keep := map[int64]bool{}
	for i := range n {
		if rnd.IntN(2) == 0 {
			keep[first+i] = true
		}
	}
	switch int64(len(keep)) {
	case 0:
		keep[first+rnd.Int64N(n)] = true
	case n:
		delete(keep, first+rnd.Int64N(n))
	}
	return keep
}

func (fs *FS) undoDirOp(op dirOp) error {
	switch op.kind {
	case opCreate:
		if err := fs.inner.Remove(op.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("undo create of %s: %w", op.path, err)
		}
	case opMkdir:
		return fs.removeAll(op.path)
	case opRename:
		if err := fs.inner.Rename(op.newPath, op.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("undo rename of %s to %s: %w", op.path, op.newPath, err)
		}
		if op.saved != nil {
			return fs.restore(op.newPath, op.saved)
		}
	case opRemove:
		if op.isDir {
			return fs.inner.MkdirAll(op.path, 0o755)
		}
		return fs.restore(op.path, op.saved)
	}
	return nil
}

// restore recreates path with the durable contents of a captured file.
func (fs *FS) restore(path string, c *captured) error {
	f, err := fs.inner.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("restore %s: %w", path, err)
	}
	_, werr := f.WriteAt(c.data, 0)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("restore %s: %w", path, err)
	}
	return fs.revertFile(path, c.undo, nil, 0)
}

func (fs *FS) removeAll(path string) error {
	st, err := fs.inner.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.IsDir() {
		ents, err := fs.inner.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if err := fs.removeAll(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := fs.inner.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("undo mkdir of %s: %w", path, err)
	}
	return nil
}
