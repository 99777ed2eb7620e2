package engine

import (
	"math"
	"slices"
	"testing"
)

// TestIndexRangeClampsBoundsPastAnIntegerKeysType looks up int2 and int4
// keys (alone and as the second column of a two-column key) with bounds
// beyond their type's range: such a bound orders past every value the
// column holds, so open ranges are every key or none and equality none,
// never an out-of-range error.
func TestIndexRangeClampsBoundsPastAnIntegerKeysType(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("k", []Column{{Name: "a", Type: Int4}, {Name: "b", Type: Int2}}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex("k_a", "k", "a"); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex("k_a_b", "k", "a", "b"); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for _, r := range [][]any{{int32(math.MinInt32), int16(math.MinInt16)}, {int32(1), int16(-5)}, {int32(1), int16(7)},
		{int32(1), nil}, {int32(2), int16(math.MaxInt16)}, {int32(math.MaxInt32), int16(0)}} {
		if _, err := tx.Insert("k", r); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	big, small := int64(1)<<40, -(int64(1) << 40)
	for _, c := range []struct {
		name   string
		index  string
		lo, hi []any
		want   [][2]any // (a, b) in key order
	}{
		{"int4 below every key to above every key", "k_a", []any{small}, []any{big},
			[][2]any{{int32(math.MinInt32), int16(math.MinInt16)}, {int32(1), int16(-5)}, {int32(1), int16(7)}, {int32(1), nil}, {int32(2), int16(math.MaxInt16)}, {int32(math.MaxInt32), int16(0)}}},
		{"int4 open upper bound past the type", "k_a", []any{int64(2)}, []any{big},
			[][2]any{{int32(2), int16(math.MaxInt16)}, {int32(math.MaxInt32), int16(0)}}},
		{"int4 open lower bound past the type", "k_a", []any{small}, []any{int64(1)},
			[][2]any{{int32(math.MinInt32), int16(math.MinInt16)}, {int32(1), int16(-5)}, {int32(1), int16(7)}, {int32(1), nil}}},
		{"int4 lower bound above the type", "k_a", []any{big}, nil, nil},
		{"int4 upper bound below the type", "k_a", nil, []any{small}, nil},
		{"int4 equality past the type", "k_a", []any{big}, []any{big}, nil},
		{"int2 second column from below to above its type", "k_a_b", []any{int64(1), small}, []any{int64(1), big},
			[][2]any{{int32(1), int16(-5)}, {int32(1), int16(7)}}},
		{"int2 second column above its type: only the NULL sorts after", "k_a_b", []any{int64(1), big}, []any{int64(1)},
			[][2]any{{int32(1), nil}}},
		{"int2 second column below its type", "k_a_b", []any{int64(1)}, []any{int64(1), small}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx := mustTx(t, db)
			defer endTx(tx)
			var got [][2]any
			if err := tx.IndexRange(c.index, c.lo, c.hi, func(f Found) error {
				got = append(got, [2]any{f.Row[0], f.Row[1]})
				return nil
			}); err != nil {
				t.Fatalf("IndexRange(%v, %v): %v", c.lo, c.hi, err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("IndexRange(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
			}
		})
	}
	tx = mustTx(t, db)
	defer endTx(tx)
	if f, err := tx.IndexLookup("k_a", big); err != nil || len(f) != 0 {
		t.Fatalf("IndexLookup of 2^40 on an int4 key: %v, %v; want nothing, no error", f, err)
	}
}

// TestIndexLookupOfAStringLongerThanAVarcharKeyMatchesNothing: a lookup or
// range bound longer than varchar(n) holds is no error (only storing one
// is): it matches nothing equal and orders as text.
func TestIndexLookupOfAStringLongerThanAVarcharKeyMatchesNothing(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("v", []Column{{Name: "s", Type: Varchar, Length: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateUniqueIndex("v_s", "v", "s"); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for _, s := range []string{"abc", "abd", "b"} {
		if _, err := tx.Insert("v", []any{s}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Insert("v", []any{"abcd"}); err == nil {
		t.Fatal("insert of 4 characters into varchar(3) succeeded")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx = mustTx(t, db)
	defer endTx(tx)
	if f, err := tx.IndexLookup("v_s", "abcd"); err != nil || len(f) != 0 {
		t.Fatalf("IndexLookup of 'abcd': %v, %v; want nothing, no error", f, err)
	}
	var got []any
	if err := tx.IndexRange("v_s", []any{"abcd"}, []any{"zzzz"}, func(f Found) error {
		got = append(got, f.Row[0])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []any{"abd", "b"}) {
		t.Fatalf("IndexRange('abcd', 'zzzz') = %v, want [abd b]", got)
	}
}
