package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

// relFiles lists the files of base/ that belong to relfilenode rel.
func relFiles(t *testing.T, dir string, rel storage.RelFileNode) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "base"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	prefix := fmt.Sprint(rel)
	for _, e := range ents {
		n := e.Name()
		if n == prefix || strings.HasPrefix(n, prefix+"_") || strings.HasPrefix(n, prefix+".") {
			out = append(out, n)
		}
	}
	return out
}

// fillDropTable makes table d (int4 key with a unique index, nullable
// text) with n rows.
func fillDropTable(t *testing.T, db *DB, n int) {
	t.Helper()
	if err := db.CreateTable("d", keyedCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateUniqueIndex("d_k", "d", "k"); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for i := range n {
		var v any
		if i%3 != 0 {
			v = fmt.Sprintf("v%d", i)
		}
		if _, err := tx.Insert("d", []any{i, v}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

func countRows(t *testing.T, db *DB, table string) int {
	t.Helper()
	tx := mustTx(t, db)
	defer endTx(tx)
	n := 0
	if err := tx.Scan(table, func(_ page.TID, _ []any) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDropTableRemovesTheTableAndItsFiles(t *testing.T) {
	db, dir := newDB(t, testOpts())
	fillDropTable(t, db, 300)
	ti, _ := db.Table("d")
	rels := []storage.RelFileNode{ti.Relfilenode, ti.Indexes[0].Relfilenode}
	if err := db.DropTable(context.Background(), "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Table("d"); !errors.Is(err, ErrNoSuchTable) {
		t.Fatalf("Table after drop: %v", err)
	}
	for _, r := range rels {
		if f := relFiles(t, dir, r); len(f) != 0 {
			t.Fatalf("files of dropped relation %d left: %v", r, f)
		}
	}
	tx := mustTx(t, db)
	if _, err := tx.Insert("d", []any{1, "x"}); !errors.Is(err, ErrNoSuchTable) {
		t.Fatalf("insert into a dropped table: %v", err)
	}
	endTx(tx)
	if err := db.DropTable(context.Background(), "d"); !errors.Is(err, ErrNoSuchTable) {
		t.Fatalf("second drop: %v", err)
	}
	// The name is free again, and the new table starts empty.
	fillDropTable(t, db, 5)
	if n := countRows(t, db, "d"); n != 5 {
		t.Fatalf("recreated table has %d rows, want 5", n)
	}
	checkClean(t, db)
	abandon(t, db)
	db, err := Open(dir, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	if n := countRows(t, db, "d"); n != 5 {
		t.Fatalf("after a crash the recreated table has %d rows, want 5", n)
	}
	checkClean(t, db)
}

func TestTruncateEmptiesTheTableAndItsIndexes(t *testing.T) {
	db, dir := newDB(t, testOpts())
	fillDropTable(t, db, 300)
	before, _ := db.Table("d")
	if err := db.TruncateTable(context.Background(), "d"); err != nil {
		t.Fatal(err)
	}
	after, _ := db.Table("d")
	if after.Relfilenode == before.Relfilenode || after.Indexes[0].Relfilenode == before.Indexes[0].Relfilenode ||
		!after.Indexes[0].Unique {
		t.Fatalf("truncate kept %+v -> %+v", before, after)
	}
	for _, r := range []storage.RelFileNode{before.Relfilenode, before.Indexes[0].Relfilenode} {
		if f := relFiles(t, dir, r); len(f) != 0 {
			t.Fatalf("files of the truncated relation %d left: %v", r, f)
		}
	}
	if n := countRows(t, db, "d"); n != 0 {
		t.Fatalf("%d rows after truncate", n)
	}
	tx := mustTx(t, db)
	if found, err := tx.IndexLookup("d_k", 7); err != nil || len(found) != 0 {
		t.Fatalf("index after truncate: %v %v", found, err)
	}
	if _, err := tx.Insert("d", []any{7, "again"}); err != nil {
		t.Fatal(err)
	}
	_, err := tx.Insert("d", []any{7, "twice"})
	wantUniqueViolation(t, err, "d_k", 7)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	abandon(t, db)
	db, err = Open(dir, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	if n := countRows(t, db, "d"); n != 1 {
		t.Fatalf("after a crash: %d rows, want the one inserted after truncate", n)
	}
	checkClean(t, db)
}

// TestDropAndTruncateAreSafeAtEveryPowerCut cuts the power at each file
// operation of DropTable and TruncateTable in turn. After each cut the
// reopened directory has the table whole (all 300 rows, index and all)
// or the operation done (no table; an empty table) and no file of a
// relation the catalog does not name is left; Check runs at every fourth
// cut and at the end.
func TestDropAndTruncateAreSafeAtEveryPowerCut(t *testing.T) {
	template := filepath.Join(t.TempDir(), "template")
	opts := testOpts()
	opts.CheckpointWALBytes = -1
	if err := Init(template, opts); err != nil {
		t.Fatal(err)
	}
	db, err := Open(template, opts)
	if err != nil {
		t.Fatal(err)
	}
	fillDropTable(t, db, 300)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ops := map[string]func(*DB) error{
		"drop":     func(db *DB) error { return db.DropTable(context.Background(), "d") },
		"truncate": func(db *DB) error { return db.TruncateTable(context.Background(), "d") },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			outcomes := map[string]int{}
			for n := 1; ; n++ {
				dir := filepath.Join(t.TempDir(), "data")
				copyDir(t, template, dir)
				ffs := faultfs.New(vfs.OS())
				o := opts
				o.FS = ffs
				db, err := Open(dir, o)
				if err != nil {
					t.Fatal(err)
				}
				ffs.CrashAfter(n, faultfs.PowerLossOptions{TearProb: 0.5, Seed: uint64(n)})
				opErr := op(db)
				cut := ffs.PoweredOff()
				if !cut {
					if opErr != nil {
						t.Fatalf("%s without a cut: %v", name, opErr)
					}
					_ = ffs.PowerLoss(faultfs.PowerLossOptions{})
				}
				abandonAfterPowerLoss(db)
				db, err = Open(dir, opts)
				if err != nil {
					t.Fatalf("cut at op %d: reopen: %v", n, err)
				}
				outcome := "undone"
				switch ti, err := db.Table("d"); {
				case errors.Is(err, ErrNoSuchTable) && name == "drop":
					outcome = "done"
				case err != nil:
					t.Fatalf("cut at op %d: %v", n, err)
				default:
					rows := countRows(t, db, "d")
					switch {
					case rows == 0 && name == "truncate":
						outcome = "done"
					case rows != 300:
						t.Fatalf("cut at op %d: %d rows, want 300 or the %s done", n, rows, name)
					}
					if len(ti.Indexes) != 1 || !ti.Indexes[0].Unique {
						t.Fatalf("cut at op %d: indexes %+v", n, ti.Indexes)
					}
				}
				outcomes[outcome]++
				if n%4 == 0 || !cut { // Check is the slow part; rows and files are checked at every cut
					checkClean(t, db)
				}
				tables, _ := db.Tables()
				named := map[string]bool{}
				for _, ti := range tables {
					named[fmt.Sprint(ti.Relfilenode)] = true
					for _, ix := range ti.Indexes {
						named[fmt.Sprint(ix.Relfilenode)] = true
					}
				}
				ents, _ := os.ReadDir(filepath.Join(dir, "base"))
				for _, e := range ents {
					rel := strings.SplitN(strings.SplitN(e.Name(), "_", 2)[0], ".", 2)[0]
					if !named[rel] {
						t.Fatalf("cut at op %d (%s): file %s of no catalogued relation left", n, outcome, e.Name())
					}
				}
				closeDB(t, db)
				if !cut {
					if outcomes["done"] == 0 || outcomes["undone"] == 0 {
						t.Fatalf("outcomes %v: the sweep never saw both sides of the switch", outcomes)
					}
					t.Logf("%s: %d cut points, outcomes %v", name, n-1, outcomes)
					return
				}
			}
		})
	}
}

// TestDropWithAFailedDirectoryFsyncRemovesNoFile: the catalog's rename
// may have reached the disk, so DropTable keeps every file and refuses
// writes (h1's catalog switch); after reopening, the table is whole or
// gone, never a catalog naming missing files.
func TestDropWithAFailedDirectoryFsyncRemovesNoFile(t *testing.T) {
	for _, name := range []string{"drop", "truncate"} {
		t.Run(name, func(t *testing.T) {
			db, dir, opts, fsys := openWithRootSyncFail(t)
			fillDropTable(t, db, 300)
			ti, _ := db.Table("d")
			fsys.armed.Store(true)
			var err error
			if name == "drop" {
				err = db.DropTable(context.Background(), "d")
			} else {
				err = db.TruncateTable(context.Background(), "d")
			}
			if !errors.Is(err, ErrNeedsRecovery) {
				t.Fatalf("%s with a failed directory fsync: %v, want ErrNeedsRecovery", name, err)
			}
			if f := relFiles(t, dir, ti.Relfilenode); len(f) == 0 {
				t.Fatal("the old heap's files were removed although the switch may not be durable")
			}
			if err := db.Close(); err != nil && !errors.Is(err, ErrNeedsRecovery) {
				t.Fatal(err)
			}
			db, err = Open(dir, opts)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer closeDB(t, db)
			if _, err := db.Table("d"); err == nil {
				if n := countRows(t, db, "d"); n != 300 && n != 0 {
					t.Fatalf("%d rows after reopening", n)
				}
			}
			checkClean(t, db)
		})
	}
}
