package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
)

// ErrTableInUse is returned by DropTable and TruncateTable when their
// context ends while open transactions still use the table (they wait for
// those transactions to end, as PostgreSQL's ACCESS EXCLUSIVE lock does).
var ErrTableInUse = errors.New("table is in use by open transactions")

// tableUses is the engine's table-level lock manager and its wait-for
// graph. It records which open transactions have used each table (read
// or written it), PostgreSQL's relation locks held to the end of the
// transaction, so that DROP TABLE and TRUNCATE wait for them. While such
// a DDL waits, a transaction that has not used the table yet waits before
// its first use (the DDL's lock request is queued ahead of it, as in
// PostgreSQL), so a stream of new transactions cannot starve the DDL; it
// then finds the table gone (or empty). It also holds each table's vacuum
// lock (lockVacuum).
//
// Every wait of a transaction or DDL on another goes through it (row and
// unique-key waits too, waitTx), recorded in waits: a waiting party (a
// waitNode) has edges to the parties it waits for, computed from the
// state at the time of the check (edgesLocked). A wait that would close a
// cycle is refused with ErrDeadlock before it starts; as the check and
// the recording of the wait happen under mu together, of the parties of
// a cycle exactly the one whose wait closed it is refused, and the others
// go on once it ends its transaction. A waiter checks again at each
// change it wakes for, so a cycle closed by a change of a holder is found
// too. The zero value is ready.
type tableUses struct {
	mu      sync.Mutex
	users   map[string]map[*Tx]struct{}
	ddl     map[string]waitNode // the DDL waiting for or holding each table (excludeFor)
	owner   map[string]*Tx      // the transaction whose own DDL holds the table (Tx.Truncate)
	vacuum  map[string]waitNode // each table's vacuum lock's holder (lockVacuum)
	waits   map[waitNode]waitRec
	changed chan struct{} // closed (and replaced) at every change

	deadlocks atomic.Int64 // waits refused with ErrDeadlock
}

// waitNode is a party of the wait-for graph: a transaction (xid) or a
// vacuum or DDL that runs outside any transaction (op).
type waitNode struct {
	xid txn.XID
	op  *lockOp
}

// lockOp is a vacuum, DROP TABLE or TRUNCATE run outside a transaction, as
// the wait-for graph names it.
type lockOp struct {
	what string // "DROP TABLE \"a\"", say
}

// txNode is tx's node.
func txNode(tx *Tx) waitNode { return waitNode{xid: tx.t.XID()} }

// opNode returns a node of a new vacuum or DDL, named what.
func opNode(what string) waitNode { return waitNode{op: &lockOp{what: what}} }

func (n waitNode) String() string {
	if n.op != nil {
		return n.op.what
	}
	return fmt.Sprintf("transaction %d", n.xid)
}

// waitRec is what a waiting node waits for.
type waitRec struct {
	kind  waitKind
	table string  // waitDDL, waitVacuum, waitUsers
	xid   txn.XID // waitXID
}

type waitKind uint8

const (
	waitDDL    waitKind = iota + 1 // for the DDL of table to end (a first use, use)
	waitVacuum                     // for the holder of table's vacuum lock (lockVacuum)
	waitUsers                      // for the table's other users to end (excludeFor)
	waitXID                        // for transaction xid to end (a row or unique key, waitTx)
)

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

// edgesLocked is the parties node n waits for when it waits for w; u.mu held.
func (u *tableUses) edgesLocked(n waitNode, w waitRec) []waitNode {
	switch w.kind {
	case waitDDL:
		if d, ok := u.ddl[w.table]; ok && d != n {
			return []waitNode{d}
		}
	case waitVacuum:
		if h, ok := u.vacuum[w.table]; ok && h != n {
			return []waitNode{h}
		}
	case waitUsers:
		var out []waitNode
		for tx := range u.users[w.table] {
			if m := txNode(tx); m != n {
				out = append(out, m)
			}
		}
		return out
	case waitXID:
		return []waitNode{{xid: w.xid}}
	}
	return nil
}

// cycleLocked returns the path of a cycle that n's waiting for w would
// close (n, the party it waits for, ..., the party that waits for n), or
// nil; u.mu held.
func (u *tableUses) cycleLocked(n waitNode, w waitRec) []waitNode {
	seen := map[waitNode]bool{n: true}
	var path []waitNode
	var walk func(m waitNode) bool
	walk = func(m waitNode) bool {
		path = append(path, m)
		if m == n {
			return true
		}
		if !seen[m] {
			seen[m] = true
			if mw, ok := u.waits[m]; ok {
				for _, next := range u.edgesLocked(m, mw) {
					if walk(next) {
						return true
					}
				}
			}
		}
		path = path[:len(path)-1]
		return false
	}
	for _, next := range u.edgesLocked(n, w) {
		if walk(next) {
			return append([]waitNode{n}, path...)
		}
	}
	return nil
}

// deadlockLocked counts a deadlock and describes the cycle of path
// (cycleLocked's, for n's wait w) as ErrDeadlock, each wait with its
// table; u.mu held.
func (u *tableUses) deadlockLocked(path []waitNode, w waitRec) error {
	u.deadlocks.Add(1)
	var b strings.Builder
	for i, n := range path[:len(path)-1] {
		if i > 0 {
			b.WriteString(", which ")
			w = u.waits[n]
		} else {
			b.WriteString(n.String() + " ")
		}
		next := path[i+1]
		switch w.kind {
		case waitDDL:
			fmt.Fprintf(&b, "waits to use table %q behind %s", w.table, next)
		case waitVacuum:
			fmt.Fprintf(&b, "waits to lock table %q, held by %s", w.table, next)
		case waitUsers:
			fmt.Fprintf(&b, "waits for the transactions that used table %q, among them %s", w.table, next)
		default:
			fmt.Fprintf(&b, "waits for a row or unique key of %s", next)
		}
	}
	return fmt.Errorf("%s: %w", b.String(), ErrDeadlock)
}

// awaitLocked makes n wait for w until ready holds (both checked under
// u.mu, which is held on entry and on return and let go while waiting),
// refusing a wait that closes a cycle with ErrDeadlock and returning
// ctx's error when ctx ends first.
func (u *tableUses) awaitLocked(ctx context.Context, n waitNode, w waitRec, ready func() bool) error {
	if u.waits == nil {
		u.waits = map[waitNode]waitRec{}
	}
	for !ready() {
		if path := u.cycleLocked(n, w); path != nil {
			return u.deadlockLocked(path, w)
		}
		u.waits[n] = w
		ch := u.changedLocked()
		u.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		u.mu.Lock()
		delete(u.waits, n)
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// waitTx makes transaction tx wait for transaction x by wait (a row or
// unique-key wait, txn.Manager.Wait), first refusing with ErrDeadlock a
// wait that would close a cycle through the table-level waits.
func (u *tableUses) waitTx(tx *Tx, x txn.XID, wait func() error) error {
	n, w := txNode(tx), waitRec{kind: waitXID, xid: x}
	u.mu.Lock()
	if path := u.cycleLocked(n, w); path != nil {
		err := u.deadlockLocked(path, w)
		u.mu.Unlock()
		return err
	}
	if u.waits == nil {
		u.waits = map[waitNode]waitRec{}
	}
	u.waits[n] = w
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		delete(u.waits, n)
		u.mu.Unlock()
	}()
	return wait()
}

// use records tx as a user of table, first waiting (until ctx is done)
// for a DDL of the table in progress when tx has not used it yet.
func (u *tableUses) use(ctx context.Context, tx *Tx, table string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.users[table][tx]; ok {
		return nil
	}
	ready := func() bool {
		_, held := u.ddl[table]
		return !held || u.owner[table] == tx
	}
	if err := u.awaitLocked(ctx, txNode(tx), waitRec{kind: waitDDL, table: table}, ready); err != nil {
		if errors.Is(err, ErrDeadlock) {
			return err
		}
		return fmt.Errorf("table %q: waiting for a DROP or TRUNCATE of it: %w", table, err)
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

// lockVacuum takes table's vacuum lock for who: a lock that every lazy
// vacuum and VACUUM FULL of the table holds from before its Target is
// built until it returns, so two never work on one table at once, and
// that DROP, TRUNCATE and a transaction's TRUNCATE hold too. It waits for
// the holder (until ctx is done), or with noWait fails at once with
// ok false. A wait that would close a cycle fails with ErrDeadlock. The
// caller calls unlock once it is done.
func (u *tableUses) lockVacuum(ctx context.Context, table string, who waitNode, noWait bool) (unlock func(), ok bool, err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, held := u.vacuum[table]
	if held && noWait {
		return nil, false, nil
	}
	ready := func() bool { _, held := u.vacuum[table]; return !held }
	if err := u.awaitLocked(ctx, who, waitRec{kind: waitVacuum, table: table}, ready); err != nil {
		if errors.Is(err, ErrDeadlock) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("table %q: waiting for a vacuum, DROP or TRUNCATE of it: %w", table, err)
	}
	if u.vacuum == nil {
		u.vacuum = map[string]waitNode{}
	}
	u.vacuum[table] = who
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			defer u.mu.Unlock()
			delete(u.vacuum, table)
			u.broadcastLocked()
		})
	}, true, nil
}

// exclude registers a DDL (who, holding table's vacuum lock) of table and
// waits until no open transaction uses it (or ctx is done: ErrTableInUse,
// and the DDL is unregistered; or the wait would close a cycle:
// ErrDeadlock). On success the caller calls release once its DDL is over.
func (u *tableUses) exclude(ctx context.Context, table string, who waitNode) (release func(), err error) {
	return u.excludeFor(ctx, table, who, nil)
}

// excludeFor is exclude for a DDL of transaction self (nil: of none):
// self's own use of the table does not count, and until release self
// uses the table while the others wait. The caller holds the table's
// vacuum lock, so one DDL at a time registers for a table.
func (u *tableUses) excludeFor(ctx context.Context, table string, who waitNode, self *Tx) (release func(), err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ddl == nil {
		u.ddl = map[string]waitNode{}
	}
	u.ddl[table] = who
	u.broadcastLocked() // first uses of the table wait from now on
	release = func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		delete(u.ddl, table)
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
	if err := u.awaitLocked(ctx, who, waitRec{kind: waitUsers, table: table}, func() bool { return others() == 0 }); err != nil {
		n := others()
		u.mu.Unlock()
		release()
		u.mu.Lock()
		if errors.Is(err, ErrDeadlock) {
			return nil, err
		}
		return nil, fmt.Errorf("table %q: %d open transactions use it: %w (%w)", table, n, ErrTableInUse, err)
	}
	if self != nil {
		if u.owner == nil {
			u.owner = map[string]*Tx{}
		}
		u.owner[table] = self
	}
	return release, nil
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
	if _, ok := u.ddl[table]; ok {
		return 1
	}
	return 0
}
