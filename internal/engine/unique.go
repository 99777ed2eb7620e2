package engine

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// ErrUniqueViolation is returned when a write (or a unique index or primary key being
// built) would leave two live rows with the same key in a unique index
// (PostgreSQL 23505). The error is a *UniqueViolationError.
var ErrUniqueViolation = errors.New("duplicate key value violates unique constraint")

// ErrDeadlock is returned when a row or key wait would close a cycle of waiting
// transactions; exactly one transaction of the cycle gets it and should
// roll back (PostgreSQL 40P01).
var ErrDeadlock = txn.ErrDeadlock

// UniqueViolationError names the unique index, its key columns and the
// key, as PostgreSQL's message does. It matches ErrUniqueViolation.
type UniqueViolationError struct {
	Index   string
	Columns []string
	Key     []any // one Go value per key column (package row's types)
}

func (e *UniqueViolationError) Error() string {
	return fmt.Sprintf("%v %q: Key (%s)=(%s) already exists", ErrUniqueViolation, e.Index,
		strings.Join(e.Columns, ", "), row.FormatValues(e.Key))
}

// uniqueViolation is the error for key (of cols) in ix.
func uniqueViolation(ix *catalog.Index, cols []row.Column, key []byte) error {
	vals, err := row.DecodeKey(cols, key)
	if err != nil {
		vals = []any{key}
	}
	return &UniqueViolationError{Index: ix.Name, Columns: slices.Clone(ix.Columns), Key: vals}
}

// Unwrap makes errors.Is(err, ErrUniqueViolation) true.
func (e *UniqueViolationError) Unwrap() error { return ErrUniqueViolation }

// uniqueLocks serialise, per (index, key) stripe, the check of a unique
// key and the insertion of the row and index entry that claim it, so two
// writers of one key never both pass the check: the second finds the
// first's entry, in progress, and waits for its transaction (as
// PostgreSQL's _bt_check_unique waits on the inserter's xid).
type uniqueLocks struct {
	seed    maphash.Seed
	once    sync.Once
	stripes [256]sync.Mutex
}

func (u *uniqueLocks) stripe(index uint32, key []byte) int {
	u.once.Do(func() { u.seed = maphash.MakeSeed() })
	var h maphash.Hash
	h.SetSeed(u.seed)
	var b [4]byte
	for i := range 4 {
		b[i] = byte(index >> (8 * i))
	}
	_, _ = h.Write(b[:])
	_, _ = h.Write(key)
	return int(h.Sum64() % uint64(len(u.stripes)))
}

// uniqueKey is one key a write claims in one unique index.
type uniqueKey struct {
	ix   *catalog.Index
	pos  []int        // key column positions in the table
	cols []row.Column // key columns
	key  []byte
}

// claimUnique checks the keys vals claims in t's unique indexes against
// the versions already there (live or pending: heap.ClaimOf), skipping
// the version at replaced (an Update's old version). It returns with the
// keys' stripe locks held and a release func when the write may go
// ahead; with no lock held and the xid to wait for when a pending version
// holds a key; or with a *UniqueViolationError.
func (tx *Tx) claimUnique(t *catalog.Table, vals []any, replaced page.TID) (release func(), wait txn.XID, err error) {
	var keys []uniqueKey
	for i := range t.Indexes {
		ix := &t.Indexes[i]
		if !ix.Unique {
			continue
		}
		k, ok, err := keyOfValues(t, ix, vals)
		if err != nil {
			return nil, 0, err
		}
		cols := t.KeyColumns(ix)
		if !ok || row.KeyHasNull(cols, k) {
			continue // NULL never conflicts
		}
		keys = append(keys, uniqueKey{ix: ix, pos: t.KeyPositions(ix), cols: cols, key: k})
	}
	if len(keys) == 0 {
		return func() {}, 0, nil
	}
	u := &tx.db.uniq
	var stripes []int
	for _, k := range keys {
		stripes = append(stripes, u.stripe(k.ix.OID, k.key))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, s := range stripes {
		u.stripes[s].Lock()
	}
	release = func() {
		for _, s := range slices.Backward(stripes) {
			u.stripes[s].Unlock()
		}
	}
	h := tx.db.heapRel(t.Rel)
	for _, k := range keys {
		tids, err := tx.db.indexTree(k.ix.Rel).Lookup(k.key, nil)
		if err != nil {
			release()
			return nil, 0, fmt.Errorf("index %q: %w", k.ix.Name, err)
		}
		for _, tid := range tids {
			if tid == replaced {
				continue
			}
			hdr, data, ok, err := h.Examine(tid, nil)
			if err != nil {
				release()
				return nil, 0, fmt.Errorf("table %q at %v: %w", t.Name, tid, err)
			}
			if !ok {
				continue
			}
			if v, ok, err := row.KeyOf(t.Columns, data, k.pos); err != nil || !ok || !bytes.Equal(v, k.key) {
				continue // not this key's version (or damaged: Check reports it)
			}
			switch c := h.ClaimOf(&hdr, tx.t.XID()); c.State {
			case heap.ClaimLive:
				release()
				return nil, 0, uniqueViolation(k.ix, k.cols, k.key)
			case heap.ClaimPending:
				release()
				return nil, c.Xid, nil
			}
		}
	}
	return release, 0, nil
}
