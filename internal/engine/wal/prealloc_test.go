package wal

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// TestNextSegmentIsCreatedAheadOfTheWriter checks that writing past the
// middle of a segment creates the next one (zero-filled, full-sized) in
// the background, that the log then writes into it normally, and that
// NoPrealloc turns this off.
func TestNextSegmentIsCreatedAheadOfTheWriter(t *testing.T) {
	for _, noPrealloc := range []bool{false, true} {
		t.Run(map[bool]string{false: "prealloc", true: "no-prealloc"}[noPrealloc], func(t *testing.T) {
			dir := t.TempDir()
			opts := testOpts
			opts.NoPrealloc = noPrealloc
			l, err := Open(vfs.OS(), dir, 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			// About 1.75 segments of records, flushed.
			var last LSN
			for i := range 110 {
				if last, err = l.Insert(&Record{Rmgr: RmgrHeap, XID: uint64(i + 1), Main: make([]byte, 1000)}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.Flush(last, nil); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil { // waits for a pending creation
				t.Fatal(err)
			}
			endSeg := uint64(last) / testSegSize
			if off := uint64(last) % testSegSize; off < testSegSize/2 {
				t.Fatalf("setup: the log ends %d bytes into its segment, not past the middle", off)
			}
			segs := segmentsOnDisk(t, dir)
			ahead := slices.Contains(segs, endSeg+1)
			if ahead == noPrealloc {
				t.Fatalf("segments %v with the end in %d: next one present = %v, want %v", segs, endSeg, ahead, !noPrealloc)
			}
			if ahead {
				b, err := os.ReadFile(filepath.Join(walDir(dir), segName(endSeg+1, testSegSize)))
				if err != nil {
					t.Fatal(err)
				}
				if len(b) != testSegSize || !allZero(b) {
					t.Errorf("segment created ahead is %d bytes, all zero = %v", len(b), allZero(b))
				}
			}
			got, err := readAll(t, vfs.OS(), dir, FirstLSN)
			if err != io.EOF || len(got) != 110 {
				t.Fatalf("read back %d records, %v; want 110 and io.EOF", len(got), err)
			}
			// Reopening at the end keeps the fresh segment, silently.
			var logged []string
			opts.Logf = func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }
			l, err = Open(vfs.OS(), dir, last, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if still := slices.Contains(segmentsOnDisk(t, dir), endSeg+1); still != ahead || len(logged) > 0 {
				t.Errorf("after reopening: segment %d present = %v (want %v), messages %q", endSeg+1, still, ahead, logged)
			}
		})
	}
}
