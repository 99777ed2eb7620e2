// Package types is the server's SQL type system: the PostgreSQL types a client sees (name,
// OID, size), their text and binary wire formats, parsing from text, and the one mapping
// between SQL types and the engine's column types (Storage, FromStorage). When the engine
// gains a type, it is added here and nowhere else.
//
// Values are Go values, one representation per type:
//
//	int2, int4, int8  int64 (range-checked for the type)
//	bool              bool
//	text, unknown     string
//	bytea             []byte
//	numeric           *big.Int (integers only: what sum(bigint) returns)
//	timestamptz       time.Time (UTC)
//	timestamp         time.Time (UTC, printed without an offset)
//	oid               int64 (0 to 2^32-1)
//	integer[] bigint[] []int64 (no NULL elements; only as = ANY's right side)
//	void              Void{}
//	NULL              nil
package types

import (
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
)

// T is a SQL type.
type T struct {
	Name string // PostgreSQL's name, as format_type prints it
	OID  uint32
	Size int16 // pg_type.typlen: bytes, or -1 for variable length
}

// The supported types.
var (
	Int2        = &T{"smallint", pgtype.Int2OID, 2}
	Int4        = &T{"integer", pgtype.Int4OID, 4}
	Int8        = &T{"bigint", pgtype.Int8OID, 8}
	Bool        = &T{"boolean", pgtype.BoolOID, 1}
	Text        = &T{"text", pgtype.TextOID, -1}
	Bytea       = &T{"bytea", pgtype.ByteaOID, -1}
	Numeric     = &T{"numeric", pgtype.NumericOID, -1}
	Timestamptz = &T{"timestamp with time zone", pgtype.TimestamptzOID, 8}
	Timestamp   = &T{"timestamp without time zone", pgtype.TimestampOID, 8}
	// Varchar and Bpchar are the column types character varying(n) and character(n);
	// their values read back as Text.
	Varchar = &T{"character varying", pgtype.VarcharOID, -1}
	Bpchar  = &T{"character", pgtype.BPCharOID, -1}
	// Oid is an object identifier (pg_class.oid, pg_stat_progress_vacuum.relid).
	Oid = &T{"oid", pgtype.OIDOID, 4}
	// Int4Array is integer[], accepted as a parameter of `= ANY($1)`.
	Int4Array = &T{"integer[]", pgtype.Int4ArrayOID, -1}
	Int8Array = &T{"bigint[]", pgtype.Int8ArrayOID, -1}
	// Unknown is the type of a quoted literal before context gives it one.
	Unknown = &T{"unknown", pgtype.UnknownOID, -2}
	// Void is what functions such as pg_sleep return.
	VoidT = &T{"void", 2278, 4}
)

// Void is the value of type void.
type Void struct{}

// IsInt reports whether t is one of the integer types.
func (t *T) IsInt() bool { return t == Int2 || t == Int4 || t == Int8 }

// IsArray reports whether t is one of the array types.
func (t *T) IsArray() bool { return t == Int4Array || t == Int8Array }

// Elem is an array type's element type (nil for other types).
func (t *T) Elem() *T {
	switch t {
	case Int4Array:
		return Int4
	case Int8Array:
		return Int8
	}
	return nil
}

// ByOID returns the type with the given OID (false for an OID this server does not support).
func ByOID(oid uint32) (*T, bool) {
	for _, t := range []*T{Int2, Int4, Int8, Bool, Text, Bytea, Numeric, Timestamptz, Timestamp, Oid, Int4Array, Int8Array, Unknown, VoidT} {
		if t.OID == oid {
			return t, true
		}
	}
	if oid == pgtype.VarcharOID || oid == pgtype.NameOID || oid == pgtype.BPCharOID {
		return Text, true // as parameters: text, which assignment checks against the column
	}
	return nil, false
}

// ByName returns the type a SQL type name denotes (the last part of a qualified name, as the
// parser gives it: int4, int8, bool, text, ...); ok is false for a type not supported.
func ByName(name string) (*T, bool) {
	switch strings.ToLower(name) {
	case "int2", "smallint":
		return Int2, true
	case "int4", "int", "integer", "serial4":
		return Int4, true
	case "int8", "bigint":
		return Int8, true
	case "bool", "boolean":
		return Bool, true
	case "text", "name":
		return Text, true
	case "varchar":
		return Varchar, true
	case "bpchar":
		return Bpchar, true
	case "bytea":
		return Bytea, true
	case "numeric", "decimal":
		return Numeric, true
	case "timestamptz":
		return Timestamptz, true
	case "timestamp":
		return Timestamp, true
	case "oid":
		return Oid, true
	}
	return nil, false
}

// Storage is the engine column a column of SQL type t is stored as: the engine's types
// carry PostgreSQL's names, so each maps to its own. length is n of varchar(n) and
// character(n) (0: none given; character without a length is character(1), as in
// PostgreSQL). Varchar and character columns read back as text (see FromStorage).
func Storage(t *T, name string, length int) (row.Column, error) {
	c := row.Column{Name: name}
	switch t {
	case Int2:
		c.Type = row.Int2
	case Int4:
		c.Type = row.Int4
	case Int8:
		c.Type = row.Int8
	case Bool:
		c.Type = row.Bool
	case Text:
		c.Type = row.Text
	case Varchar:
		c.Type, c.Length = row.Varchar, length
	case Bpchar:
		c.Type, c.Length = row.Bpchar, max(length, 1)
	case Bytea:
		c.Type = row.Bytea
	case Timestamp:
		c.Type = row.Timestamp
	case Timestamptz:
		c.Type = row.Timestamptz
	default:
		return c, pgerr.New(pgerr.FeatureNotSupported, "columns of type %s are not supported by engine-server", t.Name)
	}
	if err := c.Validate(); err != nil {
		return c, pgerr.Wrap(err, pgerr.InvalidParameterValue, "column \"%s\": %v", name, err)
	}
	return c, nil
}

// FromStorage is the SQL type an engine column reads as in expressions: varchar(n) reads
// as text (its length applies on write); character(n) as character, whose values keep
// their padding and compare and convert to text without it.
func FromStorage(rt row.Type) *T {
	switch rt {
	case row.Int2:
		return Int2
	case row.Int4:
		return Int4
	case row.Int8:
		return Int8
	case row.Bool:
		return Bool
	case row.Text, row.Varchar:
		return Text
	case row.Bpchar:
		return Bpchar
	case row.Bytea:
		return Bytea
	case row.Timestamp:
		return Timestamp
	case row.Timestamptz:
		return Timestamptz
	}
	return Bytea
}

// ToStorage converts a non-NULL value of SQL type t to the value the engine stores for it
// (row.Normalize checks ranges, lengths and text encoding).
func ToStorage(t *T, v any) (any, error) {
	switch x := v.(type) {
	case int64, bool, string, []byte:
		return x, nil
	case time.Time:
		return row.MicrosOf(x), nil
	}
	return nil, pgerr.New(pgerr.InternalError, "value %T does not convert to a stored %s", v, t.Name)
}

// FromStorageValue converts a value the engine returned to this package's value of its
// SQL type (nil stays nil).
func FromStorageValue(v any) any {
	switch x := v.(type) {
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case row.Micros:
		return x.Time()
	}
	return v
}

// Range checks that integer v fits t (22003 otherwise).
func Range(t *T, v int64) error {
	switch t {
	case Int2:
		if v < math.MinInt16 || v > math.MaxInt16 {
			return pgerr.New(pgerr.NumericValueOutOfRange, "smallint out of range")
		}
	case Int4:
		if v < math.MinInt32 || v > math.MaxInt32 {
			return pgerr.New(pgerr.NumericValueOutOfRange, "integer out of range")
		}
	}
	return nil
}

// FormatText is v in PostgreSQL's text output format for type t (v is not nil).
func FormatText(t *T, v any) ([]byte, error) {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(nil, x, 10), nil
	case bool:
		if x {
			return []byte("t"), nil
		}
		return []byte("f"), nil
	case string:
		return []byte(x), nil
	case []byte:
		out := make([]byte, 2+hex.EncodedLen(len(x)))
		copy(out, `\x`)
		hex.Encode(out[2:], x)
		return out, nil
	case *big.Int:
		return []byte(x.String()), nil
	case time.Time:
		if t == Timestamp {
			return []byte(x.Format("2006-01-02 15:04:05.999999")), nil
		}
		return []byte(formatTimestamptz(x)), nil
	case Void:
		return []byte{}, nil
	case []int64:
		var b []byte
		b = append(b, '{')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, e, 10)
		}
		return append(b, '}'), nil
	}
	return nil, pgerr.New(pgerr.InternalError, "no text format for %T as %s", v, t.Name)
}

// formatTimestamptz prints t as PostgreSQL does with DateStyle ISO: microseconds only when
// not zero, the offset in hours (and minutes when not whole).
func formatTimestamptz(t time.Time) string {
	s := t.Format("2006-01-02 15:04:05.999999")
	_, off := t.Zone()
	sign := '+'
	if off < 0 {
		sign, off = '-', -off
	}
	if off%3600 == 0 {
		return fmt.Sprintf("%s%c%02d", s, sign, off/3600)
	}
	return fmt.Sprintf("%s%c%02d:%02d", s, sign, off/3600, (off%3600)/60)
}

// codecs holds pgtype Maps for the binary formats. A Map caches encode and scan plans in
// itself and is not safe for concurrent use, while every connection formats and parses at
// once, so each call borrows one.
var codecs = sync.Pool{New: func() any { return pgtype.NewMap() }}

// borrow takes a Map from codecs; give it back with codecs.Put.
func borrow() *pgtype.Map {
	if m, ok := codecs.Get().(*pgtype.Map); ok {
		return m
	}
	return pgtype.NewMap()
}

// encodeBinary is v in the binary format of type oid.
func encodeBinary(oid uint32, v any) ([]byte, error) {
	m := borrow()
	defer codecs.Put(m)
	return m.Encode(oid, pgtype.BinaryFormatCode, v, nil)
}

// scan decodes b, of type oid in the given format, into dst.
func scan(oid uint32, format int16, b []byte, dst any) error {
	m := borrow()
	defer codecs.Put(m)
	return m.Scan(oid, format, b, dst)
}

// FormatBinary is v in PostgreSQL's binary format for type t (v is not nil).
func FormatBinary(t *T, v any) ([]byte, error) {
	switch x := v.(type) {
	case *big.Int:
		v = pgtype.Numeric{Int: x, Valid: true}
	case string:
		if t == Unknown {
			return []byte(x), nil
		}
	case Void:
		return []byte{}, nil
	case int64:
		if t == Oid {
			v = uint32(x)
		}
	}
	buf, err := encodeBinary(t.OID, v)
	if err != nil {
		return nil, pgerr.Wrap(err, pgerr.InternalError, "encode %s in binary: %v", t.Name, err)
	}
	return buf, nil
}

// Format is v in the given wire format (0 text, 1 binary); nil stays nil (NULL).
func Format(t *T, format int16, v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	if format == pgtype.BinaryFormatCode {
		return FormatBinary(t, v)
	}
	return FormatText(t, v)
}

// Parse decodes a parameter value sent in the given wire format as type t.
func Parse(t *T, format int16, b []byte) (any, error) {
	if b == nil {
		return nil, nil
	}
	if format != pgtype.BinaryFormatCode {
		return ParseText(t, string(b))
	}
	var err error
	switch t {
	case Int2, Int4, Int8:
		var v int64
		if err = scan(t.OID, format, b, &v); err == nil {
			return v, nil
		}
	case Bool:
		var v bool
		if err = scan(t.OID, format, b, &v); err == nil {
			return v, nil
		}
	case Text, Unknown, Bpchar, Varchar:
		return string(b), nil
	case Bytea:
		return append([]byte{}, b...), nil
	case Timestamptz, Timestamp:
		var v time.Time
		if err = scan(t.OID, format, b, &v); err == nil {
			return v.UTC(), nil
		}
	case Oid:
		var v uint32
		if err = scan(t.OID, format, b, &v); err == nil {
			return int64(v), nil
		}
	case Int4Array, Int8Array:
		return parseArray(t, format, b)
	case Numeric:
		var v pgtype.Numeric
		if err = scan(t.OID, format, b, &v); err == nil {
			if v.Exp != 0 || !v.Valid || v.NaN || v.InfinityModifier != 0 {
				return nil, pgerr.New(pgerr.FeatureNotSupported, "numeric values with a fraction are not supported by engine-server")
			}
			return v.Int, nil
		}
	default:
		return nil, pgerr.New(pgerr.FeatureNotSupported, "binary parameters of type %s are not supported", t.Name)
	}
	return nil, pgerr.Wrap(err, pgerr.ProtocolViolation, "incorrect binary data format in bind parameter of type %s", t.Name)
}

// ParseText parses s, a value in text form, as type t (22P02 for bad syntax, 22003 out of
// range), as PostgreSQL's input functions do.
func ParseText(t *T, s string) (any, error) {
	switch t {
	case Int2, Int4, Int8:
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return nil, pgerr.New(pgerr.NumericValueOutOfRange, "value \"%s\" is out of range for type %s", s, t.Name)
			}
			return nil, pgerr.New(pgerr.InvalidTextRepresentation, "invalid input syntax for type %s: \"%s\"", t.Name, s)
		}
		if Range(t, v) != nil {
			return nil, pgerr.New(pgerr.NumericValueOutOfRange, "value \"%s\" is out of range for type %s", s, t.Name)
		}
		return v, nil
	case Bool:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "t", "true", "y", "yes", "on", "1":
			return true, nil
		case "f", "false", "n", "no", "off", "0":
			return false, nil
		}
		return nil, pgerr.New(pgerr.InvalidTextRepresentation, "invalid input syntax for type boolean: \"%s\"", s)
	case Text, Unknown, Bpchar, Varchar:
		return s, nil
	case Bytea:
		return parseBytea(s)
	case Numeric:
		v, ok := new(big.Int).SetString(strings.TrimSpace(s), 10)
		if !ok {
			return nil, pgerr.New(pgerr.InvalidTextRepresentation, "invalid input syntax for type numeric: \"%s\"", s)
		}
		return v, nil
	case Oid:
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return nil, pgerr.New(pgerr.InvalidTextRepresentation, "invalid input syntax for type oid: \"%s\"", s)
		}
		return int64(v), nil
	case Int4Array, Int8Array:
		return parseArray(t, pgtype.TextFormatCode, []byte(s))
	case Timestamp:
		for _, layout := range []string{"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02"} {
			if v, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
				return v.UTC(), nil
			}
		}
		return nil, pgerr.New(pgerr.InvalidTextRepresentation, "invalid input syntax for type timestamp: \"%s\"", s)
	case Timestamptz:
		for _, layout := range []string{"2006-01-02 15:04:05.999999999Z07", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999Z07:00", "2006-01-02"} {
			if v, err := time.Parse(layout, strings.TrimSpace(s)); err == nil {
				return v.UTC(), nil
			}
		}
		return nil, pgerr.New(pgerr.InvalidTextRepresentation, "invalid input syntax for type timestamp with time zone: \"%s\"", s)
	}
	return nil, pgerr.New(pgerr.FeatureNotSupported, "input of type %s is not supported", t.Name)
}

// parseBytea parses bytea input: hex (\x...) or the escape format (\\ and \ooo).
func parseBytea(s string) ([]byte, error) {
	if strings.HasPrefix(s, `\x`) {
		b, err := hex.DecodeString(s[2:])
		if err != nil {
			return nil, pgerr.New(pgerr.InvalidTextRepresentation, "invalid hexadecimal data: %q", s)
		}
		return b, nil
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '\\':
			out = append(out, '\\')
			i++
		case i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]):
			out = append(out, (s[i+1]-'0')<<6|(s[i+2]-'0')<<3|(s[i+3]-'0'))
			i += 3
		default:
			return nil, pgerr.New(pgerr.InvalidTextRepresentation, "invalid input syntax for type bytea")
		}
	}
	return out, nil
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// parseArray decodes an integer array (pgtype's array codec, text or binary): NULL elements
// and more than one dimension are refused.
func parseArray(t *T, format int16, b []byte) (any, error) {
	var elems []*int64
	if err := scan(t.OID, format, b, &elems); err != nil {
		return nil, pgerr.Wrap(err, pgerr.InvalidTextRepresentation, "malformed array literal for type %s: %v", t.Name, err)
	}
	out := make([]int64, len(elems))
	for i, e := range elems {
		if e == nil {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "NULL elements in arrays are not supported by engine-server")
		}
		if err := Range(t.Elem(), *e); err != nil {
			return nil, err
		}
		out[i] = *e
	}
	return out, nil
}
