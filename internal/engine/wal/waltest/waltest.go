// Package waltest holds test helpers over a data directory's WAL, shared by the tests of
// the engine and of the commands that damage or forge WAL on purpose.
package waltest

import (
	"errors"
	"io"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// LastRecord reads the WAL of the data directory dir from the record at from to its end
// and returns its last record. It fails the test when the WAL cannot be opened, when a
// record before the end cannot be read (a damaged record ends the reading only with
// io.EOF semantics: an intact WAL is expected), or when there is no record at all.
func LastRecord(t testing.TB, dir string, from wal.LSN, opts wal.Options) *wal.Record {
	t.Helper()
	rd, err := wal.NewReader(vfs.OS(), dir, from, opts)
	if err != nil {
		t.Fatalf("read the WAL of %s from LSN %X: %v", dir, uint64(from), err)
	}
	defer func() { _ = rd.Close() }() // read-only: nothing to lose
	var last *wal.Record
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read the WAL of %s after LSN %X: %v", dir, uint64(from), err)
		}
		last = rec
	}
	if last == nil {
		t.Fatalf("the WAL of %s has no record after LSN %X", dir, uint64(from))
	}
	return last
}
