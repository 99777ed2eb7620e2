package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/heap"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// rewriteTable does what VACUUM FULL will: copy every tuple that is not
// dead into a new heap, build the indexes fresh, and return the new files.
func rewriteTable(t *testing.T, db *DB, name string) (storage.RelFileNode, map[string]storage.RelFileNode) {
	t.Helper()
	th, err := db.handle(name)
	if err != nil {
		t.Fatal(err)
	}
	newHeap, err := db.allocRelfilenode()
	if err != nil {
		t.Fatal(err)
	}
	nh, err := heap.Create(db.heapDeps(), newHeap)
	if err != nil {
		t.Fatal(err)
	}
	entries := make([][]btree.Entry, len(th.Indexes))
	err = db.walkHeap(context.Background(), th.Rel, db.txns.OldestXmin(), nil, func(hp *heapPage) error {
		for _, tup := range hp.Tuples {
			if tup.Status == heap.Dead {
				continue
			}
			tid, err := nh.InsertRaw(tup.Header, tup.Data, nil)
			if err != nil {
				return err
			}
			vals, err := row.Decode(th.Columns, tup.Data)
			if err != nil {
				return err
			}
			for i, ix := range th.Indexes {
				entries[i] = append(entries[i], btree.Entry{Key: btree.IntKey(i64(vals[ix.KeyColumns[0]])), TID: tid})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	newIx := map[string]storage.RelFileNode{}
	for i, ix := range th.Indexes {
		rel, err := db.allocRelfilenode()
		if err != nil {
			t.Fatal(err)
		}
		es := entries[i]
		slices.SortFunc(es, btree.Compare)
		if _, err := btree.Build(db.btreeDeps(), rel, func() (btree.Entry, bool, error) {
			if len(es) == 0 {
				return btree.Entry{}, false, nil
			}
			e := es[0]
			es = es[1:]
			return e, true, nil
		}, nil, nil); err != nil {
			t.Fatal(err)
		}
		newIx[ix.Name] = rel
	}
	return newHeap, newIx
}

func TestSwapRelfilenodesSwitchesToTheRewrittenTable(t *testing.T) {
	opts := testOpts()
	db, dir := newDB(t, opts)
	tids := fillTable(t, db, 500)
	if err := db.CreateIndex("t_id", "t", "id"); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for i := int64(0); i < 500; i += 2 {
		if err := tx.Delete("t", tids[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	before, _ := db.Table("t")
	oldPath := db.st.Path(before.Relfilenode, storage.MainFork)

	unlock, err := db.lockTable("t")
	if err != nil {
		t.Fatal(err)
	}
	newHeap, newIx := rewriteTable(t, db, "t")
	if err := db.swapRelfilenodes("t", newHeap, newIx); err != nil {
		t.Fatal(err)
	}
	unlock()

	after, _ := db.Table("t")
	if after.Relfilenode != newHeap || after.Indexes[0].Relfilenode != newIx["t_id"] {
		t.Fatalf("catalog after swap: %+v", after)
	}
	if _, err := os.Stat(oldPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old heap file still there: %v", err)
	}
	stats, err := db.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st := stats[0]; st.LiveTuples != 250 || st.DeadTuples != 0 || st.Indexes[0].Entries != 250 {
		t.Fatalf("stats after rewrite: %+v", st)
	}
	checkClean(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	rows := scanAll(t, db, "t")
	if len(rows) != 250 {
		t.Fatalf("%d rows after reopen, want 250", len(rows))
	}
	tx = mustTx(t, db)
	defer endTx(tx)
	if f, err := tx.IndexLookup("t_id", 301); err != nil || len(f) != 1 {
		t.Fatalf("lookup 301 after rewrite: %v %v", f, err)
	}
	checkClean(t, db)
}

func TestCrashBeforeSwapKeepsTheOldTableAndRemovesTheNewFiles(t *testing.T) {
	opts := testOpts()
	db, dir := newDB(t, opts)
	fillTable(t, db, 300)
	if err := db.CreateIndex("t_id", "t", "id"); err != nil {
		t.Fatal(err)
	}
	newHeap, newIx := rewriteTable(t, db, "t")
	abandon(t, db)

	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	removed := db.RecoveryInfo().OrphansRemoved
	if !slices.Contains(removed, newHeap) || !slices.Contains(removed, newIx["t_id"]) {
		t.Fatalf("orphans removed %v, want the new heap %d and index %d", removed, newHeap, newIx["t_id"])
	}
	if rows := scanAll(t, db, "t"); len(rows) != 300 {
		t.Fatalf("%d rows, want the old table's 300", len(rows))
	}
	checkClean(t, db)
	// The orphans' relfilenodes are not handed out again.
	if err := db.CreateTable("u", accountCols); err != nil {
		t.Fatal(err)
	}
	u, _ := db.Table("u")
	if u.Relfilenode <= newIx["t_id"] {
		t.Fatalf("new table got relfilenode %d, at or below the removed orphans", u.Relfilenode)
	}
}
