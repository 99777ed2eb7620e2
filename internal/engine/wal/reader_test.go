package wal

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// writeRecords writes n records of mainSize bytes of main data to a fresh
// log in dir, closes it and returns them as read back (with their LSNs).
func writeRecords(t *testing.T, dir string, n, mainSize int) []*Record {
	t.Helper()
	l := openTestLog(t, vfs.OS(), dir, 0)
	for i := range n {
		main := make([]byte, mainSize)
		for j := range main {
			main[j] = byte(i*7 + j)
		}
		if _, err := l.Insert(&Record{Rmgr: RmgrHeap, XID: uint64(i + 1), Main: main}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := readAll(t, vfs.OS(), dir, FirstLSN)
	if err != io.EOF || len(recs) != n {
		t.Fatalf("read back %d of %d records: %v", len(recs), n, err)
	}
	return recs
}

func segPath(dir string, lsn LSN) string {
	return filepath.Join(dir, "wal", segName(uint64(lsn)/testSegSize, testSegSize))
}

// patchLog overwrites log bytes at lsn, across segments if needed.
func patchLog(t *testing.T, dir string, lsn LSN, b []byte) {
	t.Helper()
	for len(b) > 0 {
		off := int64(uint64(lsn) % testSegSize)
		n := min(int64(len(b)), testSegSize-off)
		f, err := os.OpenFile(segPath(dir, lsn), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(b[:n], off); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		b, lsn = b[n:], lsn+LSN(n)
	}
}

// truncateLogAt cuts the log at lsn: the segment holding it is truncated
// there and every later segment removed.
func truncateLogAt(t *testing.T, dir string, lsn LSN) {
	t.Helper()
	if err := os.Truncate(segPath(dir, lsn), int64(uint64(lsn)%testSegSize)); err != nil {
		t.Fatal(err)
	}
	for s := uint64(lsn)/testSegSize + 1; ; s++ {
		err := os.Remove(filepath.Join(dir, "wal", segName(s, testSegSize)))
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func wantCorruptAt(t *testing.T, err error, lsn LSN, reason string) {
	t.Helper()
	var ce *CorruptRecordError
	if !errors.As(err, &ce) {
		t.Fatalf("reader stopped with %v, want *CorruptRecordError", err)
	}
	if ce.LSN != lsn || !strings.Contains(ce.Reason, reason) {
		t.Fatalf("corrupt record at %X (%s), want at %X with reason containing %q", ce.LSN, ce.Reason, lsn, reason)
	}
}

func TestReaderStopsAtDamagedRecords(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string, victim, prev *Record)
		reason string
	}{
		{"flipped bit", func(t *testing.T, dir string, v, _ *Record) {
			patchLog(t, dir, v.StartLSN+40, []byte{0xFF})
		}, "CRC mismatch"},
		{"impossible length", func(t *testing.T, dir string, v, _ *Record) {
			patchLog(t, dir, v.StartLSN, []byte{1, 0, 0, 0})
		}, "impossible record length"},
		{"torn tail: last record cut in the middle", func(t *testing.T, dir string, v, _ *Record) {
			truncateLogAt(t, dir, v.StartLSN+(v.EndLSN-v.StartLSN)/2)
		}, "partial record"},
		{"torn tail: cut inside the length field", func(t *testing.T, dir string, v, _ *Record) {
			truncateLogAt(t, dir, v.StartLSN+2)
		}, "partial record"},
		{"tail of a torn write reads as zeros", func(t *testing.T, dir string, v, _ *Record) {
			patchLog(t, dir, v.StartLSN+30, make([]byte, int(v.EndLSN-v.StartLSN)-30))
		}, "CRC mismatch"},
		{"stale record with a wrong prev link", func(t *testing.T, dir string, v, prev *Record) {
			stale := *v
			stale.PrevLSN = prev.PrevLSN // a valid record, but not the successor of prev
			patchLog(t, dir, v.StartLSN, Encode(&stale))
		}, "prev-record link"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			recs := writeRecords(t, dir, 300, 500) // ~160 KiB: three segments
			victim := len(recs) - 1
			if !strings.HasPrefix(tc.name, "torn tail") {
				victim = 200
			}
			tc.damage(t, dir, recs[victim], recs[victim-1])
			got, err := readAll(t, vfs.OS(), dir, FirstLSN)
			wantCorruptAt(t, err, recs[victim].StartLSN, tc.reason)
			if len(got) != victim {
				t.Fatalf("read %d good records before the damage, want %d", len(got), victim)
			}
		})
	}
}

func TestReaderReportsCleanEnds(t *testing.T) {
	// Records of 4094 bytes: the 16th ends exactly at the first segment
	// boundary ((64 KiB - FirstLSN) / 4094 = 16).
	const mainSize = 4094 - MinRecordSize
	cases := []struct {
		name string
		cut  func(t *testing.T, dir string, recs []*Record) LSN
	}{
		{"log cut exactly after a record", func(t *testing.T, dir string, r []*Record) LSN {
			truncateLogAt(t, dir, r[20].EndLSN)
			return r[20].EndLSN
		}},
		{"next segment empty at a record boundary", func(t *testing.T, dir string, r []*Record) LSN {
			truncateLogAt(t, dir, testSegSize)
			return testSegSize
		}},
		{"next segment missing at a record boundary", func(t *testing.T, dir string, r []*Record) LSN {
			truncateLogAt(t, dir, testSegSize)
			if err := os.Remove(segPath(dir, testSegSize)); err != nil {
				t.Fatal(err)
			}
			return testSegSize
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			recs := writeRecords(t, dir, 40, mainSize)
			if recs[15].EndLSN != testSegSize {
				t.Fatalf("record 15 ends at %X, want the segment boundary", recs[15].EndLSN)
			}
			cut := tc.cut(t, dir, recs)
			got, err := readAll(t, vfs.OS(), dir, FirstLSN)
			if err != io.EOF {
				t.Fatalf("reader: %v, want io.EOF", err)
			}
			if len(got) == 0 || got[len(got)-1].EndLSN != cut {
				t.Fatalf("read %d records, want the last to end at %X", len(got), cut)
			}
		})
	}
}

func TestReaderReportsARecordRunningIntoAMissingSegment(t *testing.T) {
	dir := t.TempDir()
	recs := writeRecords(t, dir, 300, 500)
	var crossing *Record
	for _, r := range recs {
		if uint64(r.StartLSN)/testSegSize != uint64(r.EndLSN-1)/testSegSize {
			crossing = r
			break
		}
	}
	if crossing == nil {
		t.Fatal("no record crosses a segment boundary")
	}
	truncateLogAt(t, dir, LSN((uint64(crossing.EndLSN)/testSegSize)*testSegSize))
	_, err := readAll(t, vfs.OS(), dir, FirstLSN)
	wantCorruptAt(t, err, crossing.StartLSN, "partial record")
}

func TestReopenAtCorruptionContinuesWithoutResurrectingStaleRecords(t *testing.T) {
	dir := t.TempDir()
	recs := writeRecords(t, dir, 300, 500)
	victim := recs[150]
	patchLog(t, dir, victim.StartLSN+50, []byte{0xEE})
	good, err := readAll(t, vfs.OS(), dir, FirstLSN)
	wantCorruptAt(t, err, victim.StartLSN, "CRC mismatch")

	// Reopen where valid WAL ends and write one record of exactly the
	// victim's size: it ends where the next old record starts, and that
	// old record's prev link (the victim's start) would match the new one.
	l := openTestLog(t, vfs.OS(), dir, victim.StartLSN)
	replacement := &Record{Rmgr: RmgrXact, XID: 999_999, Main: make([]byte, len(victim.Main))}
	end, err := l.Insert(replacement, nil)
	if err != nil {
		t.Fatal(err)
	}
	if end != victim.EndLSN {
		t.Fatalf("replacement ends at %X, want %X (same size as the victim)", end, victim.EndLSN)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// Segments after the new end's must be gone, or be fresh ones (all
	// zero, created ahead of need in the background), never stale ones.
	endSeg := uint64(victim.EndLSN) / testSegSize
	for _, segno := range segmentsOnDisk(t, dir) {
		if segno <= endSeg {
			continue
		}
		b, err := os.ReadFile(filepath.Join(walDir(dir), segName(segno, testSegSize)))
		if err != nil {
			t.Fatal(err)
		}
		if !allZero(b) {
			t.Fatalf("segment %d after the new end (segment %d) holds stale bytes", segno, endSeg)
		}
	}

	got, err := readAll(t, vfs.OS(), dir, FirstLSN)
	if err != io.EOF {
		t.Fatalf("after reopening: %v, want io.EOF", err)
	}
	if len(got) != len(good)+1 || got[len(got)-1].XID != replacement.XID {
		t.Fatalf("read %d records ending with xid %d; want %d good ones then the replacement (stale records resurrected?)",
			len(got), got[len(got)-1].XID, len(good))
	}
}

func segmentsOnDisk(t *testing.T, dir string) []uint64 {
	t.Helper()
	s, err := listSegments(vfs.OS(), walDir(dir), testSegSize)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReopenAfterTornTailAppendsAndReadsCleanly(t *testing.T) {
	dir := t.TempDir()
	recs := writeRecords(t, dir, 300, 500)
	last := recs[len(recs)-1]
	truncateLogAt(t, dir, last.StartLSN+7)
	_, err := readAll(t, vfs.OS(), dir, FirstLSN)
	wantCorruptAt(t, err, last.StartLSN, "partial record")

	l := openTestLog(t, vfs.OS(), dir, last.StartLSN)
	for i := range 50 {
		if _, err := l.Insert(&Record{Rmgr: RmgrXact, XID: uint64(10_000 + i), Main: make([]byte, 900)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, vfs.OS(), dir, FirstLSN)
	if err != io.EOF || len(got) != len(recs)-1+50 {
		t.Fatalf("read %d records (%v), want %d", len(got), err, len(recs)-1+50)
	}
	if restart := got[len(recs)-1]; restart.PrevLSN != restart.StartLSN || got[len(recs)].PrevLSN != restart.StartLSN {
		t.Fatal("the link should restart (point to itself) at the reopen point and chain normally after it")
	}
}

func TestRecycledSegmentsAreReusedWithoutResurrectingTheirOldRecords(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, vfs.OS(), dir, 0)
	insert := func(n int, xid uint64) { insertFlushed(t, l, n, xid) }
	insert(800, 1) // ~8.5 segments
	redo := l.SetRedoPtr()
	oldRecs, err := readAll(t, vfs.OS(), dir, FirstLSN)
	if err != io.EOF {
		t.Fatal(err)
	}
	if err := l.RemoveBefore(redo); err != nil {
		t.Fatal(err)
	}
	cur := uint64(l.InsertLSN()) / testSegSize
	segs := segmentsOnDisk(t, dir)
	if last := segs[len(segs)-1]; last != cur+DefaultRecycleSegments {
		t.Fatalf("segments %v: want %d recycled ones after the current segment %d", segs, DefaultRecycleSegments, cur)
	}
	// Write into the first recycled segment, remembering its stale bytes.
	next := LSN((cur + 1) * testSegSize)
	stale, err := os.ReadFile(segPath(dir, next))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for l.InsertLSN() < next+1000 {
		insert(1, uint64(100_000+n))
		n++
	}
	end := l.InsertLSN()
	if end <= next+100 || uint64(end)/testSegSize != cur+1 {
		t.Fatalf("end %X is not inside the recycled segment %d", end, cur+1)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, vfs.OS(), dir, redo)
	if err != io.EOF || len(got) != n {
		t.Fatalf("read %d records after the redo pointer (%v), want %d and io.EOF", len(got), err, n)
	}
	// Without the zero terminator (a crash before it reached disk) the
	// stale bytes of the recycled segment follow the last record: they
	// must read as the end of the log, never as records.
	off := uint64(end) % testSegSize
	patchLog(t, dir, end, stale[off:])
	got, err = readAll(t, vfs.OS(), dir, redo)
	var ce *CorruptRecordError
	if len(got) != n || (err != io.EOF && !(errors.As(err, &ce) && ce.LSN == end)) {
		t.Fatalf("read %d records then %v, want exactly the %d written and an end at %X", len(got), err, n, end)
	}
	// Worst case: an intact old record sits exactly at the end.
	patchLog(t, dir, end, Encode(oldRecs[5]))
	got, err = readAll(t, vfs.OS(), dir, redo)
	wantCorruptAt(t, err, end, "prev-record link")
	if len(got) != n {
		t.Fatalf("read %d records, want exactly the %d written", len(got), n)
	}
}

// FuzzResumeAfterEnd overwrites bytes of a real log (three 4 KiB segments of records) with
// the fuzzer's, reads it until Next stops, and looks past the stop. ResumeAfterEnd must not
// panic, and must return 0 or the start of a record, after the stop and before the end of
// the next segment, that decodes and links back to at or after the stop. When the damage
// lies inside one record that is not the last, and reading stopped at that record, it must
// find a later record: mid-log damage is never taken for the end of the log.
func FuzzResumeAfterEnd(f *testing.F) {
	const segSize = MinSegmentSize
	opts := Options{SegmentSize: segSize}
	base := f.TempDir()
	l, err := Open(vfs.OS(), base, 0, opts)
	if err != nil {
		f.Fatal(err)
	}
	for i := range 60 {
		main := make([]byte, 40+(i*37)%300)
		for j := range main {
			main[j] = byte(i + j)
		}
		if _, err := l.Insert(&Record{Rmgr: RmgrHeap, XID: uint64(i + 1), Main: main}, nil); err != nil {
			f.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	// The records' bounds, as read back from the intact log.
	r, err := NewReader(vfs.OS(), base, FirstLSN, opts)
	if err != nil {
		f.Fatal(err)
	}
	var starts []LSN
	for {
		if _, err := r.Next(); err != nil {
			break
		}
		starts = append(starts, r.lastStart)
	}
	end := r.end
	r.Close()
	segs, err := os.ReadDir(filepath.Join(base, "wal"))
	if err != nil {
		f.Fatal(err)
	}
	files := map[string][]byte{}
	for _, s := range segs {
		b, err := os.ReadFile(filepath.Join(base, "wal", s.Name()))
		if err != nil {
			f.Fatal(err)
		}
		files[s.Name()] = b
	}
	span := uint64(end - FirstLSN)

	f.Add(uint16(0), []byte{})                      // intact: a clean end
	f.Add(uint16(100), []byte{0xff})                // a flipped byte in an early record
	f.Add(uint16(span/2), []byte{1, 2, 3, 4, 5, 6}) // damage in the middle
	f.Add(uint16(span-10), []byte{0xaa, 0xbb})      // a torn last record
	f.Add(uint16(span/3), make([]byte, 200))        // a zeroed run
	f.Fuzz(func(t *testing.T, off uint16, patch []byte) {
		if len(patch) > 512 {
			patch = patch[:512]
		}
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o700); err != nil {
			t.Fatal(err)
		}
		at := FirstLSN + LSN(uint64(off)%span)
		for name, b := range files {
			b = append([]byte(nil), b...)
			for i, c := range patch {
				p := uint64(at) + uint64(i)
				if fileName := segName(p/segSize, segSize); fileName == name {
					b[p%segSize] = c
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "wal", name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		r, err := NewReader(vfs.OS(), dir, FirstLSN, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for n := 0; n <= len(starts); n++ {
			if _, err := r.Next(); err != nil {
				break
			}
		}
		stop := r.pos
		q, err := r.ResumeAfterEnd()
		if err != nil {
			t.Fatalf("ResumeAfterEnd: %v", err)
		}
		limit := LSN((uint64(stop)/segSize + 2) * segSize)
		if q != 0 {
			if q <= stop || q >= limit {
				t.Fatalf("resumed at %X, want after the stop %X and before %X", uint64(q), uint64(stop), uint64(limit))
			}
			rd, err := NewReader(vfs.OS(), dir, q, opts)
			if err != nil {
				t.Fatal(err)
			}
			rec, err := rd.Next()
			rd.Close()
			if err != nil {
				t.Fatalf("no record decodes at the resume point %X: %v", uint64(q), err)
			}
			if rec.PrevLSN < stop || rec.PrevLSN >= q {
				t.Fatalf("record at %X links to %X, want in [%X, %X)", uint64(q), uint64(rec.PrevLSN), uint64(stop), uint64(q))
			}
		}
		// Damage inside one record that is not the last, where reading stopped.
		if len(patch) == 0 {
			if q != 0 || stop != end {
				t.Fatalf("intact log: stopped at %X (end %X), resumed at %X", uint64(stop), uint64(end), uint64(q))
			}
			return
		}
		for i := 0; i+1 < len(starts); i++ {
			last := at + LSN(len(patch)) - 1
			if starts[i] <= at && last < starts[i+1] && stop == starts[i] && q == 0 {
				t.Fatalf("damage at [%X, %X] inside record %d of %d, reading stopped there, and nothing was found after it",
					uint64(at), uint64(last), i, len(starts))
			}
		}
	})
}

// Stale bytes after the end of the log that look like headers of huge
// records (a length near MaxRecordSize, a prev link into the scanned
// window) are dismissed without reading or allocating them: the scan for
// a valid record after the end took minutes on such data (one 32 MiB
// buffer per candidate) and made Open hang.
func TestResumeAfterEndDismissesHugeCandidatesCheaply(t *testing.T) {
	dir := t.TempDir()
	recs := writeRecords(t, dir, 300, 500)
	truncateLogAt(t, dir, testSegSize) // one segment of records
	end := recs[20]
	// Zero a record's worth after the end (the scan starts past a clean
	// end), then fill the rest of the first segment with fake headers.
	stale := make([]byte, int(testSegSize-uint64(end.EndLSN)%testSegSize))
	for i := 0; i+recHeaderSize <= len(stale); i += 16 {
		binary.LittleEndian.PutUint32(stale[i:], MaxRecordSize-1)
		binary.LittleEndian.PutUint64(stale[i+offRecPrev:], uint64(end.EndLSN)+1)
	}
	clear(stale[:recHeaderSize])
	patchLog(t, dir, end.EndLSN, stale)
	r, err := NewReader(vfs.OS(), dir, FirstLSN, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }() // read only
	for {
		if _, err := r.Next(); err != nil {
			break
		}
	}
	start := time.Now()
	q, err := r.ResumeAfterEnd()
	if err != nil || q != 0 {
		t.Fatalf("ResumeAfterEnd = %X, %v; want no valid record", uint64(q), err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("ResumeAfterEnd took %v over %d fake headers", took, len(stale)/16)
	}
}

// insertFlushed inserts n heap records of 700 bytes into l, with XIDs from xid on, and
// flushes them.
func insertFlushed(t *testing.T, l *Log, n int, xid uint64) {
	t.Helper()
	for i := range n {
		if _, err := l.Insert(&Record{Rmgr: RmgrHeap, XID: xid + uint64(i), Main: make([]byte, 700)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(l.InsertLSN(), nil); err != nil {
		t.Fatal(err)
	}
}
