package row

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// allTypes has one nullable column of every type, and a NOT NULL one.
var allTypes = []Column{
	{Name: "i2", Type: Int2}, {Name: "i4", Type: Int4}, {Name: "i8", Type: Int8},
	{Name: "b", Type: Bool}, {Name: "t", Type: Text}, {Name: "vc", Type: Varchar, Length: 5},
	{Name: "vcu", Type: Varchar}, {Name: "c", Type: Bpchar, Length: 4}, {Name: "by", Type: Bytea},
	{Name: "ts", Type: Timestamp}, {Name: "tz", Type: Timestamptz}, {Name: "id", Type: Int8, NotNull: true},
}

func TestEveryTypeRoundTripsValuesAndNulls(t *testing.T) {
	when := time.Date(2026, 12, 1, 19, 30, 0, 123456789, time.UTC)
	full := []any{int16(-32768), int32(math.MaxInt32), int64(math.MinInt64), true, "héllo", "abcde",
		strings.Repeat("x", 3000), "ab", []byte{0, 1, 2}, MicrosOf(when), MicrosInfinity, int64(7)}
	fullWant := slicesClone(full)
	fullWant[7] = "ab  " // char(4) is space-padded
	cases := []struct {
		name      string
		vals, out []any
	}{
		{"every type set", full, fullWant},
		{"every nullable column NULL",
			[]any{nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, int64(1)},
			[]any{nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, int64(1)}},
		{"zero values are not NULL",
			[]any{int16(0), int32(0), int64(0), false, "", "", "", "", []byte{}, Micros(0), Micros(0), int64(0)},
			[]any{int16(0), int32(0), int64(0), false, "", "", "", "    ", []byte{}, Micros(0), Micros(0), int64(0)}},
		{"Go values converted",
			[]any{7, int8(-3), uint32(9), false, []byte("t"), []byte("v"), "u", []byte("日本"), "s", Epoch2000, when, 5},
			[]any{int16(7), int32(-3), int64(9), false, "t", "v", "u", "日本  ", []byte("s"), Micros(0), MicrosOf(when), int64(5)}},
		{"trailing spaces beyond the limit are cut",
			[]any{nil, nil, nil, nil, nil, "abcde   ", nil, "abcd  ", nil, nil, nil, int64(1)},
			[]any{nil, nil, nil, nil, nil, "abcde", nil, "abcd", nil, nil, nil, int64(1)}},
		{"one NULL among values",
			[]any{int16(1), nil, int64(3), true, "x", "y", "z", "w", []byte("q"), Micros(-1), MicrosNegInfinity, int64(9)},
			[]any{int16(1), nil, int64(3), true, "x", "y", "z", "w   ", []byte("q"), Micros(-1), MicrosNegInfinity, int64(9)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Encode(allTypes, c.vals)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := Decode(allTypes, b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, c.out) {
				t.Fatalf("got  %#v\nwant %#v", got, c.out)
			}
			for i := range allTypes {
				v, err := ValueAt(allTypes, b, i)
				if err != nil || !reflect.DeepEqual(v, c.out[i]) {
					t.Fatalf("ValueAt(%d) = %#v, %v; want %#v", i, v, err, c.out[i])
				}
			}
		})
	}
}

func slicesClone(v []any) []any { return append([]any(nil), v...) }

// TestFormatOneRowsDecodeUnchanged: a row without NULLs encodes exactly as
// format 1 did (count, then int64 varints and length-prefixed bytes), so
// the heap of a format-1 directory needs no rewrite at upgrade.
func TestFormatOneRowsDecodeUnchanged(t *testing.T) {
	schema := []Column{{Name: "id", Type: Int8}, {Name: "name", Type: Bytea}, {Name: "n", Type: Int8}}
	v1 := []byte{3, 0xd8, 0x04, 3, 'a', 'b', 'c', 9} // 300, "abc", -5 as format 1 wrote them
	got, err := Decode(schema, v1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []any{int64(300), []byte("abc"), int64(-5)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	again, err := Encode(schema, got)
	if err != nil || !bytes.Equal(again, v1) {
		t.Fatalf("re-encoded %x (%v), want %x", again, err, v1)
	}
}

func TestEncodeRefusesValuesTheColumnCannotHold(t *testing.T) {
	base := func(i int, v any) []any {
		vals := []any{nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, int64(1)}
		vals[i] = v
		return vals
	}
	cases := []struct {
		name    string
		vals    []any
		want    error
		wantCol string
	}{
		{"too few", []any{int64(1)}, ErrWrongColumnCount, ""},
		{"NULL in NOT NULL", base(11, nil), ErrNotNull, "id"},
		{"int2 overflow", base(0, 40000), ErrOutOfRange, "i2"},
		{"int4 underflow", base(1, int64(math.MinInt32)-1), ErrOutOfRange, "i4"},
		{"uint64 too big for int8", base(2, uint64(math.MaxUint64)), ErrWrongType, "i8"},
		{"varchar too long", base(5, "abcdef"), ErrTooLong, "vc"},
		{"varchar counts characters", base(5, "ééééé!"), ErrTooLong, "vc"},
		{"char too long", base(7, "abcde"), ErrTooLong, "c"},
		{"text not UTF-8", base(4, []byte{0xff}), ErrInvalidText, "t"},
		{"text with NUL", base(4, "a\x00b"), ErrInvalidText, "t"},
		{"string in int column", base(2, "1"), ErrWrongType, "i8"},
		{"int in bool column", base(3, 1), ErrWrongType, "b"},
		{"float", base(2, 1.5), ErrWrongType, "i8"},
		{"int in timestamp", base(9, 5), ErrWrongType, "ts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Encode(allTypes, c.vals)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if c.wantCol == "" {
				return
			}
			var ve *ValueError
			var te *TypeError
			switch {
			case errors.As(err, &ve) && ve.Column == c.wantCol:
			case errors.As(err, &te) && te.Column == c.wantCol:
			default:
				t.Fatalf("err = %v, want it to name column %q", err, c.wantCol)
			}
		})
	}
}

func TestDecodeRejectsDamagedBytes(t *testing.T) {
	schema := []Column{{Name: "id", Type: Int8}, {Name: "name", Type: Bytea}, {Name: "n", Type: Int8}}
	good, err := Encode(schema, []any{int64(300), []byte("abc"), int64(-5)})
	if err != nil {
		t.Fatal(err)
	}
	withNull, err := Encode(schema, []any{int64(300), nil, int64(-5)})
	if err != nil {
		t.Fatal(err)
	}
	typed := func(c Column, b []byte) func() error {
		return func() error { _, err := Decode([]Column{c}, b); return err }
	}
	cases := map[string]func() error{
		"empty":       func() error { _, err := Decode(schema, nil); return err },
		"truncated":   func() error { _, err := Decode(schema, good[:len(good)-1]); return err },
		"trailing":    func() error { _, err := Decode(schema, append(append([]byte{}, good...), 0)); return err },
		"wrong count": func() error { _, err := Decode(schema, append([]byte{2}, good[1:]...)); return err },
		"huge length": func() error { _, err := Decode(schema, []byte{3, 2, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 'a'}); return err },
		"bitmap without NULL": func() error {
			b := append([]byte{}, withNull...)
			b[3] = 0 // the bitmap byte after the 3-byte count
			_, err := Decode(schema, b)
			return err
		},
		"bitmap past last column": func() error {
			b := append([]byte{}, withNull...)
			b[3] |= 0x80
			_, err := Decode(schema, b)
			return err
		},
		"bool 2":              typed(Column{Name: "b", Type: Bool}, []byte{1, 2}),
		"int2 out of range":   typed(Column{Name: "x", Type: Int2}, append([]byte{1}, 0x80, 0x80, 0x04)),
		"varchar too long":    typed(Column{Name: "v", Type: Varchar, Length: 1}, []byte{1, 2, 'a', 'b'}),
		"char not padded":     typed(Column{Name: "c", Type: Bpchar, Length: 3}, []byte{1, 1, 'a'}),
		"text not UTF-8":      typed(Column{Name: "t", Type: Text}, []byte{1, 1, 0xff}),
		"unknown column type": typed(Column{Name: "t", Type: 99}, []byte{1, 0}),
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			if err := f(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestTypeNamesAreTheOnesPostgreSQLUses(t *testing.T) {
	want := map[Type]string{Int2: "int2", Int4: "int4", Int8: "int8", Bool: "bool", Text: "text",
		Varchar: "varchar", Bpchar: "bpchar", Bytea: "bytea", Timestamp: "timestamp", Timestamptz: "timestamptz"}
	if len(Types()) != len(want) {
		t.Fatalf("Types() = %v, want the %d of %v", Types(), len(want), want)
	}
	for _, ty := range Types() {
		b, err := ty.MarshalText()
		if err != nil || string(b) != want[ty] {
			t.Fatalf("%d marshals as %q (%v), want %q", ty, b, err, want[ty])
		}
		var back Type
		if err := back.UnmarshalText(b); err != nil || back != ty {
			t.Fatalf("%s: back %v err %v", ty, back, err)
		}
	}
	for _, bad := range []string{"float", "int64", "bytes"} {
		var ty Type
		if err := ty.UnmarshalText([]byte(bad)); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
	if got := (Column{Name: "x", Type: Varchar, Length: 10}).TypeName(); got != "varchar(10)" {
		t.Fatalf("TypeName = %q", got)
	}
}

func TestColumnValidateChecksLengths(t *testing.T) {
	cases := []struct {
		col Column
		ok  bool
	}{
		{Column{Name: "a", Type: Varchar}, true},
		{Column{Name: "a", Type: Varchar, Length: 10}, true},
		{Column{Name: "a", Type: Bpchar, Length: 1}, true},
		{Column{Name: "a", Type: Bpchar}, false},
		{Column{Name: "a", Type: Varchar, Length: -1}, false},
		{Column{Name: "a", Type: Varchar, Length: MaxLength + 1}, false},
		{Column{Name: "a", Type: Int8, Length: 3}, false},
		{Column{Name: "", Type: Int8}, false},
		{Column{Name: "a", Type: 0}, false},
	}
	for _, c := range cases {
		if err := c.col.Validate(); (err == nil) != c.ok {
			t.Errorf("%+v: Validate = %v, want ok=%v", c.col, err, c.ok)
		}
	}
}

func TestMicrosCountsFromTwoThousand(t *testing.T) {
	cases := []struct {
		t    time.Time
		want Micros
	}{
		{Epoch2000, 0},
		{Epoch2000.Add(time.Second + time.Microsecond), 1_000_001},
		{Epoch2000.Add(-time.Microsecond), -1},
		{time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), -946684800_000_000},
	}
	for _, c := range cases {
		if got := MicrosOf(c.t); got != c.want {
			t.Errorf("MicrosOf(%v) = %d, want %d", c.t, got, c.want)
		}
		if back := c.want.Time(); !back.Equal(c.t) {
			t.Errorf("Micros(%d).Time() = %v, want %v", c.want, back, c.t)
		}
	}
	if s := Micros(1_500_000).String(); s != "2000-01-01 00:00:01.5" {
		t.Errorf("String = %q", s)
	}
}

func FuzzRowDecode(f *testing.F) {
	f.Add(uint8(0), []byte{3, 0xd8, 0x04, 3, 'a', 'b', 'c', 9})
	f.Add(uint8(0), []byte{})
	f.Add(uint8(0), []byte{3, 0, 0xFF, 0})
	full, _ := Encode(allTypes, []any{int16(1), int32(2), int64(3), true, "t", "v", "u", "c", []byte("b"), Micros(4), Micros(5), int64(6)})
	f.Add(uint8(1), full)
	nulls, _ := Encode(allTypes, []any{nil, int32(2), nil, false, nil, "v", nil, "c", nil, Micros(4), nil, int64(6)})
	f.Add(uint8(1), nulls)
	schemas := [][]Column{
		{{Name: "id", Type: Int8}, {Name: "name", Type: Bytea}, {Name: "n", Type: Int8}},
		allTypes,
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		schema := schemas[int(which)%len(schemas)]
		vals, err := Decode(schema, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		again, err := Encode(schema, vals)
		if err != nil {
			t.Fatalf("decoded row does not re-encode: %v", err)
		}
		back, err := Decode(schema, again)
		if err != nil || !reflect.DeepEqual(back, vals) {
			t.Fatalf("re-decode mismatch: %v %v", back, err)
		}
	})
}
