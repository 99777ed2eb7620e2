package row

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Errors of values that do not fit their column. Each is returned inside
// a *ValueError naming the column.
var (
	// ErrNotNull: NULL (Go nil) in a NOT NULL column (PostgreSQL 23502).
	ErrNotNull = errors.New("null value violates not-null constraint")
	// ErrTooLong: text longer than the column's varchar(n) or char(n)
	// (PostgreSQL 22001).
	ErrTooLong = errors.New("value too long")
	// ErrOutOfRange: an integer outside int2's or int4's range (22003).
	ErrOutOfRange = errors.New("value out of range")
	// ErrInvalidText: text that is not UTF-8 or holds a NUL byte (22021).
	ErrInvalidText = errors.New("invalid text")
)

// ValueError is a value refused by its column. It matches its Err
// (ErrNotNull, ErrTooLong, ErrOutOfRange, ErrInvalidText) with errors.Is.
type ValueError struct {
	Column string // column name
	Type   string // the column's type as SQL writes it
	Err    error
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("column %q (%s): %v", e.Column, e.Type, e.Err)
}

// Unwrap returns Err.
func (e *ValueError) Unwrap() error { return e.Err }

func valueErr(c Column, err error) error {
	return &ValueError{Column: c.Name, Type: c.TypeName(), Err: err}
}

func typeErr(c Column, v any) error {
	return &TypeError{Column: c.Name, Want: c.Type, Got: fmt.Sprintf("%T", v)}
}

// Normalize converts v to the Go value of column c (the one Decode
// returns: see the type constants) and checks it as PostgreSQL does on
// write: nil is NULL and refused by a NOT NULL column; integers must fit
// the type; text must be UTF-8 without NUL; varchar(n) and char(n) refuse
// more than n characters, except that trailing spaces beyond n are cut
// (as PostgreSQL does); char(n) is padded with spaces to n characters.
// It is the one place values are checked: Encode calls it, and a server
// parsing SQL literals may call it to check a value early.
func Normalize(c Column, v any) (any, error) {
	if v == nil {
		if c.NotNull {
			return nil, valueErr(c, ErrNotNull)
		}
		return nil, nil
	}
	switch c.Type {
	case Int2, Int4, Int8:
		x, ok := asInt64(v)
		if !ok {
			return nil, typeErr(c, v)
		}
		switch c.Type {
		case Int2:
			if x < math.MinInt16 || x > math.MaxInt16 {
				return nil, valueErr(c, fmt.Errorf("%d: smallint %w", x, ErrOutOfRange))
			}
			return int16(x), nil
		case Int4:
			if x < math.MinInt32 || x > math.MaxInt32 {
				return nil, valueErr(c, fmt.Errorf("%d: integer %w", x, ErrOutOfRange))
			}
			return int32(x), nil
		}
		return x, nil
	case Bool:
		b, ok := v.(bool)
		if !ok {
			return nil, typeErr(c, v)
		}
		return b, nil
	case Bytea:
		switch x := v.(type) {
		case []byte:
			return x, nil
		case string:
			return []byte(x), nil
		}
		return nil, typeErr(c, v)
	case Text, Varchar, Bpchar:
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case []byte:
			s = string(x)
		default:
			return nil, typeErr(c, v)
		}
		return checkText(c, s)
	case Timestamp, Timestamptz:
		switch x := v.(type) {
		case Micros:
			return x, nil
		case time.Time:
			return MicrosOf(x), nil
		}
		return nil, typeErr(c, v)
	}
	return nil, fmt.Errorf("column %q has unknown type %d", c.Name, uint8(c.Type))
}

func checkText(c Column, s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", valueErr(c, fmt.Errorf("not UTF-8: %w", ErrInvalidText))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", valueErr(c, fmt.Errorf("NUL byte: %w", ErrInvalidText))
	}
	if c.Length == 0 || c.Type == Text {
		return s, nil
	}
	n := utf8.RuneCountInString(s)
	if n > c.Length {
		// PostgreSQL cuts trailing spaces beyond the limit rather than fail.
		cut := byteOffsetOfRune(s, c.Length)
		if strings.TrimRight(s[cut:], " ") != "" {
			return "", valueErr(c, fmt.Errorf("%d characters for %s: %w", n, c.TypeName(), ErrTooLong))
		}
		s, n = s[:cut], c.Length
	}
	if c.Type == Bpchar && n < c.Length {
		s += strings.Repeat(" ", c.Length-n)
	}
	return s, nil
}

// byteOffsetOfRune is the byte offset of s's n-th rune (len(s) if fewer).
func byteOffsetOfRune(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// asInt64 converts any Go integer type; unsigned values above MaxInt64
// are refused.
func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case uint:
		return int64(x), uint64(x) <= math.MaxInt64
	}
	return 0, false
}

// AsInt64 converts the Go value of any integer column (int16, int32,
// int64, or another Go integer) to int64.
func AsInt64(v any) (int64, bool) { return asInt64(v) }

// Equal reports whether two Go values of column type t are equal (NULL
// equals only NULL here: this is identity, not SQL's three-valued =).
func Equal(t Type, a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	switch t {
	case Bytea:
		x, ok1 := a.([]byte)
		y, ok2 := b.([]byte)
		return ok1 && ok2 && bytes.Equal(x, y)
	}
	return a == b
}
