package row

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// keyCols is a three-column key: an int4, a text and a bool.
var keyCols = []Column{{Name: "a", Type: Int4}, {Name: "t", Type: Text}, {Name: "b", Type: Bool}}

// compareTuples is PostgreSQL's order of (int4, text, bool) tuples, NULLS
// LAST, text in the "C" collation.
func compareTuples(x, y []any) int {
	for i := range x {
		xn, yn := x[i] == nil, y[i] == nil
		switch {
		case xn && yn:
			continue
		case xn:
			return 1
		case yn:
			return -1
		}
		var c int
		switch v := x[i].(type) {
		case int32:
			c = cmp.Compare(v, y[i].(int32))
		case string:
			c = cmp.Compare(v, y[i].(string))
		case bool:
			c = cmp.Compare(b2i(v), b2i(y[i].(bool)))
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestKeyBytesOrderAsPostgreSQLOrdersTheTuples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ints := []any{nil, int32(math.MinInt32), int32(-1), int32(0), int32(1), int32(255), int32(256), int32(math.MaxInt32)}
	texts := []any{nil, "", "a", "a\x01", "ab", "abc", "b", "é", "\xff"[:0] + "z"}
	bools := []any{nil, false, true}
	var tuples [][]any
	for range 3000 {
		tuples = append(tuples, []any{ints[r.IntN(len(ints))], texts[r.IntN(len(texts))], bools[r.IntN(len(bools))]})
	}
	for i := 1; i < len(tuples); i++ {
		x, y := tuples[i-1], tuples[i]
		kx, err := AppendKey(nil, keyCols, x)
		if err != nil {
			t.Fatal(err)
		}
		ky, err := AppendKey(nil, keyCols, y)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := bytes.Compare(kx, ky), compareTuples(x, y); got != want {
			t.Fatalf("keys of %v and %v compare %d, tuples %d", x, y, got, want)
		}
		back, err := DecodeKey(keyCols, kx)
		if err != nil || !reflect.DeepEqual(back, x) {
			t.Fatalf("DecodeKey(%x) = %v, %v; want %v", kx, back, err, x)
		}
	}
}

func TestPrefixKeysBoundEveryKeyThatExtendsThem(t *testing.T) {
	lo, _ := AppendKey(nil, keyCols, []any{5, "ab"})
	hi := KeyPrefixEnd(lo)
	for _, c := range []struct {
		vals []any
		in   bool
	}{
		{[]any{5, "ab", false}, true}, {[]any{5, "ab", nil}, true}, {[]any{5, "abc", true}, false},
		{[]any{5, "a", true}, false}, {[]any{6, "", false}, false}, {[]any{5, "aa", nil}, false},
	} {
		k, err := AppendKey(nil, keyCols, c.vals)
		if err != nil {
			t.Fatal(err)
		}
		in := bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0
		if in != c.in {
			t.Errorf("%v in the range of prefix (5, ab): %v, want %v", c.vals, in, c.in)
		}
	}
}

func TestKeyOfARowSkipsAllNullKeysAndFindsPartialOnes(t *testing.T) {
	schema := []Column{{Name: "id", Type: Int8}, {Name: "a", Type: Int4}, {Name: "t", Type: Text}, {Name: "b", Type: Bool}}
	data, err := Encode(schema, []any{int64(1), nil, nil, nil})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := KeyOf(schema, data, []int{1, 2, 3}); ok || err != nil {
		t.Fatalf("all-NULL key: ok %v, err %v; want no entry", ok, err)
	}
	data, _ = Encode(schema, []any{int64(1), 7, nil, true})
	k, ok, err := KeyOf(schema, data, []int{1, 2, 3})
	if !ok || err != nil {
		t.Fatalf("partly NULL key: ok %v, err %v", ok, err)
	}
	if !KeyHasNull(keyCols, k) || FormatKey(keyCols, k) != "7, null, true" {
		t.Fatalf("key %x formats as %q, has null %v", k, FormatKey(keyCols, k), KeyHasNull(keyCols, k))
	}
}

func FuzzKeyDecode(f *testing.F) {
	k, _ := AppendKey(nil, keyCols, []any{int32(-3), "a\x01b", true})
	f.Add(uint8(0), k)
	k, _ = AppendKey(nil, keyCols, []any{nil, nil})
	f.Add(uint8(0), k)
	k, _ = AppendKey(nil, allTypes, []any{int16(1), int32(2), int64(3), false, "t", "v", "u", "cc  ", []byte{0, 0xff, 0}, Micros(4), Micros(5), int64(6)})
	f.Add(uint8(1), k)
	f.Add(uint8(1), []byte{1, 0x80, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(0), []byte{1, 0, 0, 0})
	schemas := [][]Column{keyCols, allTypes}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		cols := schemas[int(which)%len(schemas)]
		vals, err := DecodeKey(cols, b)
		if err != nil {
			if !errors.Is(err, ErrBadKey) {
				t.Fatalf("error %v does not wrap ErrBadKey", err)
			}
			return
		}
		again, err := AppendKey(nil, cols, vals)
		if err != nil {
			t.Fatalf("decoded key %v does not re-encode: %v", vals, err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("key %x decodes to %v, which encodes as %x", b, vals, again)
		}
	})
}
