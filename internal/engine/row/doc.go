// Package row encodes a table row (a list of typed column values) into the
// bytes a heap tuple carries, and decodes them back. It is the one place
// column values are checked (Normalize) and encoded (AppendValue, Encode)
// and decoded (Decode, ValueAt): a SQL layer maps its types onto Type and
// calls these.
//
// # Types
//
// Column types are named as PostgreSQL names them (pg_type.typname); the
// Go value of each is what Decode returns:
//
//	int2         int16
//	int4         int32
//	int8         int64              (format 1 called it int64)
//	bool         bool
//	text         string             UTF-8 without NUL, any length
//	varchar(n)   string             at most n characters (n = 0: no limit)
//	bpchar(n)    string             exactly n characters, space-padded (char(n))
//	bytea        []byte             (format 1 called it bytes)
//	timestamp    Micros             microseconds since 2000-01-01 00:00:00
//	timestamptz  Micros             the same, in UTC
//
// Go nil is NULL, accepted in every column not declared NOT NULL
// (ErrNotNull otherwise). Normalize does PostgreSQL's checks on write:
// integer ranges (ErrOutOfRange), text encoding (ErrInvalidText), length
// limits (ErrTooLong; trailing spaces beyond n are cut, not refused), and
// pads char(n). Every refusal is a *ValueError or *TypeError naming the
// column.
//
// # Byte layout
//
// All integers are Go varints (encoding/binary's Uvarint / Varint):
//
//	uvarint  header           ncols, or ncols | 1<<16 when a null bitmap follows
//	[bitmap] ceil(ncols/8)    only with the 1<<16 flag: bit i%8 of byte i/8 set
//	                          = column i is NULL; at least one bit set, and no
//	                          bit past the last column
//	for each non-NULL column, in schema order:
//	  int2, int4, int8, timestamp, timestamptz:  varint value (zig-zag)
//	  bool:                                      1 byte, 0 or 1
//	  text, varchar, bpchar, bytea:              uvarint n, then n bytes
//
// A row without NULLs is encoded exactly as format 1 encoded its int64 and
// bytes columns, so a format-1 heap reads unchanged once its catalog names
// the types int8 and bytea.
//
// Invariants: Encode accepts only rows whose length matches the schema and
// whose values Normalize accepts; Decode consumes the whole input and never
// panics: any mismatch (count, truncated value, trailing bytes, a length
// larger than the input, a bitmap that marks nothing, a value Normalize
// would not have produced; NOT NULL is a write-time check only) is an error wrapping
// ErrCorrupt (FuzzRowDecode).
package row
