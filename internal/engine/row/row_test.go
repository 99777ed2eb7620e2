package row

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
)

var testSchema = []Column{{"id", Int64}, {"name", Bytes}, {"n", Int64}}

func TestEncodeDecodeRoundTripsEveryValue(t *testing.T) {
	cases := []struct {
		name string
		vals []any
		want []any
	}{
		{"zeros", []any{int64(0), []byte{}, int64(0)}, []any{int64(0), []byte{}, int64(0)}},
		{"extremes", []any{int64(math.MinInt64), []byte("x"), int64(math.MaxInt64)}, []any{int64(math.MinInt64), []byte("x"), int64(math.MaxInt64)}},
		{"go int and string accepted", []any{7, "hello", int32(-3)}, []any{int64(7), []byte("hello"), int64(-3)}},
		{"large bytes", []any{int64(1), bytes.Repeat([]byte{0xAB}, 5000), int64(-1)}, []any{int64(1), bytes.Repeat([]byte{0xAB}, 5000), int64(-1)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Encode(testSchema, c.vals)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := Decode(testSchema, b)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestEncodeRejectsBadRowsWithTypedErrors(t *testing.T) {
	cases := []struct {
		name    string
		vals    []any
		want    error
		wantCol string
	}{
		{"too few", []any{int64(1)}, ErrWrongColumnCount, ""},
		{"too many", []any{int64(1), []byte{}, int64(2), int64(3)}, ErrWrongColumnCount, ""},
		{"bytes in int column", []any{[]byte("1"), []byte{}, int64(2)}, ErrWrongType, "id"},
		{"int in bytes column", []any{int64(1), int64(2), int64(2)}, ErrWrongType, "name"},
		{"nil value", []any{int64(1), []byte{}, nil}, ErrWrongType, "n"},
		{"float", []any{int64(1), []byte{}, 1.5}, ErrWrongType, "n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Encode(testSchema, c.vals)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if c.wantCol != "" {
				var te *TypeError
				if !errors.As(err, &te) || te.Column != c.wantCol {
					t.Fatalf("err = %v, want a TypeError naming column %q", err, c.wantCol)
				}
			}
		})
	}
}

func TestDecodeRejectsDamagedBytes(t *testing.T) {
	good, err := Encode(testSchema, []any{int64(300), []byte("abc"), int64(-5)})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty":          nil,
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(append([]byte{}, good...), 0),
		"wrong count":    append([]byte{2}, good[1:]...),
		"huge length":    {3, 2, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 'a'},
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(testSchema, b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestTypeNamesRoundTripThroughText(t *testing.T) {
	for _, ty := range []Type{Int64, Bytes} {
		b, err := ty.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Type
		if err := back.UnmarshalText(b); err != nil || back != ty {
			t.Fatalf("%s: back %v err %v", ty, back, err)
		}
	}
	var bad Type
	if err := bad.UnmarshalText([]byte("float")); err == nil {
		t.Fatal("float accepted")
	}
}

func FuzzRowDecode(f *testing.F) {
	good, _ := Encode(testSchema, []any{int64(300), []byte("abc"), int64(-5)})
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{3, 0, 0xFF, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		vals, err := Decode(testSchema, b)
		if err != nil {
			return
		}
		again, err := Encode(testSchema, vals)
		if err != nil {
			t.Fatalf("decoded row does not re-encode: %v", err)
		}
		back, err := Decode(testSchema, again)
		if err != nil || !reflect.DeepEqual(back, vals) {
			t.Fatalf("re-decode mismatch: %v %v", back, err)
		}
	})
}
