package row

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Type is a column type.
type Type uint8

// Column types.
const (
	Int64 Type = 1 // signed 64-bit integer; Go value int64 (int and int32 accepted by Encode)
	Bytes Type = 2 // byte string; Go value []byte (string accepted by Encode)
)

// String names the type as the catalog stores it.
func (t Type) String() string {
	switch t {
	case Int64:
		return "int64"
	case Bytes:
		return "bytes"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Valid reports whether t is a known column type.
func (t Type) Valid() bool { return t == Int64 || t == Bytes }

// MarshalText stores the type by name.
func (t Type) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("unknown column type %d", uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText parses a type name ("int64" or "bytes").
func (t *Type) UnmarshalText(b []byte) error {
	p, err := ParseType(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// ParseType parses a type name ("int64" or "bytes").
func ParseType(s string) (Type, error) {
	switch s {
	case "int64":
		return Int64, nil
	case "bytes":
		return Bytes, nil
	}
	return 0, fmt.Errorf("unknown column type %q (want int64 or bytes)", s)
}

// Column is one column of a schema.
type Column struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
}

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

// Encode encodes vals, which must match schema in count and types.
func Encode(schema []Column, vals []any) ([]byte, error) {
	return AppendEncode(nil, schema, vals)
}

// AppendEncode is Encode appending to dst.
func AppendEncode(dst []byte, schema []Column, vals []any) ([]byte, error) {
	if len(vals) != len(schema) {
		return nil, fmt.Errorf("row has %d values, table has %d columns: %w", len(vals), len(schema), ErrWrongColumnCount)
	}
	dst = binary.AppendUvarint(dst, uint64(len(schema)))
	for i, c := range schema {
		switch c.Type {
		case Int64:
			v, ok := AsInt64(vals[i])
			if !ok {
				return nil, &TypeError{Column: c.Name, Want: c.Type, Got: fmt.Sprintf("%T", vals[i])}
			}
			dst = binary.AppendVarint(dst, v)
		case Bytes:
			var b []byte
			switch v := vals[i].(type) {
			case []byte:
				b = v
			case string:
				b = []byte(v)
			default:
				return nil, &TypeError{Column: c.Name, Want: c.Type, Got: fmt.Sprintf("%T", vals[i])}
			}
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		default:
			return nil, fmt.Errorf("column %q has unknown type %d", c.Name, uint8(c.Type))
		}
	}
	return dst, nil
}

// AsInt64 converts the Go integer types Encode accepts for an int64 column.
func AsInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	}
	return 0, false
}

// Decode decodes b as a row of schema: int64 columns come back as int64,
// bytes columns as []byte (a copy, not aliasing b).
func Decode(schema []Column, b []byte) ([]any, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, fmt.Errorf("column count: %w", ErrCorrupt)
	}
	if n != uint64(len(schema)) {
		return nil, fmt.Errorf("row has %d values, table has %d columns: %w", n, len(schema), ErrCorrupt)
	}
	b = b[k:]
	vals := make([]any, len(schema))
	for i, c := range schema {
		switch c.Type {
		case Int64:
			v, k := binary.Varint(b)
			if k <= 0 {
				return nil, fmt.Errorf("column %q: bad integer: %w", c.Name, ErrCorrupt)
			}
			vals[i] = v
			b = b[k:]
		case Bytes:
			l, k := binary.Uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return nil, fmt.Errorf("column %q: bad length: %w", c.Name, ErrCorrupt)
			}
			vals[i] = append([]byte{}, b[k:k+int(l)]...)
			b = b[k+int(l):]
		default:
			return nil, fmt.Errorf("column %q has unknown type %d: %w", c.Name, uint8(c.Type), ErrCorrupt)
		}
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes: %w", len(b), ErrCorrupt)
	}
	return vals, nil
}

// Int64At decodes only column i of an int64 column (index maintenance
// reads the key without decoding the whole row).
func Int64At(schema []Column, b []byte, i int) (int64, error) {
	vals, err := Decode(schema, b)
	if err != nil {
		return 0, err
	}
	if i < 0 || i >= len(vals) {
		return 0, fmt.Errorf("column %d out of range", i)
	}
	v, ok := vals[i].(int64)
	if !ok {
		return 0, &TypeError{Column: schema[i].Name, Want: Int64, Got: schema[i].Type.String()}
	}
	return v, nil
}
