package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrTableInUse is returned by DropTable and TruncateTable when their
// context ends while open transactions still use the table (they wait for
// those transactions to end, as PostgreSQL's ACCESS EXCLUSIVE lock does).
var ErrTableInUse = errors.New("table is in use by open transactions")

// tableUses records which open transactions have used each table (read
// or written it), PostgreSQL's relation locks held to the end of the
// transaction, so that DROP TABLE and TRUNCATE wait for them. While such
// a DDL waits, a transaction that has not used the table yet waits before
// its first use (the DDL's lock request is queued ahead of it, as in
// PostgreSQL), so a stream of new transactions cannot starve the DDL; it
// then finds the table gone (or empty). The zero value is ready.
type tableUses struct {
	mu      sync.Mutex
	users   map[string]map[*Tx]struct{}
	ddl     map[string]int // DDL waiting for or holding the table
	owner   map[string]*Tx // the transaction whose own DDL holds the table (Tx.Truncate)
	changed chan struct{}  // closed (and replaced) at every change
}

// changedLocked returns the channel closed at the next change; u.mu held.
func (u *tableUses) changedLocked() <-chan struct{} {
	if u.changed == nil {
		u.changed = make(chan struct{})
	}
	return u.changed
}

// broadcastLocked wakes every waiter; u.mu held.
func (u *tableUses) broadcastLocked() {
	if u.changed != nil {
		close(u.changed)
		u.changed = nil
	}
}

// use records tx as a user of table, first waiting (until ctx is done)
// for a DDL of the table in progress when tx has not used it yet.
func (u *tableUses) use(ctx context.Context, tx *Tx, table string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	for {
		if _, ok := u.users[table][tx]; ok {
			return nil
		}
		if u.ddl[table] == 0 || u.owner[table] == tx {
			break
		}
		ch := u.changedLocked()
		u.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			u.mu.Lock()
			return fmt.Errorf("table %q: waiting for a DROP or TRUNCATE of it: %w", table, ctx.Err())
		}
		u.mu.Lock()
	}
	if u.users == nil {
		u.users = map[string]map[*Tx]struct{}{}
	}
	if u.users[table] == nil {
		u.users[table] = map[*Tx]struct{}{}
	}
	u.users[table][tx] = struct{}{}
	tx.tables = append(tx.tables, table)
	return nil
}

// done forgets tx's uses (it committed or rolled back).
func (u *tableUses) done(tx *Tx) {
	if len(tx.tables) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, table := range tx.tables {
		delete(u.users[table], tx)
		if len(u.users[table]) == 0 {
			delete(u.users, table)
		}
	}
	tx.tables = nil
	u.broadcastLocked()
}

// exclude registers a DDL of table and waits until no open transaction
// uses it (or ctx is done: ErrTableInUse, and the DDL is unregistered).
// On success the caller calls release once its DDL is over.
func (u *tableUses) exclude(ctx context.Context, table string) (release func(), err error) {
	return u.excludeFor(ctx, table, nil)
}

// excludeFor is exclude for a DDL of transaction self (nil: of none):
// self's own use of the table does not count, and until release self
// uses the table while the others wait.
func (u *tableUses) excludeFor(ctx context.Context, table string, self *Tx) (release func(), err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ddl == nil {
		u.ddl = map[string]int{}
	}
	u.ddl[table]++
	u.broadcastLocked() // a Tx.Truncate waiting for the vacuum lock checks ddlWaitsFor again
	release = func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.ddl[table]--; u.ddl[table] == 0 {
			delete(u.ddl, table)
		}
		if self != nil && u.owner[table] == self {
			delete(u.owner, table)
		}
		u.broadcastLocked()
	}
	others := func() int {
		n := len(u.users[table])
		if _, ok := u.users[table][self]; ok && self != nil {
			n--
		}
		return n
	}
	for others() > 0 {
		ch := u.changedLocked()
		u.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			u.mu.Lock()
			n := others()
			u.mu.Unlock()
			release()
			u.mu.Lock()
			return nil, fmt.Errorf("table %q: %d open transactions use it: %w (%w)", table, n, ErrTableInUse, ctx.Err())
		}
		u.mu.Lock()
	}
	if self != nil {
		if u.owner == nil {
			u.owner = map[string]*Tx{}
		}
		u.owner[table] = self
	}
	return release, nil
}

// ddlWaitsFor reports whether a DDL of table (exclude) waits for tx, a user of
// the table that does not hold it itself, and returns the channel closed at
// the next change.
func (u *tableUses) ddlWaitsFor(table string, tx *Tx) (bool, <-chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, uses := u.users[table][tx]
	return uses && u.ddl[table] > 0 && u.owner[table] != tx, u.changedLocked()
}

// count is the number of open transactions that have used table.
func (u *tableUses) count(table string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.users[table])
}

// waiting is the number of DDLs waiting for or holding table.
func (u *tableUses) waiting(table string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ddl[table]
}
