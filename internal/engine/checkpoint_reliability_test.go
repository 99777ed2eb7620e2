package engine

import (
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
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

// FuzzRelFileRecord: the decoder of the relation file records' Main (storageCreate,
// storageAbandon) accepts exactly its 5-byte layout with a non-zero relfilenode and a
// known fork, never panics, and re-encodes what it accepts unchanged.
func FuzzRelFileRecord(f *testing.F) {
	f.Add(relFileRecord{Rel: 16390, Fork: storage.VMFork}.encode())
	f.Add(relFileRecord{Rel: 1<<32 - 1}.encode())
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Add([]byte{1, 0, 0, 0, 3})
	f.Add(make([]byte, relFileMainSize+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRelFile(b)
		if err != nil {
			if len(b) == relFileMainSize && b[4] <= byte(storage.VMFork) && (b[0]|b[1]|b[2]|b[3]) != 0 {
				t.Fatalf("rejected a valid record %x: %v", b, err)
			}
			return
		}
		if again := r.encode(); string(again) != string(b) {
			t.Fatalf("%x decoded to %+v, which encodes to %x", b, r, again)
		}
	})
}
