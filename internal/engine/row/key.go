package row

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Index keys.
//
// An index key is the values of an index's columns, encoded so that
// bytes.Compare of two keys orders them as PostgreSQL's B-tree orders the
// tuples, column by column: integers and timestamps numerically, false
// before true, text, varchar, bpchar and bytea bytewise (the "C"
// collation), and NULL after every value (NULLS LAST, PostgreSQL's
// default for ascending indexes). The B-tree then compares keys without
// knowing their types. Each column is one tag byte, then its value:
//
//	tag 0x02         NULL (no value follows)
//	tag 0x01 + value
//	  int2, int4, int8, timestamp, timestamptz: 8 bytes big-endian, sign
//	                  bit flipped (every integer width encodes alike, so a
//	                  key of an int2 column equals the int8 key of the same
//	                  number: the B-tree's layout 1 stored every key as int64)
//	  bool:           1 byte, 0 or 1
//	  text, varchar, bpchar, bytea: the bytes, each 0x00 written 0x00 0xFF,
//	                  then the terminator 0x00 0x01
//
// Every column's encoding is self-delimiting, so the encoding of a prefix
// of the columns is a byte prefix of the whole key, and KeyPrefixEnd
// bounds every key that extends it.
const (
	keyValue   byte = 0x01
	keyNull    byte = 0x02
	keyEscape  byte = 0xFF // after 0x00: a 0x00 byte of the value
	keyEnd     byte = 0x01 // after 0x00: the end of the value
	keyPastEnd byte = 0xFF // above every tag
)

// ErrBadKey is wrapped by DecodeKey's errors: the bytes are not a key of
// the given columns.
var ErrBadKey = errors.New("malformed index key")

// Keyable reports whether an index may have a column of type t (every
// type has a B-tree order).
func Keyable(t Type) bool { return t.Valid() }

// AppendKey appends the key encoding of vals, one value per column of cols
// (a prefix of an index's columns encodes a prefix key). Each value is
// first normalized as Normalize does for its column (Go integers widened,
// char(n) padded...) except that NULL is accepted whatever the column's
// NOT NULL; a value Normalize refuses is returned as its error.
func AppendKey(dst []byte, cols []Column, vals []any) ([]byte, error) {
	if len(vals) > len(cols) {
		return nil, fmt.Errorf("%d key values for %d columns: %w", len(vals), len(cols), ErrWrongType)
	}
	for i, v := range vals {
		c := cols[i]
		c.NotNull = false
		nv, err := Normalize(c, v)
		if err != nil {
			return nil, err
		}
		dst = appendKeyValue(dst, nv)
	}
	return dst, nil
}

// appendKeyValue appends one normalized value (nil for NULL).
func appendKeyValue(dst []byte, v any) []byte {
	putInt := func(x int64) []byte {
		return binary.BigEndian.AppendUint64(append(dst, keyValue), uint64(x)^(1<<63))
	}
	putBytes := func(b []byte) []byte {
		dst = append(dst, keyValue)
		for {
			i := bytes.IndexByte(b, 0)
			if i < 0 {
				break
			}
			dst = append(append(dst, b[:i]...), 0, keyEscape)
			b = b[i+1:]
		}
		return append(append(dst, b...), 0, keyEnd)
	}
	switch x := v.(type) {
	case nil:
		return append(dst, keyNull)
	case int64:
		return putInt(x)
	case int32:
		return putInt(int64(x))
	case int16:
		return putInt(int64(x))
	case Micros:
		return putInt(int64(x))
	case bool:
		if x {
			return append(dst, keyValue, 1)
		}
		return append(dst, keyValue, 0)
	case []byte:
		return putBytes(x)
	case string:
		return putBytes([]byte(x))
	}
	panic(fmt.Sprintf("row: key of %T (not normalized)", v))
}

// KeyOf is the index key of the columns at positions of the encoded row
// data (of schema), and false when every one of them is NULL: such a row
// has no index entry (a lookup never matches NULL).
func KeyOf(schema []Column, data []byte, positions []int) ([]byte, bool, error) {
	vals, err := Decode(schema, data)
	if err != nil {
		return nil, false, err
	}
	var key []byte
	allNull := true
	for _, p := range positions {
		if p < 0 || p >= len(vals) {
			return nil, false, fmt.Errorf("key column %d of a %d-column row: %w", p, len(vals), ErrCorrupt)
		}
		allNull = allNull && vals[p] == nil
		key = appendKeyValue(key, vals[p])
	}
	if allNull {
		return nil, false, nil
	}
	return key, true, nil
}

// KeyHasNull reports whether a well-formed key of cols holds a NULL (a
// unique index never refuses such a key: NULLs are distinct).
func KeyHasNull(cols []Column, key []byte) bool {
	vals, err := DecodeKey(cols, key)
	if err != nil {
		return false
	}
	for _, v := range vals {
		if v == nil {
			return true
		}
	}
	return false
}

// KeyPrefixEnd returns the smallest byte string above every key that
// begins with prefix (a whole or prefix key): the exclusive, or since no
// key equals it, inclusive upper bound of a prefix scan.
func KeyPrefixEnd(prefix []byte) []byte {
	return append(bytes.Clone(prefix), keyPastEnd)
}

// DecodeKey decodes a key of cols (as AppendKey wrote it, for all or a
// prefix of the columns) into Go values as Decode returns them. It never
// panics; bytes AppendKey could not have written are ErrBadKey.
func DecodeKey(cols []Column, b []byte) ([]any, error) {
	var out []any
	for i := 0; len(b) > 0; i++ {
		if i >= len(cols) {
			return nil, fmt.Errorf("%d bytes after the last of %d columns: %w", len(b), len(cols), ErrBadKey)
		}
		c := cols[i]
		tag := b[0]
		b = b[1:]
		if tag == keyNull {
			out = append(out, nil)
			continue
		}
		if tag != keyValue {
			return nil, fmt.Errorf("column %q: tag %#x: %w", c.Name, tag, ErrBadKey)
		}
		var v any
		switch c.Type {
		case Int2, Int4, Int8, Timestamp, Timestamptz:
			if len(b) < 8 {
				return nil, fmt.Errorf("column %q: %d bytes for an integer: %w", c.Name, len(b), ErrBadKey)
			}
			x := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
			b = b[8:]
			switch c.Type {
			case Int2:
				if x < math.MinInt16 || x > math.MaxInt16 {
					return nil, fmt.Errorf("column %q: %d out of smallint range: %w", c.Name, x, ErrBadKey)
				}
				v = int16(x)
			case Int4:
				if x < math.MinInt32 || x > math.MaxInt32 {
					return nil, fmt.Errorf("column %q: %d out of integer range: %w", c.Name, x, ErrBadKey)
				}
				v = int32(x)
			case Int8:
				v = x
			default:
				v = Micros(x)
			}
		case Bool:
			if len(b) < 1 || b[0] > 1 {
				return nil, fmt.Errorf("column %q: bad boolean: %w", c.Name, ErrBadKey)
			}
			v = b[0] == 1
			b = b[1:]
		case Text, Varchar, Bpchar, Bytea:
			var val []byte
			for {
				i := bytes.IndexByte(b, 0)
				if i < 0 || i+1 >= len(b) {
					return nil, fmt.Errorf("column %q: unterminated value: %w", c.Name, ErrBadKey)
				}
				val = append(val, b[:i]...)
				esc := b[i+1]
				b = b[i+2:]
				if esc == keyEnd {
					break
				}
				if esc != keyEscape {
					return nil, fmt.Errorf("column %q: byte %#x after 0x00: %w", c.Name, esc, ErrBadKey)
				}
				val = append(val, 0)
			}
			if c.Type == Bytea {
				v = append([]byte{}, val...)
			} else {
				v = string(val)
			}
		default:
			return nil, fmt.Errorf("column %q has unknown type %d: %w", c.Name, uint8(c.Type), ErrBadKey)
		}
		c.NotNull = false
		if nv, err := Normalize(c, v); err != nil || !Equal(c.Type, nv, v) {
			return nil, fmt.Errorf("column %q: a value no write stores (%v): %w", c.Name, err, ErrBadKey)
		}
		out = append(out, v)
	}
	return out, nil
}

// FormatKey renders a key of cols as PostgreSQL's messages show one:
// "1, abc" (NULL as null), or the bytes in hex when they do not decode.
func FormatKey(cols []Column, key []byte) string {
	vals, err := DecodeKey(cols, key)
	if err != nil {
		return fmt.Sprintf("\\x%x", key)
	}
	return FormatValues(vals)
}

// FormatValues renders values as PostgreSQL's "Key (a, b)=(1, x)" detail
// shows them.
func FormatValues(vals []any) string {
	var s []byte
	for i, v := range vals {
		if i > 0 {
			s = append(s, ", "...)
		}
		switch x := v.(type) {
		case nil:
			s = append(s, "null"...)
		case []byte:
			s = fmt.Appendf(s, "\\x%x", x)
		default:
			s = fmt.Append(s, x)
		}
	}
	return string(s)
}
