package engine

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
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

// UniqueViolationError names the unique index and the key, as
// PostgreSQL's message does. It matches ErrUniqueViolation.
type UniqueViolationError struct {
	Index  string
	Column string
	Key    int64
}

func (e *UniqueViolationError) Error() string {
	return fmt.Sprintf("%v %q: Key (%s)=(%d) already exists", ErrUniqueViolation, e.Index, e.Column, e.Key)
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

func (u *uniqueLocks) stripe(index uint32, key int64) int {
	u.once.Do(func() { u.seed = maphash.MakeSeed() })
	var h maphash.Hash
	h.SetSeed(u.seed)
	var b [12]byte
	for i := range 4 {
		b[i] = byte(index >> (8 * i))
	}
	for i := range 8 {
		b[4+i] = byte(uint64(key) >> (8 * i))
	}
	_, _ = h.Write(b[:])
	return int(h.Sum64() % uint64(len(u.stripes)))
}

// uniqueKey is one key a write claims in one unique index.
type uniqueKey struct {
	ix  *catalog.Index
	col int
	key int64
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
		col := t.ColumnIndex(ix.Column)
		k, ok := row.AsInt64(vals[col])
		if !ok {
			continue // NULL never conflicts
		}
		keys = append(keys, uniqueKey{ix: ix, col: col, key: k})
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
		var tids []page.TID
		err := tx.db.indexTree(k.ix.Rel).Range(k.key, k.key, nil, func(_ int64, tid page.TID) error {
			tids = append(tids, tid)
			return nil
		})
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
			if v, ok, err := indexKey(t.Columns, data, k.col); err != nil || !ok || v != k.key {
				continue // not this key's version (or damaged: Check reports it)
			}
			switch c := h.ClaimOf(&hdr, tx.t.XID()); c.State {
			case heap.ClaimLive:
				release()
				return nil, 0, &UniqueViolationError{Index: k.ix.Name, Column: k.ix.Column, Key: k.key}
			case heap.ClaimPending:
				release()
				return nil, c.Xid, nil
			}
		}
	}
	return release, 0, nil
}
