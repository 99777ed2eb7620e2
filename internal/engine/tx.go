package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Tx is a transaction: one snapshot for its whole life (repeatable read)
// unless NewSnapshot takes a fresh one (READ COMMITTED, per statement), its
// own changes visible to itself. A Tx belongs to one goroutine. Commit
// returns once the commit is durable; Rollback discards every change. A
// Tx whose write failed half-way (row stored, index entry not) can only be
// rolled back: Commit aborts it and returns the first failure.
type Tx struct {
	db     *DB
	t      *txn.Txn
	ctx    context.Context // cancels the transaction's waits (BeginTx)
	done   bool
	failed error
	tables []string     // tables used, until the end (DB.uses)
	truncs []truncation // tables truncated, held until the end (Truncate)
}

// Found is one row an index lookup returned.
type Found struct {
	TID page.TID
	Row []any
}

// Begin starts a transaction.
func (db *DB) Begin() (*Tx, error) { return db.BeginTx(context.Background()) }

// BeginTx starts a transaction whose waits (for the inserter of a unique
// key, say) end with ctx's error when ctx is done.
func (db *DB) BeginTx(ctx context.Context) (*Tx, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return nil, ErrClosed
	}
	return &Tx{db: db, t: db.txns.Begin(), ctx: ctx}, nil
}

// XID is the transaction's id.
func (tx *Tx) XID() uint64 { return uint64(tx.t.XID()) }

// NewSnapshot makes the transaction see, from now on, every transaction
// committed before this call (its own changes stay visible): a server
// calls it before each statement of a READ COMMITTED transaction.
func (tx *Tx) NewSnapshot() { tx.db.txns.Resnapshot(tx.t) }

// enter takes, for one operation, the shared lock of table (if named:
// VACUUM FULL holds it exclusively while it rewrites the table) and then the
// DB's shared lock, and checks that both the DB and the transaction are
// usable. The caller defers the returned unlock.
func (tx *Tx) enter(table string) (func(), error) {
	var tl *sync.RWMutex
	if table != "" && !tx.done {
		if err := tx.db.uses.use(tx.ctx, tx, table); err != nil {
			return nil, err
		}
	}
	if table != "" {
		tl = tx.db.tableLock(table)
		tl.RLock()
	}
	unlock := func() {
		tx.db.mu.RUnlock()
		if tl != nil {
			tl.RUnlock()
		}
	}
	tx.db.mu.RLock()
	if tx.db.closed.Load() {
		unlock()
		return nil, ErrClosed
	}
	if tx.done {
		unlock()
		return nil, ErrTxDone
	}
	if err := tx.t.Cancelled(); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// Insert stores a new row in table and adds its index entries.
func (tx *Tx) Insert(table string, vals []any) (page.TID, error) {
	return tx.insert(table, vals, nil)
}

// CopyRing is one COPY FROM statement's ring of heap buffers: the heap pages its rows
// fill go through a 16 MiB BulkWrite ring of the pool (at most an eighth of it), written
// out as the ring laps, as PostgreSQL's COPY fills its heap through a BulkInsertState
// (BAS_BULKWRITE). Without it a load larger than the pool filled every frame with its own
// pages at the maximum usage count (one pin per row), so the clock sweep that made room
// afterwards could tell no page from another. It belongs to one statement and so to one
// goroutine (buffer.Strategy); index entries are inserted through the shared pool.
type CopyRing struct {
	s *buffer.Strategy
}

// NewCopyRing returns a ring for one COPY FROM statement's inserts (InsertThrough).
func (tx *Tx) NewCopyRing() *CopyRing {
	return &CopyRing{s: tx.db.pool.NewStrategy(buffer.BulkWrite, 0, nil)}
}

// InsertThrough is Insert with the heap page filled through ring (nil: as Insert).
func (tx *Tx) InsertThrough(ring *CopyRing, table string, vals []any) (page.TID, error) {
	var s *buffer.Strategy
	if ring != nil {
		s = ring.s
	}
	return tx.insert(table, vals, s)
}

func (tx *Tx) insert(table string, vals []any, s *buffer.Strategy) (page.TID, error) {
	unlock, err := tx.enter(table)
	if err != nil {
		return page.TID{}, err
	}
	defer func() { unlock() }()
	if err := tx.db.writable(); err != nil {
		return page.TID{}, err
	}
	t, err := tx.db.cat.Table(table)
	if err != nil {
		return page.TID{}, err
	}
	data, err := row.Encode(t.Columns, vals)
	if err != nil {
		return page.TID{}, fmt.Errorf("insert into %q: %w", table, err)
	}
	if _, err := indexKeys(t, vals); err != nil { // before the row is stored
		return page.TID{}, fmt.Errorf("insert into %q: %w", table, err)
	}
	release, err := tx.claimUniqueWaiting(&t, &unlock, vals, page.TID{})
	if err != nil {
		return page.TID{}, fmt.Errorf("insert into %q: %w", table, err)
	}
	defer release()
	tid, err := tx.db.heapRel(t.Rel).Insert(tx.t, data, s)
	if err != nil {
		return page.TID{}, fmt.Errorf("insert into %q: %w", table, err)
	}
	if err := tx.addIndexEntries(t, vals, tid); err != nil {
		return page.TID{}, fmt.Errorf("insert into %q: %w", table, err)
	}
	return tid, nil
}

// claimUniqueWaiting is claimUnique, waiting for each pending holder of
// a key to end (with the operation's locks released: unlock is replaced
// by the new locks' unlock, and *t by the table as now catalogued) and
// checking again, until the write may go ahead (release frees the key
// locks once its index entries are in) or fails.
func (tx *Tx) claimUniqueWaiting(t **catalog.Table, unlock *func(), vals []any, replaced page.TID) (func(), error) {
	for {
		release, wait, err := tx.claimUnique(*t, vals, replaced)
		if err != nil || wait == 0 {
			return release, err
		}
		name, rel := (*t).Name, (*t).Rel
		(*unlock)()
		*unlock = func() {}
		if err := tx.waitFor(wait); err != nil {
			return nil, err
		}
		u, err := tx.enter(name)
		if err != nil {
			return nil, err
		}
		*unlock = u
		if *t, err = tx.db.cat.Table(name); err != nil {
			return nil, err
		}
		if replaced != (page.TID{}) && (*t).Rel != rel {
			return nil, fmt.Errorf("table %q: %w", name, ErrTableRewritten)
		}
	}
}

// indexKeys returns the key of vals in each index of t (nil where the row
// has no entry: every key column NULL), or the first key that cannot be
// indexed (ErrKeyTooLong), so that a write can refuse it before storing
// the row.
func indexKeys(t *catalog.Table, vals []any) ([][]byte, error) {
	keys := make([][]byte, len(t.Indexes))
	for i := range t.Indexes {
		k, ok, err := keyOfValues(t, &t.Indexes[i], vals)
		if err != nil {
			return nil, err
		}
		if ok {
			keys[i] = k
		}
	}
	return keys, nil
}

// addIndexEntries inserts (key, tid) into every index of t. A failure
// poisons the transaction: the row is stored but not fully indexed.
func (tx *Tx) addIndexEntries(t *catalog.Table, vals []any, tid page.TID) error {
	keys, err := indexKeys(t, vals)
	if err != nil {
		tx.failed = err
		return err
	}
	for i := range t.Indexes {
		ix := &t.Indexes[i]
		if keys[i] == nil {
			continue // every key column NULL: no entry
		}
		if err := tx.db.indexTree(ix.Rel).Insert(keys[i], tid, nil); err != nil {
			tx.failed = fmt.Errorf("index %q: %w", ix.Name, err)
			return tx.failed
		}
	}
	return nil
}

// changedByOther reports whether the version at tid was deleted or updated
// by another transaction that committed or is still running: an Update of
// it then fails with ErrConflict (the first updater wins), whatever a
// unique check found.
func (tx *Tx) changedByOther(t *catalog.Table, tid page.TID) (bool, error) {
	h := tx.db.heapRel(t.Rel)
	hdr, _, ok, err := h.Examine(tid, nil)
	if err != nil || !ok {
		return false, err
	}
	self := tx.t.XID()
	if hdr.Xmax == txn.InvalidXID || hdr.Infomask&heap.XmaxInvalid != 0 || hdr.Xmax == self {
		return false, nil
	}
	c := h.ClaimOf(&hdr, self)
	return c.State == heap.ClaimGone || (c.State == heap.ClaimPending && c.Xid == hdr.Xmax), nil
}

// Update replaces the row at tid with vals: a new version (at the returned
// TID) with new index entries; the old version and its index entries stay
// until vacuum removes them. ErrNotFound if tid holds no row this
// transaction sees, ErrConflict if another transaction changed it.
func (tx *Tx) Update(table string, tid page.TID, vals []any) (page.TID, error) {
	unlock, err := tx.enter(table)
	if err != nil {
		return page.TID{}, err
	}
	defer func() { unlock() }()
	if err := tx.db.writable(); err != nil {
		return page.TID{}, err
	}
	t, err := tx.db.cat.Table(table)
	if err != nil {
		return page.TID{}, err
	}
	data, err := row.Encode(t.Columns, vals)
	if err != nil {
		return page.TID{}, fmt.Errorf("update %q: %w", table, err)
	}
	if _, err := indexKeys(t, vals); err != nil {
		return page.TID{}, fmt.Errorf("update %q: %w", table, err)
	}
	// The first updater wins: a row another transaction changed is
	// ErrConflict, before and after the unique check (whose wait for that
	// transaction would otherwise find its new version holding the key).
	conflict := func() error {
		if changed, err := tx.changedByOther(t, tid); err != nil || changed {
			return errors.Join(err, fmt.Errorf("update %q at %v: changed by another transaction: %w", table, tid, ErrConflict))
		}
		return nil
	}
	if err := conflict(); err != nil {
		return page.TID{}, err
	}
	release, err := tx.claimUniqueWaiting(&t, &unlock, vals, tid)
	if errors.Is(err, ErrUniqueViolation) {
		if cerr := conflict(); cerr != nil {
			return page.TID{}, cerr
		}
	}
	if err != nil {
		return page.TID{}, fmt.Errorf("update %q: %w", table, err)
	}
	defer release()
	ntid, err := tx.db.heapRel(t.Rel).Update(tx.t, tid, data, nil)
	if err != nil {
		return page.TID{}, fmt.Errorf("update %q at %v: %w", table, tid, err)
	}
	if err := tx.addIndexEntries(t, vals, ntid); err != nil {
		return page.TID{}, fmt.Errorf("update %q: %w", table, err)
	}
	return ntid, nil
}

// Delete deletes the row at tid (ErrNotFound, ErrConflict as for Update).
func (tx *Tx) Delete(table string, tid page.TID) error {
	unlock, err := tx.enter(table)
	if err != nil {
		return err
	}
	defer unlock()
	if err := tx.db.writable(); err != nil {
		return err
	}
	t, err := tx.db.cat.Table(table)
	if err != nil {
		return err
	}
	if err := tx.db.heapRel(t.Rel).Delete(tx.t, tid, nil); err != nil {
		return fmt.Errorf("delete from %q at %v: %w", table, tid, err)
	}
	return nil
}

// Get returns the row at tid if this transaction sees it.
func (tx *Tx) Get(table string, tid page.TID) ([]any, bool, error) {
	unlock, err := tx.enter(table)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	t, err := tx.db.cat.Table(table)
	if err != nil {
		return nil, false, err
	}
	return tx.fetch(t, tid)
}

func (tx *Tx) fetch(t *catalog.Table, tid page.TID) ([]any, bool, error) {
	return tx.fetchWith(t, tid, nil)
}

// fetchWith is fetch reading the page through s.
func (tx *Tx) fetchWith(t *catalog.Table, tid page.TID, s *buffer.Strategy) ([]any, bool, error) {
	data, ok, err := tx.db.heapRel(t.Rel).Fetch(tx.t.Snapshot(), tid, s)
	if err != nil {
		return nil, false, fmt.Errorf("get from %q at %v: %w", t.Name, tid, err)
	}
	if !ok {
		return nil, false, nil
	}
	vals, err := row.Decode(t.Columns, data)
	if err != nil {
		return nil, false, fmt.Errorf("table %q at %v: %w", t.Name, tid, err)
	}
	return vals, true, nil
}

// IndexLookup returns the rows visible to this transaction whose key in
// index equals key: one value per key column, or fewer for a prefix of
// the columns (every row whose leading key columns equal them). Values are
// Go values as for Insert (any Go integer for an integer column). A NULL
// value matches nothing. Each candidate from the index is rechecked
// against the heap (visibility and key), since index entries of dead and
// updated versions stay until vacuum.
func (tx *Tx) IndexLookup(index string, key ...any) ([]Found, error) {
	var out []Found
	err := tx.IndexRange(index, key, key, func(f Found) error {
		out = append(out, f)
		return nil
	})
	return out, err
}

// IndexRange calls fn, in key order, for every row visible to this
// transaction whose key in index is in [lo, hi]. Each bound is a prefix of
// the key columns' values (as IndexLookup takes them), compared as
// PostgreSQL compares row values with NULLS LAST: a shorter hi includes
// every key that begins with it; a nil (or empty) bound is unbounded; a
// bound holding NULL matches nothing. fn's error stops the scan and is
// returned. fn runs with no engine lock held, so it may use the
// transaction (update the rows it is given, say).
func (tx *Tx) IndexRange(index string, lo, hi []any, fn func(Found) error) error {
	table, err := tx.db.indexTable(index)
	if err != nil {
		return err
	}
	unlock, err := tx.enter(table)
	if err != nil {
		return err
	}
	defer func() { unlock() }()
	t, ix, err := tx.db.cat.Index(index)
	if err != nil {
		return err
	}
	var loKey, hiKey []byte
	if len(lo) > 0 {
		k, ok, err := lookupKey(t, ix, lo)
		if err != nil || !ok {
			return err
		}
		loKey = k
	}
	if len(hi) > 0 {
		k, ok, err := lookupKey(t, ix, hi)
		if err != nil || !ok {
			return err
		}
		hiKey = row.KeyPrefixEnd(k)
	}
	pos := t.KeyPositions(ix)
	// Collect the entries first: heap pages are read after the index scan
	// has released its pages, never while holding an index page lock.
	var entries []btree.Entry
	err = tx.db.indexTree(ix.Rel).Range(loKey, hiKey, nil, func(k []byte, tid page.TID) error {
		entries = append(entries, btree.Entry{Key: k, TID: tid})
		return nil
	})
	if err != nil {
		return fmt.Errorf("index %q: %w", index, err)
	}
	if !slices.IsSortedFunc(entries, btree.Compare) { // a split between two page visits
		slices.SortStableFunc(entries, btree.Compare)
	}
	entries = slices.CompactFunc(entries, func(a, b btree.Entry) bool { return btree.Compare(a, b) == 0 })
	// One pin for a run of entries on one heap page (most are dead versions
	// of one row), dropped before each callback.
	f := tx.db.heapRel(t.Rel).Fetcher(nil)
	defer f.Release()
	for _, e := range entries {
		data, ok, err := f.Fetch(tx.t.Snapshot(), e.TID)
		if err != nil {
			return fmt.Errorf("get from %q at %v: %w", t.Name, e.TID, err)
		}
		if !ok {
			continue
		}
		if k, ok, err := row.KeyOf(t.Columns, data, pos); err != nil || !ok || !bytes.Equal(k, e.Key) {
			if err != nil {
				return fmt.Errorf("table %q at %v: %w", t.Name, e.TID, err)
			}
			continue // the visible version's key is not this entry's
		}
		vals, err := row.Decode(t.Columns, data)
		if err != nil {
			return fmt.Errorf("table %q at %v: %w", t.Name, e.TID, err)
		}
		f.Release()
		if err := tx.callOut(t, &unlock, func() error { return fn(Found{TID: e.TID, Row: vals}) }); err != nil {
			return err
		}
	}
	return tx.t.Cancelled()
}

// callOut runs a caller's callback with the operation's locks released,
// so that the callback may use the transaction and the DB freely (nested
// shared locks could deadlock against a waiting DDL or VACUUM FULL), then
// takes them again. A table rewritten meanwhile (VACUUM FULL: every TID
// changed) ends the operation with ErrTableRewritten.
func (tx *Tx) callOut(t *catalog.Table, unlock *func(), f func() error) error {
	(*unlock)()
	*unlock = func() {}
	if err := f(); err != nil {
		return err
	}
	u, err := tx.enter(t.Name)
	if err != nil {
		return err
	}
	*unlock = u
	now, err := tx.db.cat.Table(t.Name)
	if err != nil {
		return err
	}
	if now.Rel != t.Rel {
		return fmt.Errorf("table %q: %w", t.Name, ErrTableRewritten)
	}
	return tx.t.Cancelled()
}

// Scan calls fn for every row of table visible to this transaction, in
// physical order. fn's error stops the scan and is returned. fn runs with
// no engine lock held, so it may use the transaction (update or delete the
// row it is given, say); rows it inserts may or may not be seen.
func (tx *Tx) Scan(table string, fn func(tid page.TID, row []any) error) error {
	return tx.ScanContext(context.Background(), table, fn)
}

// ScanContext is Scan with cancellation.
func (tx *Tx) ScanContext(ctx context.Context, table string, fn func(tid page.TID, row []any) error) error {
	unlock, err := tx.enter(table)
	if err != nil {
		return err
	}
	defer func() { unlock() }()
	t, err := tx.db.cat.Table(table)
	if err != nil {
		return err
	}
	err = tx.db.heapRel(t.Rel).Scan(ctx, tx.t.Snapshot(), nil, func(tid page.TID, data []byte) error {
		vals, err := row.Decode(t.Columns, data)
		if err != nil {
			return fmt.Errorf("table %q at %v: %w", t.Name, tid, err)
		}
		return tx.callOut(t, &unlock, func() error { return fn(tid, vals) })
	})
	if err == nil {
		// A standby's replay may have pruned a page this scan read after it
		// cancelled the transaction: what it returned is not its snapshot's.
		err = tx.t.Cancelled()
	}
	return err
}

// Commit makes the transaction's changes durable and visible. If a write
// failed half-way the transaction is rolled back instead and the failure
// returned.
func (tx *Tx) Commit() error {
	unlock, err := tx.enter("")
	if err != nil {
		return err
	}
	committed := false
	defer func() { tx.endTruncations(committed) }() // after the unlock below
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	tx.done = true
	defer tx.db.uses.done(tx)
	if tx.failed == nil && tx.t.Written() {
		tx.failed = tx.db.writable()
	}
	if tx.failed != nil {
		if err := tx.db.txns.Abort(tx.t, nil); err != nil {
			return errors.Join(fmt.Errorf("commit refused, rolled back: %w", tx.failed), err)
		}
		return fmt.Errorf("commit refused, rolled back: %w", tx.failed)
	}
	if err := tx.db.txns.Commit(tx.t, &tx.db.usage); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	committed = true
	tx.db.maybeCheckpoint()
	if w := tx.db.commitWait.Load(); w != nil && tx.t.Written() {
		// The commit record is flushed: wait (outside the DB's locks) for what
		// SetCommitWait asks, such as a synchronous standby's flush of it.
		unlock()
		locked = false
		if err := (*w)(tx.ctx, tx.db.log.FlushedLSN()); err != nil {
			return fmt.Errorf("%w: %w", ErrCommittedLocally, err)
		}
	}
	return nil
}

// ErrCommittedLocally is wrapped by Commit when the transaction is durable
// and visible here but the wait SetCommitWait installed failed (canceled).
var ErrCommittedLocally = errors.New("the transaction has already committed locally, but the wait for its replication ended")

// SetCommitWait makes every Commit of a transaction that wrote anything wait,
// after its commit record is flushed and before it returns, for wait(ctx,
// lsn) with the transaction's context and an LSN at or past its commit
// record (synchronous replication); nil removes it.
func (db *DB) SetCommitWait(wait func(ctx context.Context, lsn wal.LSN) error) {
	if wait == nil {
		db.commitWait.Store(nil)
		return
	}
	db.commitWait.Store(&wait)
}

// Rollback discards the transaction's changes. Rolling back a finished
// transaction returns ErrTxDone.
func (tx *Tx) Rollback() error {
	unlock, err := tx.enter("")
	if err != nil {
		return err
	}
	defer tx.endTruncations(false) // after the unlock below
	defer unlock()
	tx.done = true
	defer tx.db.uses.done(tx)
	if err := tx.db.txns.Abort(tx.t, nil); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpTID(a, b page.TID) int {
	if a.Block != b.Block {
		return cmpInt64(int64(a.Block), int64(b.Block))
	}
	return cmpInt64(int64(a.Off), int64(b.Off))
}
