package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
)

// cityCols: a text primary key candidate, a two-column key (region, n)
// with NULLs in n, and a payload.
var cityCols = []Column{{Name: "name", Type: Text}, {Name: "region", Type: Varchar, Length: 12},
	{Name: "n", Type: Int4}, {Name: "pay", Type: Bytea}}

func cityRow(i int) []any {
	var n any
	if i%7 != 0 {
		n = int32(i % 50)
	}
	return []any{fmt.Sprintf("city-%05d-%s", i, strings.Repeat("x", i%300)), fmt.Sprintf("r%02d", i%13), n, []byte{byte(i)}}
}

func newCities(t *testing.T, rows int) (*DB, string) {
	t.Helper()
	db, dir := newDB(t, testOpts())
	if err := db.CreateTable("city", cityCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateUniqueIndex("city_name", "city", "name"); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for i := range rows / 2 {
		if _, err := tx.Insert("city", cityRow(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Built bottom-up over the first half, then maintained by inserts.
	if err := db.CreateIndex("city_region_n", "city", "region", "n"); err != nil {
		t.Fatal(err)
	}
	tx = mustTx(t, db)
	for i := rows / 2; i < rows; i++ {
		if _, err := tx.Insert("city", cityRow(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return db, dir
}

// checkCities looks every row up by its text key, and each region by
// prefix and by a two-column range, against what the rows say.
func checkCities(t *testing.T, db *DB, rows int) {
	t.Helper()
	tx := mustTx(t, db)
	defer endTx(tx)
	for i := range rows {
		want := cityRow(i)
		found, err := tx.IndexLookup("city_name", want[0])
		if err != nil || len(found) != 1 || found[0].Row[0] != want[0] {
			t.Fatalf("lookup of %q: %v, %v", want[0], found, err)
		}
	}
	perRegion := map[string]int{}
	inRange := map[string]int{} // region -> rows with 10 <= n <= 20
	for i := range rows {
		r := cityRow(i)
		region, ok := r[1].(string)
		if !ok {
			t.Fatalf("row %d: region %T, want a string", i, r[1])
		}
		perRegion[region]++
		if n, ok := r[2].(int32); ok && n >= 10 && n <= 20 {
			inRange[region]++
		}
	}
	for region, want := range perRegion {
		found, err := tx.IndexLookup("city_region_n", region)
		if err != nil || len(found) != want {
			t.Fatalf("prefix lookup of region %s: %d rows, %v; want %d", region, len(found), err, want)
		}
		var ns []any
		err = tx.IndexRange("city_region_n", []any{region, 10}, []any{region, 20}, func(f Found) error {
			ns = append(ns, f.Row[2])
			return nil
		})
		if err != nil || len(ns) != inRange[region] {
			t.Fatalf("range (%s, 10)..(%s, 20): %d rows, %v; want %d", region, region, len(ns), err, inRange[region])
		}
		if !slices.IsSortedFunc(ns, func(a, b any) int { return int(i64(a) - i64(b)) }) {
			t.Fatalf("range (%s, 10)..(%s, 20) out of key order: %v", region, region, ns)
		}
	}
	if found, err := tx.IndexLookup("city_region_n", "r01", nil); err != nil || len(found) != 0 {
		t.Fatalf("lookup of a NULL key value: %v, %v; want nothing (NULL equals nothing)", found, err)
	}
}

// Text and two-column keys through CREATE INDEX on a populated table,
// inserts, lookups, prefix and range scans, Check, and a crash (the
// pages come back from the WAL).
func TestTextAndTwoColumnKeysSurviveACrash(t *testing.T) {
	const rows = 1200
	db, dir := newCities(t, rows)
	checkCities(t, db, rows)
	checkClean(t, db)
	abandon(t, db)
	db, err := Open(dir, testOpts())
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	checkCities(t, db, rows)
	checkClean(t, db)
}

func TestUniqueTextKeyAndTwoColumnPrimaryKey(t *testing.T) {
	db, _ := newCities(t, 40)
	tx := mustTx(t, db)
	defer endTx(tx)
	_, err := tx.Insert("city", []any{cityRow(3)[0], "elsewhere", 1, nil})
	var uv *UniqueViolationError
	if !errors.As(err, &uv) || uv.Index != "city_name" || !slices.Equal(uv.Columns, []string{"name"}) ||
		len(uv.Key) != 1 || uv.Key[0] != cityRow(3)[0] {
		t.Fatalf("duplicate text key: %v, want a unique violation naming city_name and the key", err)
	}
	if !strings.Contains(err.Error(), `Key (name)=(city-00003-xxx) already exists`) {
		t.Fatalf("message %q does not show the key as PostgreSQL does", err)
	}
	_, err = tx.Insert("city", []any{strings.Repeat("y", btree.MaxKeySize), "r", 1, nil})
	if !errors.Is(err, ErrKeyTooLong) {
		t.Fatalf("a key of %d bytes: %v, want ErrKeyTooLong", btree.MaxKeySize+3, err)
	}
	if err := tx.Commit(); err != nil { // the refusals left the transaction usable
		t.Fatal(err)
	}
	// (region, n) has NULLs in n: a primary key on it is refused naming n.
	err = db.AddPrimaryKey("city", "region", "n")
	var ve *row.ValueError
	if !errors.Is(err, ErrNotNull) || !errors.As(err, &ve) || ve.Column != "n" {
		t.Fatalf("primary key over a NULL: %v, want ErrNotNull naming n", err)
	}
	// (region, name) is unique: it becomes the primary key, NOT NULL both.
	if err := db.AddPrimaryKey("city", "region", "name"); err != nil {
		t.Fatal(err)
	}
	ti, err := db.Table("city")
	if err != nil {
		t.Fatal(err)
	}
	if !ti.Columns[0].NotNull || !ti.Columns[1].NotNull || ti.Columns[2].NotNull {
		t.Fatalf("columns after ADD PRIMARY KEY (region, name): %+v", ti.Columns)
	}
	tx = mustTx(t, db)
	defer endTx(tx)
	_, err = tx.Insert("city", []any{cityRow(5)[0], cityRow(5)[1], 9, nil})
	if !errors.As(err, &uv) || uv.Index != "city_name" && uv.Index != "city_pkey" {
		t.Fatalf("duplicate (region, name): %v", err)
	}
	checkClean(t, db)
}

// The first updater wins: Update of a row another transaction updated to
// the same unique key is ErrConflict (it was ErrUniqueViolation, since the
// unique check waited for that transaction and found its new version).
func TestUpdateOfARowAnotherTransactionChangedIsAConflictUnderAUniqueIndex(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("first commits %v", commit), func(t *testing.T) {
			db := newKeyed(t)
			setup := mustTx(t, db)
			tid, err := setup.Insert("kv", []any{1, "one"})
			if err != nil {
				t.Fatal(err)
			}
			if err := setup.Commit(); err != nil {
				t.Fatal(err)
			}
			first, second := mustTx(t, db), mustTx(t, db)
			defer endTx(second)
			if _, err := first.Update("kv", tid, []any{1, "first"}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := second.Update("kv", tid, []any{1, "second"})
				done <- err
			}()
			time.Sleep(20 * time.Millisecond) // let the second run into the first
			end := first.Rollback
			if commit {
				end = first.Commit
			}
			if err := end(); err != nil {
				t.Fatal(err)
			}
			err = <-done
			if commit && (!errors.Is(err, ErrConflict) || errors.Is(err, ErrUniqueViolation)) {
				t.Fatalf("second update after the first committed: %v, want ErrConflict only", err)
			}
			if !commit && !errors.Is(err, ErrConflict) && err != nil {
				t.Fatalf("second update while the first ran: %v, want ErrConflict (first updater wins) or success", err)
			}
		})
	}
}
