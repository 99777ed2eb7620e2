package vacuum_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
)

// The test table: an id (NOT NULL, its index unique), three derived keys
// of three integer types, the last NULL for every fifth id, a payload and
// a text note, NULL for odd ids. Index i (0..3) is on the columns
// indexCols[i]: the id, the text note (a variable-length key, no entry
// for odd ids), the two-column key (b, c) (c NULL in some), and c alone.
var (
	testCols = []engine.Column{{Name: "id", Type: engine.Int8, NotNull: true}, {Name: "a", Type: engine.Int8},
		{Name: "b", Type: engine.Int4}, {Name: "c", Type: engine.Int2}, {Name: "pay", Type: engine.Bytea},
		{Name: "note", Type: engine.Text}}
	indexCols = [][]string{{"id"}, {"note"}, {"b", "c"}, {"c"}}
)

// indexName is the name of index i of table.
func indexName(table string, i int) string {
	return table + "_" + strings.Join(indexCols[i], "_")
}

func keyA(id int64) int64 { return (id * 7919) % 1009 }
func keyB(id int64) int64 { return -id }
func keyC(id int64) int64 { return id % 97 }

// keyOf is index i's key of row id (its values, for IndexLookup), false
// when every key column is NULL (no entry).
func keyOf(i int, id int64) ([]any, bool) {
	r := rowOf(id, 0)
	switch i {
	case 0:
		return []any{id}, true
	case 1:
		return []any{r[5]}, r[5] != nil
	case 2:
		return []any{r[2], r[3]}, true
	}
	return []any{r[3]}, r[3] != nil
}

// rowOf is the test row of id.
func rowOf(id int64, payload int) []any {
	var c, note any
	if id%5 != 0 {
		c = int16(keyC(id))
	}
	if id%2 == 0 {
		note = fmt.Sprintf("n%08d", id%100_000_000) // fixed width: reinserted rows are as big
	}
	return []any{id, keyA(id), int32(keyB(id)), c, payloadOf(id, payload), note}
}

// withKey counts the ids whose index-i key is not NULL.
func withKey(i int, ids []int64) int64 {
	n := int64(0)
	for _, id := range ids {
		if _, ok := keyOf(i, id); ok {
			n++
		}
	}
	return n
}

func testOpts() engine.Options {
	return engine.Options{BufferPoolBytes: 512 * page.Size, WALSegmentSize: 1 << 20, SegmentSize: 256 * page.Size}
}

// unthrottled returns default options without any rate limit.
func unthrottled() vacuum.Options {
	o := vacuum.DefaultOptions()
	o.Throttle = &throttle.Settings{}
	return o
}

func newDB(t testing.TB, opts engine.Options) (*engine.DB, string) {
	t.Helper()
	dir := t.TempDir()
	if err := engine.Init(dir, opts); err != nil {
		t.Fatalf("Init: %v", err)
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db, dir
}

// table is a loaded test table and what it should contain.
type table struct {
	name        string
	indexes     int
	live        map[int64]page.TID
	deleted     int
	lastDeleted []int64 // the ids the last deletePercent deleted
	payload     int
}

func payloadOf(id int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(int(id) + i)
	}
	return b
}

// createTable creates name with nIdx indexes and inserts rows rows.
func createTable(t testing.TB, db *engine.DB, name string, nIdx, rows, payload int) *table {
	t.Helper()
	if err := db.CreateTable(name, testCols); err != nil {
		t.Fatal(err)
	}
	for i := range nIdx {
		create := db.CreateIndex
		if i == 0 {
			create = db.CreateUniqueIndex
		}
		if err := create(indexName(name, i), name, indexCols[i]...); err != nil {
			t.Fatal(err)
		}
	}
	tb := &table{name: name, indexes: nIdx, live: map[int64]page.TID{}, payload: payload}
	insertRows(t, db, tb, 0, int64(rows))
	return tb
}

func insertRows(t testing.TB, db *engine.DB, tb *table, from, to int64) {
	t.Helper()
	const batch = 500
	for lo := from; lo < to; lo += batch {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for id := lo; id < min(lo+batch, to); id++ {
			tid, err := tx.Insert(tb.name, rowOf(id, tb.payload))
			if err != nil {
				t.Fatal(err)
			}
			tb.live[id] = tid
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// deletePercent deletes pct % of the live rows (exactly round(n*pct/100)),
// chosen at random, and commits.
func deletePercent(t testing.TB, db *engine.DB, tb *table, pct float64, rng *rand.Rand) int {
	t.Helper()
	ids := make([]int64, 0, len(tb.live))
	for id := range tb.live {
		ids = append(ids, id)
	}
	// Map order is random but not seeded: sort, then shuffle with rng.
	sortInt64(ids)
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	n := int(float64(len(ids))*pct/100 + 0.5)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:n] {
		if err := tx.Delete(tb.name, tb.live[id]); err != nil {
			t.Fatal(err)
		}
		delete(tb.live, id)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tb.deleted += n
	tb.lastDeleted = ids[:n]
	return n
}

func sortInt64(s []int64) { slices.Sort(s) }

// checkClean runs the engine's Check and fails on any problem.
func checkClean(t testing.TB, db *engine.DB) {
	t.Helper()
	rep, err := db.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	for _, p := range rep.Problems {
		t.Errorf("Check: %s", p)
	}
	if len(rep.Problems) > 0 {
		t.FailNow()
	}
}

// verifyRows checks that exactly the live rows are visible by a scan and
// that every live row is found through every index.
func verifyRows(t testing.TB, db *engine.DB, tb *table) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // read only
	seen := 0
	err = tx.Scan(tb.name, func(_ page.TID, r []any) error {
		id, ok := r[0].(int64)
		if !ok {
			return fmt.Errorf("column 0 is %T, want int64", r[0])
		}
		if _, ok := tb.live[id]; !ok {
			return fmt.Errorf("scan sees row %d, which was deleted", id)
		}
		if want := rowOf(id, tb.payload); !rowsEqual(r, want) {
			return fmt.Errorf("row %d reads %v, want %v", id, r, want)
		}
		seen++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(tb.live) {
		t.Fatalf("scan sees %d rows, want %d", seen, len(tb.live))
	}
	for i := range tb.indexes {
		name := indexName(tb.name, i)
		for id := range tb.live {
			key, ok := keyOf(i, id)
			if !ok {
				continue // NULL: no entry
			}
			if slices.Contains(key, nil) {
				key = key[:slices.Index(key, nil)] // NULL equals nothing: look up the prefix
			}
			found, err := tx.IndexLookup(name, key...)
			if err != nil {
				t.Fatal(err)
			}
			hit := false
			for _, f := range found {
				if got, _ := f.Row[0].(int64); got == id {
					hit = true
				}
			}
			if !hit {
				t.Fatalf("row %d not found through index %s", id, name)
			}
		}
	}
}

// heapPages is the table's heap size in pages.
func heapPages(t testing.TB, db *engine.DB, name string) int64 {
	t.Helper()
	n, err := db.TablePages(name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// rowsEqual compares a decoded row with rowOf's (NULLs, Go types).
func rowsEqual(got, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if gb, ok := g.([]byte); ok {
			wb, ok := w.([]byte)
			if !ok || string(gb) != string(wb) {
				return false
			}
			continue
		}
		if g != w {
			return false
		}
	}
	return true
}

// vacuumTables vacuums the named tables in one new batch of opts.
func vacuumTables(ctx context.Context, db *engine.DB, names []string, opts vacuum.Options) (*vacuum.BatchReport, error) {
	b, err := vacuum.NewBatch(opts)
	if err != nil {
		return nil, err
	}
	return db.VacuumBatch(ctx, b, names)
}
