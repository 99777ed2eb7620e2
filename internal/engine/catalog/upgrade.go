package catalog

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// VersionOf returns the format version in a catalog file's header.
func VersionOf(b []byte) (uint32, error) {
	if len(b) < headerSize || string(b[:4]) != magic {
		return 0, fmt.Errorf("bad magic or short file (%d bytes): %w", len(b), ErrCorrupt)
	}
	return binary.LittleEndian.Uint32(b[4:]), nil
}

// v1 is format 1's payload: the same JSON, with column types named
// "int64" and "bytes" and no lengths or NOT NULL.
type v1 struct {
	NextOID uint32 `json:"next_oid"`
	Tables  []struct {
		Name    string              `json:"name"`
		OID     uint32              `json:"oid"`
		Rel     storage.RelFileNode `json:"relfilenode"`
		Columns []struct {
			Name string `json:"name"`
			Type string `json:"type"`
		} `json:"columns"`
		Indexes []Index `json:"indexes"`
	} `json:"tables"`
}

// DecodeV1 parses a format-1 catalog file and returns it in this
// format: int64 columns become int8 and bytes columns bytea (their row
// encoding is the same). The result is validated as Decode validates.
func DecodeV1(b []byte) (*Catalog, error) {
	v, err := VersionOf(b)
	if err != nil {
		return nil, err
	}
	if v != 1 {
		return nil, fmt.Errorf("catalog version %d, not 1: %w", v, ErrUnsupportedVersion)
	}
	n := binary.LittleEndian.Uint32(b[8:])
	if uint64(n) != uint64(len(b)-headerSize) {
		return nil, fmt.Errorf("payload length %d, file holds %d: %w", n, len(b)-headerSize, ErrCorrupt)
	}
	payload := b[headerSize:]
	if crc := page.CRC32C(payload); crc != binary.LittleEndian.Uint32(b[12:]) {
		return nil, fmt.Errorf("checksum mismatch: %w", ErrCorrupt)
	}
	var old v1
	if err := json.Unmarshal(payload, &old); err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	c := &Catalog{NextOID: old.NextOID}
	for _, ot := range old.Tables {
		t := &Table{Name: ot.Name, OID: ot.OID, Rel: ot.Rel, Indexes: ot.Indexes}
		for _, oc := range ot.Columns {
			col := row.Column{Name: oc.Name}
			switch oc.Type {
			case "int64":
				col.Type = row.Int8
			case "bytes":
				col.Type = row.Bytea
			default:
				return nil, fmt.Errorf("table %q column %q: format-1 type %q unknown: %w", ot.Name, oc.Name, oc.Type, ErrCorrupt)
			}
			t.Columns = append(t.Columns, col)
		}
		c.Tables = append(c.Tables, t)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrCorrupt)
	}
	return c, nil
}
