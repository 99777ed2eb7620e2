package engine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// The crash and power-loss tests run a random writer and keep a ledger of
// what it committed. A transaction's ops are written to the ledger as
// "P" (pending) lines before Commit and confirmed by a "C" line after Commit
// returns; a transaction with P lines and no C line is the one in flight
// when the process died: it may or may not have committed, but all of its
// ops or none must be visible.

const workTable = "acc"

var workCols = []Column{{Name: "id", Type: Int8}, {Name: "val", Type: Bytea}, {Name: "n", Type: Int8}}

// rowVal is the committed state of one id.
type rowVal struct {
	N   int64
	Val string
}

type workOp struct {
	Kind byte // 'I' insert, 'U' update, 'D' delete
	ID   int64
	N    int64
	Val  string
}

func (o workOp) String() string {
	if o.Kind == 'D' {
		return fmt.Sprintf("D %d", o.ID)
	}
	return fmt.Sprintf("%c %d %d %s", o.Kind, o.ID, o.N, o.Val)
}

func parseOp(f []string) (workOp, error) {
	if len(f) < 2 || len(f[0]) != 1 {
		return workOp{}, fmt.Errorf("bad op %q", f)
	}
	o := workOp{Kind: f[0][0]}
	var err error
	if o.ID, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return o, err
	}
	if o.Kind == 'D' {
		return o, nil
	}
	if len(f) != 4 {
		return o, fmt.Errorf("bad op %q", f)
	}
	if o.N, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return o, err
	}
	o.Val = f[3]
	return o, nil
}

func applyOps(state map[int64]rowVal, ops []workOp) {
	for _, o := range ops {
		switch o.Kind {
		case 'I', 'U':
			state[o.ID] = rowVal{N: o.N, Val: o.Val}
		case 'D':
			delete(state, o.ID)
		}
	}
}

// ledgerTx is one transaction of the ledger, in ledger order.
type ledgerTx struct {
	Ops       []workOp
	Confirmed bool // its C line was written: Commit had returned
}

// parseLedger reads a ledger. A torn last line (no newline) is ignored.
func parseLedger(b []byte) ([]ledgerTx, error) {
	var txs []ledgerTx
	bySeq := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(b) > 0 && b[len(b)-1] != '\n' && len(lines) > 0 {
		lines = lines[:len(lines)-1]
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) < 2 {
			return nil, fmt.Errorf("bad ledger line %q", line)
		}
		switch f[0] {
		case "P":
			op, err := parseOp(f[2:])
			if err != nil {
				return nil, fmt.Errorf("ledger line %q: %w", line, err)
			}
			i, ok := bySeq[f[1]]
			if !ok || txs[i].Confirmed {
				i = len(txs)
				bySeq[f[1]] = i
				txs = append(txs, ledgerTx{})
			}
			txs[i].Ops = append(txs[i].Ops, op)
		case "C":
			i, ok := bySeq[f[1]]
			if !ok {
				return nil, fmt.Errorf("commit of unknown transaction %s", f[1])
			}
			txs[i].Confirmed = true
		default:
			return nil, fmt.Errorf("bad ledger line %q", line)
		}
	}
	return txs, nil
}

// unconfirmed counts the transactions whose fate the ledger does not know.
func unconfirmed(txs []ledgerTx) int {
	n := 0
	for _, tx := range txs {
		if !tx.Confirmed {
			n++
		}
	}
	return n
}

// stateWith replays the ledger in order: every confirmed transaction, and
// the unconfirmed ones whose bit is set in mask (bit i = the i-th
// unconfirmed transaction), each at its place in the ledger.
func stateWith(txs []ledgerTx, mask int) map[int64]rowVal {
	state := map[int64]rowVal{}
	u := 0
	for _, tx := range txs {
		if !tx.Confirmed {
			take := mask&(1<<u) != 0
			u++
			if !take {
				continue
			}
		}
		applyOps(state, tx.Ops)
	}
	return state
}

// writer performs random transactions against db and reports each one to
// its ledger callbacks. It keeps its own view of the rows (id -> TID).
type writer struct {
	db     *DB
	rng    *rand.Rand
	tids   map[int64]page.TID
	nextID int64
	seq    int64
	prefix string
	index  bool // the table has an index on id
	vacs   int  // maintain calls started
}

// newWriter loads the writer's view from the table's visible rows.
func newWriter(db *DB, seed int64, prefix string) (*writer, error) {
	w := &writer{db: db, rng: rand.New(rand.NewSource(seed)), tids: map[int64]page.TID{}, prefix: prefix}
	ti, err := db.Table(workTable)
	if err != nil {
		return nil, err
	}
	w.index = len(ti.Indexes) > 0
	tx, err := db.Begin()
	if err != nil {
		return nil, err
	}
	defer endTx(tx)
	err = tx.Scan(workTable, func(tid page.TID, r []any) error {
		id := i64(r[0])
		w.tids[id] = tid
		w.nextID = max(w.nextID, id+1)
		return nil
	})
	return w, err
}

func (w *writer) randomID() (int64, bool) {
	if len(w.tids) == 0 {
		return 0, false
	}
	// Map iteration order is random enough and cheap for small maps; for
	// large ones pick a random candidate id and probe forward.
	for tries := 0; tries < 20; tries++ {
		id := w.rng.Int63n(w.nextID)
		if _, ok := w.tids[id]; ok {
			return id, true
		}
	}
	for id := range w.tids {
		return id, true
	}
	return 0, false
}

// step runs one transaction of 1-4 ops (sometimes a bulk one of hundreds). pending is called with the ops
// before Commit, committed after Commit returns nil. It returns the ops
// and whether they were committed.
func (w *writer) step(pending func(seq int64, ops []workOp) error, committed func(seq int64) error) error {
	w.seq++
	tx, err := w.db.Begin()
	if err != nil {
		return err
	}
	newTIDs := map[int64]page.TID{}
	deleted := map[int64]bool{}
	lookup := func(id int64) (page.TID, bool) {
		if deleted[id] {
			return page.TID{}, false
		}
		if t, ok := newTIDs[id]; ok {
			return t, true
		}
		t, ok := w.tids[id]
		return t, ok
	}
	var ops []workOp
	nops := 1 + w.rng.Intn(4)
	if w.rng.Intn(15) == 0 {
		nops = 50 + w.rng.Intn(250) // a bulk transaction: more pages, evictions
	}
	for i := 0; i < nops; i++ {
		val := fmt.Sprintf("%s-%d-%d-%s", w.prefix, w.seq, i, strings.Repeat("x", w.rng.Intn(200)))
		n := w.rng.Int63n(1 << 40)
		r := w.rng.Intn(10)
		id, ok := w.randomID()
		if ok {
			_, ok = lookup(id)
		}
		switch {
		case r < 5 || !ok:
			id = w.nextID
			w.nextID++
			tid, err := tx.Insert(workTable, []any{id, val, n})
			if err != nil {
				return fmt.Errorf("insert %d: %w", id, err)
			}
			newTIDs[id] = tid
			delete(deleted, id)
			ops = append(ops, workOp{'I', id, n, val})
		case r < 8:
			old, _ := lookup(id)
			tid, err := tx.Update(workTable, old, []any{id, val, n})
			if err != nil {
				return fmt.Errorf("update %d at %v: %w", id, old, err)
			}
			newTIDs[id] = tid
			ops = append(ops, workOp{'U', id, n, val})
		default:
			old, _ := lookup(id)
			if err := tx.Delete(workTable, old); err != nil {
				return fmt.Errorf("delete %d at %v: %w", id, old, err)
			}
			deleted[id] = true
			delete(newTIDs, id)
			ops = append(ops, workOp{'D', id, 0, ""})
		}
	}
	if w.rng.Intn(10) == 0 {
		return tx.Rollback()
	}
	if err := pending(w.seq, ops); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for id, tid := range newTIDs {
		w.tids[id] = tid
	}
	for id := range deleted {
		delete(w.tids, id)
	}
	return committed(w.seq)
}

func pendingLines(seq int64, ops []workOp) []byte {
	var b bytes.Buffer
	for _, o := range ops {
		fmt.Fprintf(&b, "P %d %s\n", seq, o)
	}
	return b.Bytes()
}

// visibleState reads every visible row of the work table.
func visibleState(db *DB) (map[int64]rowVal, error) {
	tx, err := db.Begin()
	if err != nil {
		return nil, err
	}
	defer endTx(tx)
	out := map[int64]rowVal{}
	err = tx.Scan(workTable, func(tid page.TID, r []any) error {
		id := i64(r[0])
		if _, dup := out[id]; dup {
			return fmt.Errorf("id %d visible twice (again at %v)", id, tid)
		}
		out[id] = rowVal{N: i64(r[2]), Val: string(bs(r[1]))}
		return nil
	})
	return out, err
}

// verifyAgainstLedger checks that db shows exactly the committed state,
// with or without the transaction in flight. It reports whether the
// in-flight transaction was found committed.
func verifyAgainstLedger(t testing.TB, db *DB, committed map[int64]rowVal, inflight []workOp) bool {
	t.Helper()
	got, err := visibleState(db)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	if diff := stateDiff(got, committed); diff == "" {
		return false
	} else if inflight == nil {
		t.Fatalf("visible rows differ from the committed ledger: %s", diff)
	}
	with := map[int64]rowVal{}
	for k, v := range committed {
		with[k] = v
	}
	applyOps(with, inflight)
	if diff := stateDiff(got, with); diff != "" {
		t.Fatalf("visible rows match neither the ledger nor the ledger plus the transaction in flight %v: %s", inflight, diff)
	}
	return true
}

func stateDiff(got, want map[int64]rowVal) string {
	var diffs []string
	for id, w := range want {
		g, ok := got[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("id %d missing", id))
		case g != w:
			diffs = append(diffs, fmt.Sprintf("id %d = %v, want %v", id, g, w))
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("id %d = %v not committed", id, g))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 5 {
		diffs = append(diffs[:5], fmt.Sprintf("... %d differences in all", len(diffs)))
	}
	return strings.Join(diffs, "; ")
}

// appendSync appends b to f and fsyncs it.
func appendSync(f *os.File, b []byte) error {
	if _, err := f.Write(b); err != nil {
		return err
	}
	return f.Sync()
}

// maintain runs an unthrottled lazy VACUUM (one time in two) or VACUUM
// FULL of the work table, so crashes also land inside vacuums. After a
// VACUUM FULL the writer's TIDs are stale: it reloads them.
func (w *writer) maintain(ctx context.Context) error {
	w.vacs++
	opts := vacuum.DefaultOptions()
	opts.Throttle = &throttle.Settings{}
	if w.rng.Intn(2) == 0 {
		_, err := w.db.Vacuum(ctx, workTable, opts)
		return err
	}
	if _, err := w.db.VacuumFull(ctx, workTable, opts); err != nil {
		return err
	}
	fresh, err := newWriter(w.db, w.rng.Int63(), w.prefix)
	if err != nil {
		return err
	}
	w.tids, w.nextID = fresh.tids, max(w.nextID, fresh.nextID)
	return nil
}
