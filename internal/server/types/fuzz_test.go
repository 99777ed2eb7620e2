package types

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// FuzzParseParameter feeds arbitrary bytes to the decoder of Bind parameter values, in
// text and binary format, for every type a parameter can have (integer arrays, timestamps
// and oids included): it must return a value or an error, never panic, and a value it
// returns must format again.
func FuzzParseParameter(f *testing.F) {
	all := []*T{Int2, Int4, Int8, Bool, Text, Bytea, Numeric, Timestamptz, Timestamp, Oid, Int4Array, Int8Array, Unknown}
	f.Add(uint8(10), int16(1), []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 7})
	f.Add(uint8(10), int16(0), []byte("{1,2,3}"))
	f.Add(uint8(11), int16(0), []byte("{1,NULL}"))
	f.Add(uint8(8), int16(0), []byte("2024-01-02 03:04:05.5"))
	f.Add(uint8(7), int16(1), []byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Add(uint8(9), int16(0), []byte("4294967295"))
	f.Add(uint8(5), int16(0), []byte(`\x00ff`))
	f.Fuzz(func(t *testing.T, which uint8, format int16, data []byte) {
		typ := all[int(which)%len(all)]
		if format != pgtype.BinaryFormatCode {
			format = pgtype.TextFormatCode
		}
		v, err := Parse(typ, format, data)
		if err != nil || v == nil {
			return
		}
		if _, err := Format(typ, pgtype.TextFormatCode, v); err != nil {
			t.Fatalf("%s value %#v parsed from %q does not format: %v", typ.Name, v, data, err)
		}
	})
}
