package heap

import (
	"context"
	"errors"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// Fetch returns the row at tid and whether it is visible to snap. A TID
// that names no tuple (past the end, unused or dead slot) is simply not
// visible. The returned bytes are a copy.
func (r *Rel) Fetch(snap *txn.Snapshot, tid page.TID, s *buffer.Strategy) ([]byte, bool, error) {
	f := r.Fetcher(s)
	defer f.Release()
	return f.Fetch(snap, tid)
}

// Fetcher is Fetch for a sequence of TIDs: it keeps the last page it read
// pinned between calls, so that a run of TIDs on one page (the versions of
// one row an index lookup finds) reads and bounds-checks the page once.
// Release the pin before anything that may wait (a callback, a row
// wait), and when done.
type Fetcher struct {
	r   *Rel
	s   *buffer.Strategy
	b   *buffer.Buffer
	blk uint32
}

// Fetcher returns a Fetcher of r's tuples through strategy s.
func (r *Rel) Fetcher(s *buffer.Strategy) *Fetcher { return &Fetcher{r: r, s: s} }

// Release drops the pinned page, if any.
func (f *Fetcher) Release() {
	if f.b != nil {
		f.b.Release()
		f.b = nil
	}
}

// Fetch is Rel.Fetch of tid, reusing the pinned page when tid is on it.
func (f *Fetcher) Fetch(snap *txn.Snapshot, tid page.TID) ([]byte, bool, error) {
	if f.b == nil || f.blk != tid.Block || tid.Off == page.InvalidOffset {
		f.Release()
		b, err := f.r.readTID(tid, f.s)
		if errors.Is(err, ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		f.b, f.blk = b, tid.Block
	}
	b := f.b
	b.RLock()
	_, h, data, err := tupleAt(b.Page(), tid.Off)
	if errors.Is(err, ErrNotFound) {
		b.RUnlock()
		return nil, false, nil
	}
	if err != nil {
		b.RUnlock()
		return nil, false, fmt.Errorf("tuple %d/%d of relation %d: %w", tid.Block, tid.Off, f.r.node, err)
	}
	vis, hints := f.r.Visible(&h, snap)
	var out []byte
	if vis {
		out = append([]byte(nil), data...)
	}
	b.RUnlock()
	if hints != 0 {
		applyHints(b, []pendingHint{{off: tid.Off, xmin: h.Xmin, xmax: h.Xmax, bits: hints}}, f.s)
	}
	return out, vis, nil
}

// visitFunc sees one normal tuple of a page under the page's share lock.
// data aliases the page: copy what must outlive the call.
type visitFunc func(off page.OffsetNumber, h *TupleHeader, data []byte) (hints uint16, err error)

// visitPage runs fn on every normal item of block blk under a share lock,
// then applies the hint bits fn asked for.
func (r *Rel) visitPage(blk uint32, s *buffer.Strategy, fn visitFunc) error {
	b, err := r.read(blk, s)
	if err != nil {
		return err
	}
	defer b.Release()
	var hints []pendingHint
	b.RLock()
	p := b.Page()
	n := p.NumItems()
	for i := 1; i <= n; i++ {
		off := page.OffsetNumber(i)
		if p.Item(off).State != page.LPNormal {
			continue
		}
		_, h, data, err := tupleAt(p, off)
		if err != nil {
			b.RUnlock()
			return fmt.Errorf("tuple %d/%d of relation %d: %w", blk, off, r.node, err)
		}
		bits, err := fn(off, &h, data)
		if err != nil {
			b.RUnlock()
			return err
		}
		if bits != 0 {
			hints = append(hints, pendingHint{off: off, xmin: h.Xmin, xmax: h.Xmax, bits: bits})
		}
	}
	b.RUnlock()
	applyHints(b, hints, s)
	return nil
}

type scanRow struct {
	tid  page.TID
	data []byte
}

// Scan calls fn for every tuple visible to snap, in physical order. fn runs
// with no page lock held (rows are copied per page), so it may modify the
// relation; rows it inserts behind the scan position may or may not be
// seen. A nil s uses a BulkRead ring so a large scan does not flush the
// pool. The context is checked once per page.
func (r *Rel) Scan(ctx context.Context, snap *txn.Snapshot, s *buffer.Strategy, fn func(tid page.TID, data []byte) error) error {
	if s == nil {
		s = r.d.Pool.NewStrategy(buffer.BulkRead, 0, nil)
	}
	n, err := r.NBlocks()
	if err != nil {
		return err
	}
	var rows []scanRow
	for blk := uint32(0); blk < n; blk++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		rows = rows[:0]
		err := r.visitPage(blk, s, func(off page.OffsetNumber, h *TupleHeader, data []byte) (uint16, error) {
			vis, hints := r.Visible(h, snap)
			if vis {
				rows = append(rows, scanRow{page.TID{Block: blk, Off: off}, append([]byte(nil), data...)})
			}
			return hints, nil
		})
		if err != nil {
			return err
		}
		for _, row := range rows {
			if err := fn(row.tid, row.data); err != nil {
				return err
			}
		}
	}
	return nil
}

// TupleCounts are the tuple statistics of one pass over a relation.
type TupleCounts struct {
	Live, Dead, RecentlyDead        int64 // normal tuples by SatisfiesVacuum
	InsertInProgress                int64
	DeleteInProgress                int64
	DeadLinePointers, UnusedSlots   int64 // LP_DEAD and LP_UNUSED slots
	Pages, EmptyPages, AllVisible   int64 // pages, pages with no items, pages flagged all-visible
	LiveBytes, DeadBytes, FreeBytes int64
}

// CountTuples classifies every tuple against horizon (for tests), setting
// the hint bits it learns as any scan does. The context is checked once per
// page.
func (r *Rel) CountTuples(ctx context.Context, horizon txn.XID, s *buffer.Strategy) (TupleCounts, error) {
	return r.CountTuplesPaced(ctx, horizon, s, nil)
}

// CountTuplesReadOnly is CountTuples without the hint bits: it changes no
// page, so it dirties nothing and writes no WAL. It is for statistics
// (pg_stat_user_tables), whose readers expect a read: a hint set on a page
// not logged since the last checkpoint logs that page's full image, and one
// read of the view after a checkpoint logged every such page of the
// database at once, megabytes a standby had to replay that no vacuum's
// throttle governs (experiment 10's lag half saw 3.2 to 3.7 MB of lag
// within 50 ms of an online run's start, the runner's read of the view).
func (r *Rel) CountTuplesReadOnly(ctx context.Context, horizon txn.XID, s *buffer.Strategy) (TupleCounts, error) {
	return r.countTuples(ctx, horizon, s, nil, false)
}

// CountTuplesPaced is CountTuples calling hook (when not nil) after every
// page: a vacuum's delay point, so that the pass is throttled page by page
// and stops at hook's error.
func (r *Rel) CountTuplesPaced(ctx context.Context, horizon txn.XID, s *buffer.Strategy, hook func() error) (TupleCounts, error) {
	return r.countTuples(ctx, horizon, s, hook, true)
}

// countTuples is the pass of CountTuplesPaced; hint says whether it sets hint bits.
func (r *Rel) countTuples(ctx context.Context, horizon txn.XID, s *buffer.Strategy, hook func() error, hint bool) (TupleCounts, error) {
	var c TupleCounts
	n, err := r.NBlocks()
	if err != nil {
		return c, err
	}
	if s == nil {
		s = r.d.Pool.NewStrategy(buffer.BulkRead, 0, nil)
	}
	for blk := uint32(0); blk < n; blk++ {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		if err := r.countPage(blk, horizon, s, &c, hint); err != nil {
			return c, err
		}
		if hook != nil {
			if err := hook(); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// CountPage classifies the tuples of one page against horizon, as
// CountTuples does for every page (vacuum samples pages it skipped).
func (r *Rel) CountPage(blk uint32, horizon txn.XID, s *buffer.Strategy) (TupleCounts, error) {
	var c TupleCounts
	if s == nil {
		s = r.d.Pool.NewStrategy(buffer.BulkRead, 0, nil)
	}
	err := r.countPage(blk, horizon, s, &c, true)
	return c, err
}

func (r *Rel) countPage(blk uint32, horizon txn.XID, s *buffer.Strategy, c *TupleCounts, hint bool) error {
	b, err := r.read(blk, s)
	if err != nil {
		return err
	}
	b.RLock()
	p := b.Page()
	c.Pages++
	if p.IsNew() || p.NumItems() == 0 {
		c.EmptyPages++
	}
	if p.Flags()&page.FlagAllVisible != 0 {
		c.AllVisible++
	}
	if !p.IsNew() {
		c.FreeBytes += int64(p.FreeSpace())
	}
	for i := 1; i <= p.NumItems(); i++ {
		switch p.Item(page.OffsetNumber(i)).State {
		case page.LPDead:
			c.DeadLinePointers++
		case page.LPUnused:
			c.UnusedSlots++
		}
	}
	b.RUnlock()
	b.Release()
	return r.visitPage(blk, s, func(_ page.OffsetNumber, h *TupleHeader, data []byte) (uint16, error) {
		st, hints := r.SatisfiesVacuum(h, horizon)
		size := int64(HeaderSize + len(data))
		switch st {
		case Live:
			c.Live++
			c.LiveBytes += size
		case Dead:
			c.Dead++
			c.DeadBytes += size
		case RecentlyDead:
			c.RecentlyDead++
			c.DeadBytes += size
		case InsertInProgress:
			c.InsertInProgress++
		case DeleteInProgress:
			c.DeleteInProgress++
		}
		if !hint {
			return 0, nil
		}
		return hints, nil
	})
}

// LinePointer returns the line pointer at tid and, for a normal item, its
// decoded header (for consistency checks). A TID past the end is
// ErrNotFound.
func (r *Rel) LinePointer(tid page.TID, s *buffer.Strategy) (page.ItemID, TupleHeader, error) {
	b, err := r.readTID(tid, s)
	if err != nil {
		return page.ItemID{}, TupleHeader{}, err
	}
	defer b.Release()
	b.RLock()
	defer b.RUnlock()
	id := b.Page().Item(tid.Off)
	if id.State != page.LPNormal {
		return id, TupleHeader{}, nil
	}
	_, h, _, err := tupleAt(b.Page(), tid.Off)
	if err != nil {
		return id, h, fmt.Errorf("tuple %d/%d of relation %d: %w", tid.Block, tid.Off, r.node, err)
	}
	return id, h, nil
}

// Examine returns the header and a copy of the data of the tuple at tid,
// whatever its visibility; ok is false when tid names no tuple (past the
// end, unused or dead slot).
func (r *Rel) Examine(tid page.TID, s *buffer.Strategy) (TupleHeader, []byte, bool, error) {
	b, err := r.readTID(tid, s)
	if errors.Is(err, ErrNotFound) {
		return TupleHeader{}, nil, false, nil
	}
	if err != nil {
		return TupleHeader{}, nil, false, err
	}
	defer b.Release()
	b.RLock()
	defer b.RUnlock()
	_, h, data, err := tupleAt(b.Page(), tid.Off)
	if errors.Is(err, ErrNotFound) {
		return TupleHeader{}, nil, false, nil
	}
	if err != nil {
		return TupleHeader{}, nil, false, fmt.Errorf("tuple %d/%d of relation %d: %w", tid.Block, tid.Off, r.node, err)
	}
	return h, append([]byte(nil), data...), true, nil
}
