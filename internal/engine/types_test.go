package engine

import (
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

// typedCols has one nullable column of every type and a NOT NULL key.
var typedCols = []Column{
	{Name: "id", Type: Int8, NotNull: true}, {Name: "i2", Type: Int2}, {Name: "i4", Type: Int4},
	{Name: "b", Type: Bool}, {Name: "t", Type: Text}, {Name: "vc", Type: Varchar, Length: 8},
	{Name: "c", Type: Bpchar, Length: 3}, {Name: "by", Type: Bytea}, {Name: "ts", Type: Timestamp},
	{Name: "tz", Type: Timestamptz}, {Name: "n", Type: Int8},
}

// typedRow is row id of the typed table: every value set for even ids,
// every nullable column NULL for ids divisible by 3, a mix otherwise.
func typedRow(id int64) []any {
	when := row.MicrosOf(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) + row.Micros(id)
	switch {
	case id%3 == 0:
		return []any{id, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
	case id%2 == 0:
		return []any{id, int16(-id), int32(id * 1000), id%4 == 0, strings.Repeat("é", int(id%50)),
			"v" + string(rune('a'+id%26)), "ab ", []byte{byte(id), 0}, when, row.MicrosInfinity, id * 7}
	}
	return []any{id, nil, int32(math.MinInt32), false, nil, "", nil, []byte{}, nil, when, nil}
}

// TestEveryTypeAndNullSurvivesACrash writes rows of every type, NULLs
// included, commits them (and leaves one transaction open), loses the
// process (abandon) or the power (faultfs), and checks after recovery
// that exactly the committed rows read back, value for value, through
// the heap and the index, and that Check is clean.
func TestEveryTypeAndNullSurvivesACrash(t *testing.T) {
	for _, how := range []string{"process crash", "power loss"} {
		t.Run(how, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			opts := testOpts()
			if err := Init(dir, opts); err != nil {
				t.Fatal(err)
			}
			ffs := faultfs.New(vfs.OS())
			o := opts
			o.FS = ffs
			db, err := Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.CreateTable("typed", typedCols); err != nil {
				t.Fatal(err)
			}
			if err := db.CreateIndex("typed_n", "typed", "n"); err != nil {
				t.Fatal(err)
			}
			want := map[int64][]any{}
			tx := mustTx(t, db)
			tids := map[int64]page.TID{}
			for id := int64(1); id <= 200; id++ {
				tid, err := tx.Insert("typed", typedRow(id))
				if err != nil {
					t.Fatalf("insert %d: %v", id, err)
				}
				tids[id] = tid
				want[id] = normalized(t, typedRow(id))
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			// Set every nullable column of ids 10..19 to NULL, and fill
			// those of 30..39 in, committed.
			tx = mustTx(t, db)
			for id := int64(10); id < 40; id++ {
				if id >= 20 && id < 30 {
					continue
				}
				vals := typedRow(id + 1)
				vals[0] = id
				if id < 20 {
					vals = []any{id, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
				}
				if _, err := tx.Update("typed", tids[id], vals); err != nil {
					t.Fatalf("update %d: %v", id, err)
				}
				want[id] = normalized(t, vals)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			open := mustTx(t, db) // never commits
			if _, err := open.Insert("typed", typedRow(1000)); err != nil {
				t.Fatal(err)
			}
			if how == "power loss" {
				if err := ffs.PowerLoss(faultfs.PowerLossOptions{TearProb: 0.5, Seed: 1}); err != nil {
					t.Fatal(err)
				}
				abandonAfterPowerLoss(db)
			} else {
				abandon(t, db)
			}

			db, err = Open(dir, opts)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer closeDB(t, db)
			got := scanAll(t, db, "typed")
			if len(got) != len(want) {
				t.Fatalf("%d rows after recovery, want %d", len(got), len(want))
			}
			for id, w := range want {
				if !reflect.DeepEqual(got[id], w) {
					t.Fatalf("row %d after recovery:\n got  %#v\n want %#v", id, got[id], w)
				}
			}
			rtx := mustTx(t, db)
			defer endTx(rtx)
			for id, w := range want {
				n, ok := w[10].(int64)
				if !ok {
					continue // NULL key: no entry
				}
				found, err := rtx.IndexLookup("typed_n", n)
				if err != nil {
					t.Fatal(err)
				}
				hit := false
				for _, f := range found {
					hit = hit || i64(f.Row[0]) == id
				}
				if !hit {
					t.Fatalf("index lookup n=%d does not find id %d: %v", n, id, found)
				}
			}
			checkClean(t, db)
		})
	}
}

// normalized is vals as Decode returns them (char padded, ...).
func normalized(t *testing.T, vals []any) []any {
	t.Helper()
	b, err := row.Encode(typedCols, vals)
	if err != nil {
		t.Fatalf("encode %v: %v", vals, err)
	}
	out, err := row.Decode(typedCols, b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWritesRefuseValuesTheirColumnCannotHold: Insert and Update check
// NOT NULL, lengths and ranges, name the column, and leave the
// transaction usable (nothing was written).
func TestWritesRefuseValuesTheirColumnCannotHold(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("typed", typedCols); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	defer endTx(tx)
	tid, err := tx.Insert("typed", typedRow(2))
	if err != nil {
		t.Fatal(err)
	}
	with := func(i int, v any) []any {
		vals := typedRow(2)
		vals[i] = v
		return vals
	}
	cases := []struct {
		name string
		vals []any
		want error
		col  string
	}{
		{"NULL key", with(0, nil), ErrNotNull, "id"},
		{"varchar(8) too long", with(5, "123456789"), ErrTooLong, "vc"},
		{"char(3) too long", with(6, "abcd"), ErrTooLong, "c"},
		{"int2 out of range", with(1, 1<<20), ErrOutOfRange, "i2"},
		{"text with NUL", with(4, "a\x00"), ErrInvalidText, "t"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for op, f := range map[string]func() error{
				"insert": func() error { _, err := tx.Insert("typed", c.vals); return err },
				"update": func() error { _, err := tx.Update("typed", tid, c.vals); return err },
			} {
				err := f()
				var ve *row.ValueError
				if !errors.Is(err, c.want) || !errors.As(err, &ve) || ve.Column != c.col {
					t.Fatalf("%s: err = %v, want %v naming column %q", op, err, c.want, c.col)
				}
			}
		})
	}
	if err := tx.Commit(); err != nil {
		t.Fatalf("commit after refused writes: %v", err)
	}
	if got := scanAll(t, db, "typed"); len(got) != 1 {
		t.Fatalf("%d rows, want the one good insert", len(got))
	}
}
