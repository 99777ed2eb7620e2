package wal

import (
	"errors"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

func TestSpareSegmentsForCoversTwoCheckpointDistancesWithinBounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ckpt, seg int64
		want      int
	}{
		{"no automatic checkpoints", -1, DefaultSegmentSize, DefaultRecycleSegments},
		{"small distance keeps the floor", 16 << 20, DefaultSegmentSize, DefaultRecycleSegments},
		{"engine default 64 MiB", 64 << 20, DefaultSegmentSize, 8},
		{"partial segment rounds up", 65 << 20, DefaultSegmentSize, 10},
		{"1 GiB is capped", 1 << 30, DefaultSegmentSize, MaxSpareSegments},
		{"segment size 0 means 16 MiB", 64 << 20, 0, 8},
		{"small segments", 64 << 10, 4 << 10, 32},
		{"small segments, long distance", 1 << 20, 4 << 10, MaxSpareSegments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SpareSegmentsFor(tc.ckpt, tc.seg); got != tc.want {
				t.Errorf("SpareSegmentsFor(%d, %d) = %d, want %d", tc.ckpt, tc.seg, got, tc.want)
			}
		})
	}
}

// A clean shutdown leaves recycled segments after the end; Open with
// KeepSpares keeps them, the log writes into them, and after a crash the
// reader ends at the last record written: the stale records that follow
// it, even an intact one right at the end, neither continue the log nor
// count as valid records after damage. Open without KeepSpares (the
// crash's reopen) removes them.
func TestOpenKeepingSparesReusesRecycledSegmentsAndNeverReadsTheirStaleRecords(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, vfs.OS(), dir, 0)
	insertFlushed(t, l, 800, 1) // ~8.5 segments
	redo := l.SetRedoPtr()
	oldRecs, err := readAll(t, vfs.OS(), dir, FirstLSN)
	if err != io.EOF {
		t.Fatal(err)
	}
	if err := l.RemoveBefore(redo); err != nil {
		t.Fatal(err)
	}
	cleanEnd := l.InsertLSN()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	before := segmentsOnDisk(t, dir)
	cur := uint64(cleanEnd) / testSegSize
	if last := before[len(before)-1]; last != cur+DefaultRecycleSegments {
		t.Fatalf("segments %v: want %d recycled ones after the current segment %d", before, DefaultRecycleSegments, cur)
	}

	keep := testOpts
	keep.KeepSpares = true
	l, err = Open(vfs.OS(), dir, cleanEnd, keep)
	if err != nil {
		t.Fatal(err)
	}
	if after := segmentsOnDisk(t, dir); !slices.Equal(after, before) {
		t.Fatalf("segments after a clean reopen %v, want the spares kept: %v", after, before)
	}
	next := LSN((cur + 1) * testSegSize)
	stale, err := os.ReadFile(segPath(dir, next))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l.InsertLSN() < next+1000 {
		insertFlushed(t, l, 1, uint64(100_000+n))
		n++
	}
	end := l.InsertLSN()
	if uint64(end)/testSegSize != cur+1 {
		t.Fatalf("end %X is not inside the recycled segment %d", uint64(end), cur+1)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(segmentsOnDisk(t, dir), cur+1+DefaultRecycleSegments) {
		t.Fatalf("a new segment was created although spares were there: %v", segmentsOnDisk(t, dir))
	}

	// A crash before the zero terminator reached the disk leaves the
	// recycled segment's stale bytes after the last record.
	off := uint64(end) % testSegSize
	patchLog(t, dir, end, stale[off:])
	got, resume := readAllAndResume(t, dir, cleanEnd)
	if len(got.recs) != n || (got.err != io.EOF && !endsAt(got.err, end)) || resume != 0 {
		t.Fatalf("read %d records then %v, resume at %X; want exactly the %d written, an end at %X and nothing after",
			len(got.recs), got.err, uint64(resume), n, uint64(end))
	}
	// Worst case: an intact old record sits exactly at the end.
	patchLog(t, dir, end, Encode(oldRecs[5]))
	got, resume = readAllAndResume(t, dir, cleanEnd)
	wantCorruptAt(t, got.err, end, "prev-record link")
	if len(got.recs) != n || resume != 0 {
		t.Fatalf("read %d records, resume at %X; want exactly the %d written and nothing after", len(got.recs), uint64(resume), n)
	}

	// The crash's reopen is not a clean end: the spares go.
	l = openTestLog(t, vfs.OS(), dir, end)
	closeLog(t, l)
	if segs := segmentsOnDisk(t, dir); segs[len(segs)-1] != cur+1 {
		t.Fatalf("segments after reopening a crashed log at %X: %v, want none after segment %d", uint64(end), segs, cur+1)
	}
}

type readResult struct {
	recs []*Record
	err  error
}

// readAllAndResume reads from start until the reader stops, then looks
// past the stop as recovery does.
func readAllAndResume(t *testing.T, dir string, start LSN) (readResult, LSN) {
	t.Helper()
	r, err := NewReader(vfs.OS(), dir, start, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }()
	var res readResult
	for {
		rec, err := r.Next()
		if err != nil {
			res.err = err
			break
		}
		res.recs = append(res.recs, rec)
	}
	resume, err := r.ResumeAfterEnd()
	if err != nil {
		t.Fatal(err)
	}
	return res, resume
}

func endsAt(err error, lsn LSN) bool {
	var ce *CorruptRecordError
	return errors.As(err, &ce) && ce.LSN == lsn
}
