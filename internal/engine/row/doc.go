// Package row encodes a table row (a list of typed column values) into the
// bytes a heap tuple carries, and decodes them back.
//
// A schema is a list of columns, each int64 or bytes. There are no NULLs:
// every column of every row has a value.
//
// Byte layout of an encoded row (all integers are Go varints,
// encoding/binary's Uvarint / Varint):
//
//	uvarint  ncols            number of values that follow (= len(schema))
//	for each column, in schema order:
//	  int64:  varint  value   (zig-zag, 1..10 bytes)
//	  bytes:  uvarint n, then n bytes
//
// Invariants: Encode accepts only rows whose length and value types match
// the schema (typed errors otherwise); Decode consumes the whole input and
// never panics: any mismatch (count, truncated value, trailing bytes, a
// length larger than the input) is an error wrapping ErrCorrupt.
package row
