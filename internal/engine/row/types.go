package row

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Type is a column type, named as PostgreSQL names it. The numbers are
// stored nowhere (the catalog stores names); Int8 and Bytea keep the
// numbers of the int64 and bytes types they replace.
type Type uint8

// Column types. The Go value of each is what Decode returns; Encode also
// accepts the other values listed (see Normalize).
const (
	Int8        Type = 1  // bigint; int64 (any Go integer in range accepted)
	Bytea       Type = 2  // byte string; []byte (string accepted)
	Int2        Type = 3  // smallint; int16 (any Go integer in range accepted)
	Int4        Type = 4  // integer; int32 (any Go integer in range accepted)
	Bool        Type = 5  // boolean; bool
	Text        Type = 6  // UTF-8 text without NUL, unlimited; string ([]byte accepted)
	Varchar     Type = 7  // character varying(n): Text of at most Length characters (0 = unlimited)
	Bpchar      Type = 8  // character(n): Text of exactly Length characters, space-padded
	Timestamp   Type = 9  // timestamp without time zone; Micros (time.Time accepted)
	Timestamptz Type = 10 // timestamp with time zone (stored as UTC); Micros (time.Time accepted)
)

// Int64 and Bytes are the names of Int8 and Bytea before column types
// took PostgreSQL's names; a data directory of format 1 stores them and
// `vacuum-runner upgrade` renames them.
const (
	Int64 = Int8
	Bytes = Bytea
)

// MaxColumns is the most columns a table may have (PostgreSQL's
// MaxHeapAttributeNumber).
const MaxColumns = 1600

// MaxLength is the largest n of varchar(n) and char(n) (PostgreSQL's
// limit, 10485760).
const MaxLength = 10 << 20

var typeNames = map[Type]string{
	Int8: "int8", Bytea: "bytea", Int2: "int2", Int4: "int4", Bool: "bool", Text: "text",
	Varchar: "varchar", Bpchar: "bpchar", Timestamp: "timestamp", Timestamptz: "timestamptz",
}

// Types lists every column type, in the order of their numbers.
func Types() []Type {
	return []Type{Int8, Bytea, Int2, Int4, Bool, Text, Varchar, Bpchar, Timestamp, Timestamptz}
}

// String is PostgreSQL's name of the type (pg_type.typname).
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Valid reports whether t is a known column type.
func (t Type) Valid() bool { _, ok := typeNames[t]; return ok }

// IsInteger reports whether t is int2, int4 or int8.
func (t Type) IsInteger() bool { return t == Int2 || t == Int4 || t == Int8 }

// IsText reports whether t is text, varchar or bpchar.
func (t Type) IsText() bool { return t == Text || t == Varchar || t == Bpchar }

// MarshalText stores the type by name.
func (t Type) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("unknown column type %d", uint8(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText parses a type name (see ParseType).
func (t *Type) UnmarshalText(b []byte) error {
	p, err := ParseType(string(b))
	if err != nil {
		return err
	}
	*t = p
	return nil
}

// ParseType parses a type name as String writes it. The format-1 names
// int64 and bytes are not accepted: a catalog holding them is upgraded
// first.
func ParseType(s string) (Type, error) {
	for t, n := range typeNames {
		if n == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown column type %q", s)
}

// Column is one column of a schema. Length is n of varchar(n) (0 =
// unlimited) and of bpchar(n) (at least 1); other types have 0. NotNull
// columns refuse NULL (ErrNotNull).
type Column struct {
	Name    string `json:"name"`
	Type    Type   `json:"type"`
	Length  int    `json:"length,omitempty"`
	NotNull bool   `json:"not_null,omitempty"`
}

// TypeName is the column's type as SQL writes it: varchar(10),
// bpchar(3), int8.
func (c Column) TypeName() string {
	if (c.Type == Varchar || c.Type == Bpchar) && c.Length > 0 {
		return c.Type.String() + "(" + strconv.Itoa(c.Length) + ")"
	}
	return c.Type.String()
}

// Validate checks the column's definition: a name, a known type, and a
// Length that fits the type.
func (c Column) Validate() error {
	if c.Name == "" {
		return errors.New("empty column name")
	}
	if !c.Type.Valid() {
		return fmt.Errorf("column %q has unknown type %d", c.Name, uint8(c.Type))
	}
	switch c.Type {
	case Varchar:
		if c.Length < 0 || c.Length > MaxLength {
			return fmt.Errorf("column %q: length %d of varchar outside [0, %d]", c.Name, c.Length, MaxLength)
		}
	case Bpchar:
		if c.Length < 1 || c.Length > MaxLength {
			return fmt.Errorf("column %q: length %d of bpchar outside [1, %d]", c.Name, c.Length, MaxLength)
		}
	default:
		if c.Length != 0 {
			return fmt.Errorf("column %q: type %s takes no length", c.Name, c.Type)
		}
	}
	return nil
}

// Micros is a point in time as PostgreSQL stores timestamp and
// timestamptz: microseconds since 2000-01-01 00:00:00 UTC. The extreme
// values stand for -infinity and infinity, as in PostgreSQL.
type Micros int64

// Micros' infinities.
const (
	MicrosNegInfinity Micros = -1 << 63
	MicrosInfinity    Micros = 1<<63 - 1
)

// Epoch2000 is the zero Micros.
var Epoch2000 = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// MicrosOf converts t, truncated to the microsecond.
func MicrosOf(t time.Time) Micros {
	s := t.Unix() - Epoch2000.Unix()
	return Micros(s*1_000_000 + int64(t.Nanosecond()/1000))
}

// Time converts ts to a time.Time in UTC (the infinities come back as
// their microsecond counts, far outside any calendar in use).
func (ts Micros) Time() time.Time {
	sec := int64(ts) / 1_000_000
	us := int64(ts) % 1_000_000
	if us < 0 {
		sec--
		us += 1_000_000
	}
	return time.Unix(Epoch2000.Unix()+sec, us*1000).UTC()
}

// String formats ts as PostgreSQL prints a timestamp (ISO, UTC).
func (ts Micros) String() string {
	switch ts {
	case MicrosInfinity:
		return "infinity"
	case MicrosNegInfinity:
		return "-infinity"
	}
	s := ts.Time().Format("2006-01-02 15:04:05.999999")
	return strings.TrimSuffix(s, ".")
}
