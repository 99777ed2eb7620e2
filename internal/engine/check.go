package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// maxProblems caps a report; the last problem says how many were left out.
const maxProblems = 1000

// Problem is one inconsistency Check found.
type Problem struct {
	File    string // the relation file (segment 0 of the fork) concerned
	Block   int64  // block number within the fork, -1 when not about one block
	Message string
}

func (p Problem) String() string {
	if p.Block < 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Message)
	}
	return fmt.Sprintf("%s block %d: %s", p.File, p.Block, p.Message)
}

// CheckReport lists every problem Check found (empty when consistent).
type CheckReport struct {
	Problems  []Problem
	Relations int   // relations (table heaps and indexes) checked
	Pages     int64 // pages read from disk and verified
}

// OK reports whether Check found nothing wrong.
func (r *CheckReport) OK() bool { return len(r.Problems) == 0 }

type checker struct {
	db      *DB
	rep     *CheckReport
	horizon txn.XID
	bad     map[string]map[int64]bool // file -> blocks already reported unreadable
	dropped int
}

func (c *checker) add(file string, blk int64, format string, args ...any) {
	if len(c.rep.Problems) >= maxProblems {
		c.dropped++
		return
	}
	c.rep.Problems = append(c.rep.Problems, Problem{File: file, Block: blk, Message: fmt.Sprintf(format, args...)})
}

// Check verifies the whole data directory and lists every problem found,
// continuing after each: every page of every fork of every relation is read
// from disk and its checksum and layout verified; every tuple not yet dead
// must decode as a row of its table and be reachable from each index of
// its table under its key (unless the key is NULL); no two live versions
// may share a key of a unique index; no index
// entry may point at an unused slot or past the end of the table; a page
// whose visibility-map bit is set must hold only tuples visible to all and
// no dead line pointers. The tables catalogued when it starts are checked
// one at a time, each as catalogued at its turn (eachTable). The error is
// for failures to run the check (a cancelled context, a closed DB), not
// for problems found.
func (db *DB) Check(ctx context.Context) (*CheckReport, error) {
	c := &checker{db: db, rep: &CheckReport{}, horizon: db.txns.OldestXmin(), bad: map[string]map[int64]bool{}}
	// Write every dirty buffer first, so the files hold what the pool
	// holds. A failure (a page the storage manager refuses to write) is a
	// problem in itself; the files are checked as they are.
	if err := db.flushForCheck(); err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		c.add(db.dir, -1, "cannot write buffered pages: %v", err)
	}
	// One table at a time, as a statement holds it (eachTable): a DDL waits
	// for one table's check, not for the whole directory's.
	err := db.eachTable(ctx, func(t *catalog.Table) error {
		for _, f := range []storage.ForkNum{storage.MainFork, storage.VMFork, storage.FSMFork} {
			if err := c.physical(ctx, t.Rel, f); err != nil {
				return err
			}
		}
		for _, ix := range t.Indexes {
			if err := c.physical(ctx, ix.Rel, storage.MainFork); err != nil {
				return err
			}
		}
		c.rep.Relations += 1 + len(t.Indexes)
		return c.table(ctx, t)
	})
	if err != nil {
		return nil, err
	}
	if c.dropped > 0 {
		c.rep.Problems = append(c.rep.Problems, Problem{Block: -1, Message: fmt.Sprintf("%d more problems not listed", c.dropped)})
	}
	return c.rep, nil
}

// flushForCheck writes every dirty buffer (ErrClosed once the DB is closed).
func (db *DB) flushForCheck() error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return ErrClosed
	}
	return db.pool.FlushAll()
}

// physical reads every block of one fork straight from the files and
// verifies its checksum and page layout.
func (c *checker) physical(ctx context.Context, rel storage.RelFileNode, fork storage.ForkNum) error {
	st := c.db.st
	file := st.Path(rel, fork)
	n, err := st.NBlocks(rel, fork)
	if err != nil {
		c.add(file, -1, "cannot size fork: %v", err)
		return nil
	}
	buf := vfs.AlignedBuffer(page.Size)
	for blk := storage.BlockNumber(0); blk < n; blk++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.rep.Pages++
		if err := st.Read(rel, fork, blk, buf, nil); err != nil {
			c.markBad(file, int64(blk))
			c.add(file, int64(blk), "unreadable: %v", err)
			continue
		}
		if err := page.Page(buf).Validate(); err != nil {
			c.markBad(file, int64(blk))
			c.add(file, int64(blk), "%v", err)
		}
	}
	return nil
}

func (c *checker) markBad(file string, blk int64) {
	if c.bad[file] == nil {
		c.bad[file] = map[int64]bool{}
	}
	c.bad[file][blk] = true
}

// entry is an index entry, or the entry a tuple needs.
type entry struct {
	key []byte
	tid page.TID
}

func cmpEntry(a, b entry) int {
	if c := bytes.Compare(a.key, b.key); c != 0 {
		return c
	}
	return cmpTID(a.tid, b.tid)
}

// table checks one table's heap against its visibility map and indexes.
func (c *checker) table(ctx context.Context, t *catalog.Table) error {
	db := c.db
	h := db.heapRel(t.Rel)
	file := db.st.Path(t.Rel, storage.MainFork)
	nblocks, err := h.NBlocks()
	if err != nil {
		c.add(file, -1, "cannot size heap: %v", err)
		return nil
	}
	states := make([][]page.LPState, nblocks)           // line pointer states per block
	needs := make([][]entry, len(t.Indexes))            // entries each index must hold, in TID order
	live := make([]map[string]page.TID, len(t.Indexes)) // unique indexes: key -> its live version
	for i, ix := range t.Indexes {
		if ix.Unique {
			live[i] = map[string]page.TID{}
		}
	}
	for blk := uint32(0); blk < nblocks; blk++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.bad[file][int64(blk)] {
			continue
		}
		hp, err := db.readHeapPage(h, blk, c.horizon, nil)
		if err != nil {
			c.add(file, int64(blk), "unreadable: %v", err)
			continue
		}
		states[blk] = make([]page.LPState, len(hp.Items))
		for off, id := range hp.Items {
			states[blk][off] = id.State
		}
		for _, msg := range hp.Bad {
			c.add(file, int64(blk), "%s", msg)
		}
		c.visibility(h, file, hp)
		for _, tup := range hp.Tuples {
			if tup.Status == heap.Dead {
				continue
			}
			vals, err := row.Decode(t.Columns, tup.Data)
			if err != nil {
				c.add(file, int64(blk), "tuple %d: %v", tup.TID.Off, err)
				continue
			}
			isLive := h.ClaimOf(&tup.Header, 0).State == heap.ClaimLive
			for i := range t.Indexes {
				ix := &t.Indexes[i]
				key, ok, err := keyOfValues(t, ix, vals)
				if err != nil {
					c.add(file, int64(blk), "tuple %d: index %q: %v", tup.TID.Off, ix.Name, err)
					continue
				}
				if !ok {
					continue // an all-NULL key has no entry
				}
				needs[i] = append(needs[i], entry{key, tup.TID})
				if live[i] != nil && isLive && !row.KeyHasNull(t.KeyColumns(ix), key) {
					if other, dup := live[i][string(key)]; dup {
						c.add(file, int64(blk), "unique index %q: key (%s) held by live versions %v and %v",
							ix.Name, row.FormatKey(t.KeyColumns(ix), key), other, tup.TID)
					}
					live[i][string(key)] = tup.TID
				}
			}
		}
	}
	for i := range t.Indexes {
		if err := c.index(t, &t.Indexes[i], nblocks, states, needs[i]); err != nil {
			return err
		}
	}
	return nil
}

// visibility checks the VM bit of one heap page against its contents.
func (c *checker) visibility(h *heap.Rel, file string, hp *heapPage) {
	set, err := h.VM().IsSet(storage.BlockNumber(hp.Block), nil)
	if err != nil {
		c.add(file, int64(hp.Block), "cannot read visibility map bit: %v", err)
		return
	}
	if !set {
		return
	}
	if !hp.AllVisible {
		c.add(file, int64(hp.Block), "visibility map bit set but the page is not flagged all-visible")
	}
	for off, id := range hp.Items {
		if id.State == page.LPDead {
			c.add(file, int64(hp.Block), "visibility map bit set but line pointer %d is dead", off)
		}
	}
	for _, tup := range hp.Tuples {
		if tup.Status != heap.Live || tup.Header.Xmin >= c.horizon {
			c.add(file, int64(hp.Block), "visibility map bit set but tuple %d is %v (xmin %d, xmax %d)",
				tup.TID.Off, tup.Status, tup.Header.Xmin, tup.Header.Xmax)
		}
	}
}

// index compares one index with the entries the heap needs from it.
func (c *checker) index(t *catalog.Table, ix *catalog.Index, nblocks uint32, states [][]page.LPState, needs []entry) error {
	db := c.db
	file := db.st.Path(ix.Rel, storage.MainFork)
	var have []entry
	tree := db.indexTree(ix.Rel)
	err := tree.Check(func(blk storage.BlockNumber, msg string) {
		c.add(file, int64(blk), "index %q: %s", ix.Name, msg)
	})
	if err != nil {
		c.add(file, -1, "index %q structure cannot be checked: %v", ix.Name, err)
		return nil
	}
	err = tree.AllEntries(nil, func(k []byte, tid page.TID) error {
		have = append(have, entry{k, tid})
		return nil
	})
	if err != nil {
		c.add(file, -1, "index %q cannot be scanned: %v", ix.Name, err)
		return nil
	}
	// needs is in TID order: keep that copy to look tuples up by TID.
	byTID := needs
	needs = slices.Clone(needs)
	slices.SortFunc(needs, cmpEntry)
	slices.SortFunc(have, cmpEntry)
	i, j := 0, 0
	for i < len(needs) || j < len(have) {
		switch {
		case j >= len(have) || (i < len(needs) && cmpEntry(needs[i], have[j]) < 0):
			n := needs[i]
			c.add(file, -1, "index %q lacks an entry for tuple (%d,%d) of %q with key (%s)",
				ix.Name, n.tid.Block, n.tid.Off, t.Name, row.FormatKey(t.KeyColumns(ix), n.key))
			i++
		case i >= len(needs) || cmpEntry(needs[i], have[j]) > 0:
			c.extraEntry(t, ix, file, have[j], nblocks, states, byTID)
			j++
		default:
			i++
			j++
		}
	}
	return nil
}

// extraEntry judges an index entry no live tuple needs: fine if it points
// at a dead tuple or a dead line pointer (vacuum removes it later), a
// problem if it points past the table, at an unused slot, or at a live
// tuple with a different key.
func (c *checker) extraEntry(t *catalog.Table, ix *catalog.Index, file string, e entry, nblocks uint32, states [][]page.LPState, byTID []entry) {
	cols := t.KeyColumns(ix)
	where := fmt.Sprintf("index %q entry (key (%s)) -> (%d,%d)", ix.Name, row.FormatKey(cols, e.key), e.tid.Block, e.tid.Off)
	if e.tid.Block >= nblocks {
		c.add(file, -1, "%s points past the end of %q (%d blocks)", where, t.Name, nblocks)
		return
	}
	st := states[e.tid.Block]
	if st == nil {
		return // heap page unreadable, reported already
	}
	if e.tid.Off == 0 || int(e.tid.Off) >= len(st) || st[e.tid.Off] == page.LPUnused {
		c.add(file, -1, "%s points at an unused line pointer", where)
		return
	}
	k, ok := slices.BinarySearchFunc(byTID, e.tid, func(a entry, tid page.TID) int { return cmpTID(a.tid, tid) })
	switch {
	case ok && bytes.Equal(byTID[k].key, e.key):
		c.add(file, -1, "%s is a duplicate", where)
	case ok:
		c.add(file, -1, "%s points at a live tuple whose key is (%s)", where, row.FormatKey(cols, byTID[k].key))
	}
}
