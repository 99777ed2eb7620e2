package engine

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// sweepAll runs every fault point of TestFaultSweep (make soak); without it
// the sweep tries the last point of each kind, with or without a power cut
// (alternating), to keep its share of make test small.
var sweepAll = flag.Bool("faultsweep.all", false, "TestFaultSweep: fail every fault point, not a sample")

// sweepOp is one operation of the fault sweep, run on a directory holding
// the work table (at most 20 pages, with its index).
type sweepOp struct {
	name string
	// prepare runs before the fault is armed (its commits are in the ledger).
	prepare func(e *faultEnv)
	run     func(db *DB) error
	// outcome names the catalog state a reopen found, "old" (as before the
	// operation) or "new" (the operation's, complete), or fails on a mix.
	outcome func(before, after catalogShape) (string, error)
}

// catalogShape is what a catalog names: each table's heap relfilenode and
// its indexes' (by name), as a string so two shapes compare with ==.
type catalogShape map[string]string

func shapeOf(t testing.TB, db *DB) catalogShape {
	t.Helper()
	tables, err := db.Tables()
	if err != nil {
		t.Fatal(err)
	}
	out := catalogShape{}
	for _, ti := range tables {
		out[ti.Name] = fmt.Sprint(ti.Relfilenode)
		for _, ix := range ti.Indexes {
			out[ti.Name+"."+ix.Name] = ix.Column + " " + fmt.Sprint(ix.Relfilenode)
		}
	}
	return out
}

// sameExcept says whether a and b agree on every entry but those named.
func sameExcept(a, b catalogShape, names ...string) bool {
	skip := map[string]bool{}
	for _, n := range names {
		skip[n] = true
	}
	for k, v := range a {
		if !skip[k] && b[k] != v {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !skip[k] {
			return false
		}
	}
	return true
}

// prepareSpare makes the table the DROP and TRUNCATE cases switch out: "spare", with an
// index and a few rows (the work table's ledger stays as it is).
func prepareSpare(e *faultEnv) {
	e.t.Helper()
	if err := e.db.CreateTable("spare", []Column{{Name: "id", Type: Int8}}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.db.CreateIndex("spare_id", "spare", "id"); err != nil {
		e.t.Fatal(err)
	}
	tx := mustTx(e.t, e.db)
	for i := range 10 {
		if _, err := tx.Insert("spare", []any{int64(i)}); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		e.t.Fatal(err)
	}
}

// switchedTogether is the outcome of a switch of the named entries (a heap and its
// indexes): all as before ("old"), or all new ("new": gone when gone is set, else on new
// files), never some of each; every other entry unchanged.
func switchedTogether(gone bool, names ...string) func(before, after catalogShape) (string, error) {
	return func(before, after catalogShape) (string, error) {
		if !sameExcept(before, after, names...) {
			return "", fmt.Errorf("catalog %v, want %v but for %v", after, before, names)
		}
		olds, news := 0, 0
		for _, n := range names {
			v, ok := after[n]
			switch {
			case ok && v == before[n]:
				olds++
			case gone && !ok, !gone && ok && v != before[n]:
				news++
			}
		}
		switch {
		case olds == len(names):
			return "old", nil
		case news == len(names):
			return "new", nil
		}
		return "", fmt.Errorf("a mix of old and new for %v: now %v, before %v", names, after, before)
	}
}

// addedOutcome is the outcome of a DDL that adds the catalog entry name,
// whose value must be want when it is there.
func addedOutcome(name, wantPrefix string) func(before, after catalogShape) (string, error) {
	return func(before, after catalogShape) (string, error) {
		if !sameExcept(before, after, name) {
			return "", fmt.Errorf("catalog %v, want %v with or without %s", after, before, name)
		}
		v, ok := after[name]
		switch {
		case !ok:
			return "old", nil
		case len(v) < len(wantPrefix) || v[:len(wantPrefix)] != wantPrefix:
			return "", fmt.Errorf("%s is %q, want it to start with %q", name, v, wantPrefix)
		}
		return "new", nil
	}
}

var sweepOps = []sweepOp{
	{name: "vacuum full", run: func(db *DB) error {
		opts := vacuum.DefaultOptions()
		opts.Throttle = &throttle.Settings{}
		_, err := db.VacuumFull(context.Background(), workTable, opts)
		return err
	}, outcome: switchedTogether(false, workTable, workTable+"."+workTable+"_id")},
	{name: "create table", run: func(db *DB) error { return db.CreateTable("other", []Column{{Name: "id", Type: Int8}}) },
		outcome: addedOutcome("other", "")},
	{name: "create index", run: func(db *DB) error { return db.CreateIndex("acc_n", workTable, "n") },
		outcome: addedOutcome(workTable+".acc_n", "n ")},
	{name: "drop table", prepare: prepareSpare, run: func(db *DB) error { return db.DropTable(context.Background(), "spare") },
		outcome: switchedTogether(true, "spare", "spare.spare_id")},
	{name: "truncate", prepare: prepareSpare, run: func(db *DB) error { return db.TruncateTable(context.Background(), "spare") },
		outcome: switchedTogether(false, "spare", "spare.spare_id")},
	{name: "checkpoint and WAL recycling", prepare: func(e *faultEnv) { e.mustInsert(60) }, run: func(db *DB) error {
		return db.Checkpoint()
	}, outcome: func(before, after catalogShape) (string, error) {
		if !sameExcept(before, after) {
			return "", fmt.Errorf("a checkpoint changed the catalog from %v to %v", before, after)
		}
		return "old", nil
	}},
}

var sweepKinds = []struct {
	name string
	op   faultfs.Op
}{
	{"write", faultfs.OpWrite},
	{"fsync", faultfs.OpSync},
	{"directory fsync", faultfs.OpSyncDir},
	{"rename", faultfs.OpRename},
}

// newSweepEnv is a faultEnv with small WAL segments (so a checkpoint
// recycles some) and the work table with its index, 120 rows inserted and
// every other one deleted: 8 heap pages.
func newSweepEnv(t *testing.T) *faultEnv {
	t.Helper()
	e := newFaultEnvWith(t, func(o *Options) { o.WALSegmentSize = wal.MinSegmentSize })
	db := e.db
	for range 4 {
		e.mustInsert(30)
	}
	tx := mustTx(t, db)
	var dead []page.TID
	err := tx.Scan(workTable, func(tid page.TID, r []any) error {
		if i64(r[0])%2 == 0 {
			dead = append(dead, tid)
			delete(e.committed, i64(r[0]))
		}
		return nil
	})
	for _, tid := range dead {
		if err == nil {
			err = tx.Delete(workTable, tid)
		}
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		t.Fatal(err)
	}
	if st, err := db.Stats(context.Background()); err != nil || st[0].Pages > 20 {
		t.Fatalf("work table of %+v pages (%v), want at most 20", st, err)
	}
	return e
}

// TestFaultSweep fails the Nth write, fsync, directory fsync or rename of
// VACUUM FULL, CREATE TABLE, CREATE INDEX and a checkpoint that recycles
// WAL, with and without a power cut right after, and reopens: every
// committed row must be there, the index must find them, Check must be
// clean, and the directory must be usable (old state or new, complete).
// By default it tries one fault point of each kind (the last); with
// -faultsweep.all every point, with and without a power cut.
func TestFaultSweep(t *testing.T) {
	cases, points := 0, map[string]int{}
	for _, op := range sweepOps {
		for _, kind := range sweepKinds {
			// Count the operation's fault points of this kind.
			e := newSweepEnv(t)
			if op.prepare != nil {
				op.prepare(e)
			}
			count := e.ffs.Inject(faultfs.Rule{Ops: kind.op, Path: e.dir, After: 1 << 30})
			if err := op.run(e.db); err != nil {
				t.Fatalf("%s without a fault: %v", op.name, err)
			}
			total := count.Matched()
			points[op.name+"/"+kind.name] = total
			closeDB(t, e.db)
			ns := sampleFaultPoints(total)
			cuts := []bool{false, true}
			if !*sweepAll {
				cuts = cuts[len(points)%2 : len(points)%2+1] // alternate, one case per point
			}
			for _, n := range ns {
				for _, cut := range cuts {
					cases++
					name := fmt.Sprintf("%s/%s %d of %d/power cut %v", op.name, kind.name, n+1, total, cut)
					t.Run(name, func(t *testing.T) { runSweepCase(t, op, kind.op, n, cut) })
				}
			}
		}
	}
	t.Logf("fault sweep: %d cases over fault points %v (all=%v)", cases, points, *sweepAll)
}

// sampleFaultPoints returns the fault points to try among total.
func sampleFaultPoints(total int) []int {
	if total == 0 {
		return nil
	}
	if *sweepAll {
		ns := make([]int, total)
		for i := range ns {
			ns[i] = i
		}
		return ns
	}
	return []int{total - 1} // the last: for a DDL or swap, the catalog's rename or directory fsync
}

func runSweepCase(t *testing.T, op sweepOp, kind faultfs.Op, n int, cut bool) {
	e := newSweepEnv(t)
	if op.prepare != nil {
		op.prepare(e)
	}
	before := shapeOf(t, e.db)
	rule := e.ffs.Inject(faultfs.Rule{Ops: kind, Path: e.dir, After: n, Times: 1, Fault: faultfs.EIO})
	err := op.run(e.db)
	if rule.Fired() != 1 {
		// A background WAL segment creation may not have happened this
		// time: the case still checks a reopen after the operation. The
		// fault is disarmed, or it would fire in Close's checkpoint instead,
		// outside the operation under test.
		e.ffs.RemoveRule(rule)
		t.Logf("fault point %d not reached this time (op err %v)", n+1, err)
	}
	if cut {
		if perr := e.ffs.PowerLoss(faultfs.PowerLossOptions{TearProb: 0.5, Seed: uint64(n) + 1}); perr != nil {
			t.Fatal(perr)
		}
		abandonAfterPowerLoss(e.db)
	} else if cerr := e.db.Close(); cerr != nil && !errors.Is(cerr, ErrNeedsRecovery) && err == nil {
		t.Fatalf("Close after a succeeded %s: %v", op.name, cerr)
	}
	db, oerr := Open(e.dir, e.opts)
	if oerr != nil {
		t.Fatalf("reopen after %s failed with %v: %v", op.name, err, oerr)
	}
	e.db = db
	defer closeDB(t, db)
	outcome, oerr := op.outcome(before, shapeOf(t, db))
	if oerr != nil {
		t.Fatalf("after %s (err %v): %v", op.name, err, oerr)
	}
	if err == nil && outcome != "new" && op.name != "checkpoint and WAL recycling" {
		t.Fatalf("%s returned no error, but the reopened catalog is the old one", op.name)
	}
	t.Logf("outcome: %s catalog (op err %v)", outcome, err)
	if outcome == "new" && op.name == "create index" {
		verifyIndexOn(t, db, "acc_n", e.committed)
	}
	verifyAgainstLedger(t, db, e.committed, nil)
	verifyIndexes(t, db, e.committed)
	checkClean(t, db)
	e.mustInsert(3) // writable again
}

// verifyIndexOn checks that the index on column n finds every committed row.
func verifyIndexOn(t *testing.T, db *DB, index string, committed map[int64]rowVal) {
	t.Helper()
	tx := mustTx(t, db)
	defer endTx(tx)
	for id, want := range committed {
		found, err := tx.IndexLookup(index, want.N)
		if err != nil {
			t.Fatalf("lookup n=%d in %s: %v", want.N, index, err)
		}
		ok := false
		for _, f := range found {
			ok = ok || i64(f.Row[0]) == id
		}
		if !ok {
			t.Fatalf("%s finds no row id %d for n=%d (found %v)", index, id, want.N, found)
		}
	}
}
