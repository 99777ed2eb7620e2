package engine

import (
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// FuzzCheckpointRecord: the checkpoint record's decoder accepts exactly its
// 21-byte layout, never panics, and re-encodes what it accepts unchanged
// (up to the unused flag bits).
func FuzzCheckpointRecord(f *testing.F) {
	f.Add(checkpointRecord{Redo: 0x1234, NextXID: 3, NextOID: 16384, Shutdown: true}.encode())
	f.Add(checkpointRecord{Redo: wal.LSN(1) << 40, NextXID: 1 << 33}.encode())
	f.Add([]byte{})
	f.Add(make([]byte, checkpointMainSize+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCheckpoint(b)
		if err != nil {
			if len(b) == checkpointMainSize {
				t.Fatalf("rejected a record of the right size: %v", err)
			}
			return
		}
		again, err := decodeCheckpoint(c.encode())
		if err != nil || again != c {
			t.Fatalf("re-encoding %+v gave %+v, %v", c, again, err)
		}
	})
}
