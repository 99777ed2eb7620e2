package row

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Errors callers branch on.
var (
	// ErrWrongColumnCount: the row has a different number of values than
	// the schema has columns.
	ErrWrongColumnCount = errors.New("wrong number of columns")
	// ErrWrongType: a value's Go type does not match its column's type.
	// The returned error is a *TypeError naming the column.
	ErrWrongType = errors.New("wrong column type")
	// ErrCorrupt: bytes that do not decode as a row of the schema.
	ErrCorrupt = errors.New("corrupt row")
)

// TypeError is a value of the wrong type for its column. It matches
// ErrWrongType with errors.Is.
type TypeError struct {
	Column string // column name
	Want   Type   // the column's type
	Got    string // the Go type of the value given
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("column %q: want %s, got %s: %v", e.Column, e.Want, e.Got, ErrWrongType)
}

// Unwrap makes errors.Is(err, ErrWrongType) true.
func (e *TypeError) Unwrap() error { return ErrWrongType }

// nullFlag marks, in an encoded row's leading count, that a null bitmap
// follows. Counts are below MaxColumns, so the two never mix.
const nullFlag = 1 << 16

// Encode encodes vals, which must match schema in count and types (see
// Normalize for the values each type accepts and the checks made).
func Encode(schema []Column, vals []any) ([]byte, error) {
	return AppendEncode(nil, schema, vals)
}

// AppendEncode is Encode appending to dst.
func AppendEncode(dst []byte, schema []Column, vals []any) ([]byte, error) {
	if len(vals) != len(schema) {
		return nil, fmt.Errorf("row has %d values, table has %d columns: %w", len(vals), len(schema), ErrWrongColumnCount)
	}
	if len(schema) > MaxColumns {
		return nil, fmt.Errorf("%d columns, at most %d: %w", len(schema), MaxColumns, ErrWrongColumnCount)
	}
	norm := make([]any, len(vals))
	nulls := false
	for i, c := range schema {
		v, err := Normalize(c, vals[i])
		if err != nil {
			return nil, err
		}
		norm[i] = v
		nulls = nulls || v == nil
	}
	if !nulls {
		dst = binary.AppendUvarint(dst, uint64(len(schema)))
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(schema))|nullFlag)
		bm := make([]byte, (len(schema)+7)/8)
		for i, v := range norm {
			if v == nil {
				bm[i/8] |= 1 << (i % 8)
			}
		}
		dst = append(dst, bm...)
	}
	for i, c := range schema {
		if norm[i] != nil {
			dst = AppendValue(dst, c.Type, norm[i])
		}
	}
	return dst, nil
}

// AppendValue appends the encoding of v, a normalized non-NULL value of
// type t (see Normalize), as a row stores it.
func AppendValue(dst []byte, t Type, v any) []byte {
	switch x := v.(type) {
	case int64:
		return binary.AppendVarint(dst, x)
	case int32:
		return binary.AppendVarint(dst, int64(x))
	case int16:
		return binary.AppendVarint(dst, int64(x))
	case Micros:
		return binary.AppendVarint(dst, int64(x))
	case bool:
		if x {
			return append(dst, 1)
		}
		return append(dst, 0)
	case []byte:
		dst = binary.AppendUvarint(dst, uint64(len(x)))
		return append(dst, x...)
	case string:
		dst = binary.AppendUvarint(dst, uint64(len(x)))
		return append(dst, x...)
	}
	panic(fmt.Sprintf("row: AppendValue of %T for %s (not normalized)", v, t))
}

// Decode decodes b as a row of schema, each column as its type's Go value
// (nil for NULL; bytea as a copy, never aliasing b). Bytes that could not
// have been written for the schema (text that Normalize would refuse, an
// int2 out of range...) are ErrCorrupt. NOT NULL is not checked on read:
// versions written before a column became NOT NULL (ADD PRIMARY KEY) may
// still be visible to old snapshots.
func Decode(schema []Column, b []byte) ([]any, error) {
	vals := make([]any, len(schema))
	err := decode(schema, b, func(i int, v any) { vals[i] = v })
	if err != nil {
		return nil, err
	}
	return vals, nil
}

// ValueAt decodes only column i of the row (index maintenance reads the
// key without keeping the other values); nil for NULL.
func ValueAt(schema []Column, b []byte, i int) (any, error) {
	if i < 0 || i >= len(schema) {
		return nil, fmt.Errorf("column %d out of range", i)
	}
	var out any
	err := decode(schema, b, func(j int, v any) {
		if j == i {
			out = v
		}
	})
	return out, err
}

func decode(schema []Column, b []byte, put func(int, any)) error {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return fmt.Errorf("column count: %w", ErrCorrupt)
	}
	b = b[k:]
	var bm []byte
	if n&nullFlag != 0 {
		n &^= nullFlag
		if n != uint64(len(schema)) {
			return fmt.Errorf("row has %d values, table has %d columns: %w", n, len(schema), ErrCorrupt)
		}
		l := (len(schema) + 7) / 8
		if len(b) < l {
			return fmt.Errorf("null bitmap truncated: %w", ErrCorrupt)
		}
		bm, b = b[:l], b[l:]
		any1 := false
		for _, x := range bm {
			any1 = any1 || x != 0
		}
		if !any1 {
			return fmt.Errorf("null bitmap without a NULL: %w", ErrCorrupt)
		}
		if r := len(schema) % 8; r != 0 && bm[l-1]>>r != 0 {
			return fmt.Errorf("null bitmap marks columns past the last: %w", ErrCorrupt)
		}
	} else if n != uint64(len(schema)) {
		return fmt.Errorf("row has %d values, table has %d columns: %w", n, len(schema), ErrCorrupt)
	}
	for i, c := range schema {
		if bm != nil && bm[i/8]&(1<<(i%8)) != 0 {
			put(i, nil)
			continue
		}
		v, k, err := decodeValue(c, b)
		if err != nil {
			return fmt.Errorf("column %q: %v: %w", c.Name, err, ErrCorrupt)
		}
		put(i, v)
		b = b[k:]
	}
	if len(b) != 0 {
		return fmt.Errorf("%d trailing bytes: %w", len(b), ErrCorrupt)
	}
	return nil
}

// decodeValue decodes one non-NULL value of c from the front of b,
// returning it and the bytes it took.
func decodeValue(c Column, b []byte) (any, int, error) {
	switch c.Type {
	case Int2, Int4, Int8, Timestamp, Timestamptz:
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, 0, errors.New("bad integer")
		}
		switch c.Type {
		case Int2:
			if v < math.MinInt16 || v > math.MaxInt16 {
				return nil, 0, fmt.Errorf("int2 %d out of range", v)
			}
			return int16(v), k, nil
		case Int4:
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, 0, fmt.Errorf("int4 %d out of range", v)
			}
			return int32(v), k, nil
		case Int8:
			return v, k, nil
		}
		return Micros(v), k, nil
	case Bool:
		if len(b) < 1 || b[0] > 1 {
			return nil, 0, errors.New("bad boolean")
		}
		return b[0] == 1, 1, nil
	case Bytea, Text, Varchar, Bpchar:
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, 0, errors.New("bad length")
		}
		raw := b[k : k+int(l)]
		if c.Type == Bytea {
			return append([]byte{}, raw...), k + int(l), nil
		}
		s := string(raw)
		if got, err := checkText(c, s); err != nil || got != s {
			return nil, 0, fmt.Errorf("text not as %s stores it", c.TypeName())
		}
		return s, k + int(l), nil
	}
	return nil, 0, fmt.Errorf("unknown type %d", uint8(c.Type))
}
