package btree

import (
	"bytes"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
)

func counters(s *buffer.Strategy) *usage.Counters {
	if s == nil {
		return nil
	}
	return s.Usage
}

// maxDepth bounds descents and right-link walks of a corrupt tree.
const maxDepth = 64

// findLeaf descends from the root to the leaf page where e belongs and
// returns its block. With stack non-nil it records the internal pages the
// descent went through (the parent of the leaf last), for inserting
// downlinks after a split. Pages are read under share locks; the caller
// holds the index lock.
func (ix *Index) findLeaf(e Entry, s *buffer.Strategy, stack *[]storage.BlockNumber) (storage.BlockNumber, error) {
	m, err := ix.readMeta(s)
	if err != nil {
		return noBlock, err
	}
	blk := m.root
	for range maxDepth * 1024 {
		b, err := ix.read(blk, s)
		if err != nil {
			return noBlock, err
		}
		b.RLock()
		n, err := loadNode(b.Page())
		var next storage.BlockNumber
		leaf, right := false, false
		if err == nil {
			switch {
			case n.op.beyondHigh(e):
				next, right = n.op.right, true // a split moved e's place right
			case n.op.isLeaf():
				leaf = true
			default:
				next, err = n.childFor(e)
			}
		}
		b.RUnlock()
		b.Release()
		if err != nil {
			return noBlock, ix.corrupt(blk, err)
		}
		if leaf {
			return blk, nil
		}
		if !right && stack != nil {
			*stack = append(*stack, blk)
		}
		blk = next
	}
	return noBlock, ix.corrupt(blk, fmt.Errorf("descent does not reach a leaf"))
}

// scan calls fn, in order, for every entry >= lo whose key is <= hi (no
// upper bound when hi is nil). It takes the index read lock for each leaf
// page and calls fn outside any lock, so fn may take its time (but must
// not modify this index). Right links keep the scan complete when an
// insert splits a page between two visits.
func (ix *Index) scan(lo Entry, hi []byte, s *buffer.Strategy, fn func(Entry) error) error {
	ix.mu.RLock()
	blk, err := ix.findLeaf(lo, s, nil)
	ix.mu.RUnlock()
	if err != nil {
		return err
	}
	var batch []Entry
	for blk != noBlock {
		batch = batch[:0]
		next, done, err := ix.scanPage(blk, lo, hi, s, &batch)
		if err != nil {
			return err
		}
		for _, e := range batch {
			if err := fn(e); err != nil {
				return err
			}
		}
		if done {
			return nil
		}
		blk = next
	}
	return nil
}

// above reports whether key is past the scan's upper bound hi.
func above(key, hi []byte) bool { return hi != nil && bytes.Compare(key, hi) > 0 }

// scanPage appends the entries of leaf blk in [lo, hi] to out and returns
// the next page to visit and whether the scan is over.
func (ix *Index) scanPage(blk storage.BlockNumber, lo Entry, hi []byte, s *buffer.Strategy, out *[]Entry) (storage.BlockNumber, bool, error) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	b, err := ix.read(blk, s)
	if err != nil {
		return noBlock, true, err
	}
	defer b.Release()
	b.RLock()
	defer b.RUnlock()
	n, err := loadNode(b.Page())
	if err == nil && !n.op.isLeaf() {
		err = fmt.Errorf("right link from a leaf leads to a level-%d page", n.op.level)
	}
	if err != nil {
		return noBlock, true, ix.corrupt(blk, err)
	}
	if n.op.beyondHigh(lo) {
		return n.op.right, false, nil
	}
	start, _, err := n.lowerBound(lo)
	if err != nil {
		return noBlock, true, ix.corrupt(blk, err)
	}
	var buf intKeyBuf
	for off := start; off <= n.last(); off++ {
		v, _, err := n.view(off, &buf)
		if err != nil {
			return noBlock, true, ix.corrupt(blk, err)
		}
		if above(v.Key, hi) {
			return noBlock, true, nil
		}
		// A copy: fn gets it after the page's lock is released.
		*out = append(*out, Entry{Key: append([]byte{}, v.Key...), TID: v.TID})
	}
	if !n.op.hasHigh() || above(n.op.high.Key, hi) {
		return noBlock, true, nil
	}
	return n.op.right, false, nil
}

// Lookup returns the TIDs of every entry with key, in TID order.
func (ix *Index) Lookup(key []byte, s *buffer.Strategy) ([]page.TID, error) {
	var tids []page.TID
	err := ix.scan(Entry{Key: key}, key, s, func(e Entry) error {
		tids = append(tids, e.TID)
		return nil
	})
	return tids, err
}

// Range calls fn for every entry with lo <= key <= hi, in order (lo nil:
// from the first entry; hi nil: to the last). An error from fn stops the
// scan and is returned. fn must not modify the index; the key it is given
// is its own copy.
func (ix *Index) Range(lo, hi []byte, s *buffer.Strategy, fn func(key []byte, tid page.TID) error) error {
	if lo != nil && hi != nil && bytes.Compare(lo, hi) > 0 {
		return nil
	}
	return ix.scan(Entry{Key: lo}, hi, s, func(e Entry) error { return fn(e.Key, e.TID) })
}

// AllEntries calls fn for every entry of the index, in order (for
// heap/index agreement checks).
func (ix *Index) AllEntries(s *buffer.Strategy, fn func(key []byte, tid page.TID) error) error {
	return ix.Range(nil, nil, s, fn)
}
