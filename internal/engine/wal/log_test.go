package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

const testSegSize = 64 << 10

var testOpts = Options{SegmentSize: testSegSize}

func openTestLog(t testing.TB, fsys vfs.FS, dir string, end LSN) *Log {
	t.Helper()
	l, err := Open(fsys, dir, end, testOpts)
	if err != nil {
		t.Fatalf("open log at %X: %v", uint64(end), err)
	}
	return l
}

// closeLog closes l at the end of a test, failing it on error.
func closeLog(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Errorf("close log: %v", err)
	}
}

// readAll reads records from start until the reader stops and returns
// them with the error that stopped it (io.EOF at a clean end).
func readAll(t testing.TB, fsys vfs.FS, dir string, start LSN) ([]*Record, error) {
	t.Helper()
	r, err := NewReader(fsys, dir, start, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("close reader: %v", err)
		}
	}()
	var recs []*Record
	for {
		rec, err := r.Next()
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}

// randomRecord builds a record of varied shape; XID = i identifies it.
func randomRecord(r *rand.Rand, i int) *Record {
	rec := &Record{Rmgr: RmgrHeap, Info: uint8(i), XID: uint64(i)}
	rec.Main = make([]byte, r.IntN(300))
	for j := range rec.Main {
		rec.Main[j] = byte(i + j)
	}
	for b := range r.IntN(3) {
		blk := BlockRef{Rel: storage.RelFileNode(i), Block: storage.BlockNumber(b), Data: []byte(fmt.Sprintf("rec %d blk %d", i, b))}
		if r.IntN(4) == 0 {
			blk.Image = fullPage()
			blk.Image[0] = byte(i)
		}
		rec.Blocks = append(rec.Blocks, blk)
	}
	return rec
}

func TestInsertFlushReadRoundTripAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	fsys := vfs.OS()
	l := openTestLog(t, fsys, dir, 0)
	r := rand.New(rand.NewPCG(7, 7))
	var want []*Record
	var ends []LSN
	for i := range 1500 {
		rec := randomRecord(r, i)
		end, err := l.Insert(rec, nil)
		if err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
		want, ends = append(want, rec), append(ends, end)
		if i%97 == 0 {
			if err := l.Flush(end, nil); err != nil {
				t.Fatalf("flush: %v", err)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := int(ends[len(ends)-1] / testSegSize); segs < 20 {
		t.Fatalf("test wrote only %d segments; it must cross many boundaries", segs)
	}
	got, err := readAll(t, fsys, dir, FirstLSN)
	if err != io.EOF {
		t.Fatalf("reader stopped with %v after %d records, want io.EOF", err, len(got))
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, inserted %d", len(got), len(want))
	}
	prevEnd := FirstLSN
	for i := range want {
		if got[i].StartLSN != prevEnd || got[i].EndLSN != ends[i] {
			t.Fatalf("record %d at [%X,%X), want [%X,%X)", i, got[i].StartLSN, got[i].EndLSN, prevEnd, ends[i])
		}
		want[i].PrevLSN = got[i].PrevLSN // set by the log
		assertSameRecord(t, want[i], got[i])
		prevEnd = ends[i]
	}
}

func TestOpenFreshLogStartsAtFirstLSN(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, vfs.OS(), dir, 0)
	defer closeLog(t, l)
	if l.InsertLSN() != FirstLSN || l.FlushedLSN() != FirstLSN || l.RedoPtr() != FirstLSN {
		t.Fatalf("fresh log: insert %X flushed %X redo %X, want all %X",
			l.InsertLSN(), l.FlushedLSN(), l.RedoPtr(), FirstLSN)
	}
	if _, err := os.Stat(filepath.Join(dir, "wal", segName(0, testSegSize))); err != nil {
		t.Fatalf("first segment not created: %v", err)
	}
	recs, err := readAll(t, vfs.OS(), dir, 0)
	if err != io.EOF || len(recs) != 0 {
		t.Fatalf("fresh log read %d records, err %v; want none and io.EOF", len(recs), err)
	}
}

func TestOpenRejectsASegmentSizeMismatch(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, vfs.OS(), dir, 0)
	for range 200 {
		if _, err := l.Insert(&Record{Rmgr: RmgrXLOG, Main: make([]byte, 1000)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	end := l.InsertLSN()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(vfs.OS(), dir, end, Options{SegmentSize: 3 * testSegSize}); err == nil {
		t.Fatal("opening 64 KiB segments as 192 KiB ones succeeded")
	}
}

func TestInsertDecidesFullPageImages(t *testing.T) {
	cases := []struct {
		name      string
		pageLSN   func(redo LSN) uint64
		willInit  bool
		forced    bool
		wantImage bool
	}{
		{"page LSN below redo pointer", func(r LSN) uint64 { return uint64(r) - 1 }, false, false, true},
		{"page LSN equal to redo pointer", func(r LSN) uint64 { return uint64(r) }, false, false, true},
		{"page LSN after redo pointer", func(r LSN) uint64 { return uint64(r) + 1 }, false, false, false},
		{"will-init page never imaged", func(r LSN) uint64 { return 0 }, true, false, false},
		{"forced image after redo pointer", func(r LSN) uint64 { return uint64(r) + 1 }, false, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, vfs.OS(), dir, 0)
			// Move the redo pointer past some WAL.
			if _, err := l.Insert(&Record{Rmgr: RmgrXLOG, Main: make([]byte, 100)}, nil); err != nil {
				t.Fatal(err)
			}
			redo := l.SetRedoPtr()
			pg := testPage(t, 4, tc.pageLSN(redo))
			blk := BlockRef{Rel: 5, Block: 9, Page: pg, WillInit: tc.willInit, Data: []byte("d")}
			if tc.forced {
				blk.Image = pg
			}
			var u usage.Counters
			if _, err := l.Insert(&Record{Rmgr: RmgrHeap, Blocks: []BlockRef{blk}}, &u); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			wantFPIs := int64(0)
			if tc.wantImage {
				wantFPIs = 1
			}
			if got := u.WALFPIs.Load(); got != wantFPIs {
				t.Fatalf("charged %d FPIs, want %d", got, wantFPIs)
			}
			if got := l.Stats().FPIs; got != wantFPIs {
				t.Fatalf("stats count %d FPIs, want %d", got, wantFPIs)
			}
			recs, err := readAll(t, vfs.OS(), dir, redo)
			if err != io.EOF || len(recs) != 1 {
				t.Fatalf("read %d records (%v), want 1", len(recs), err)
			}
			img := recs[0].Blocks[0].Image
			if tc.wantImage != (img != nil) {
				t.Fatalf("image present = %v, want %v", img != nil, tc.wantImage)
			}
			if img != nil && !bytes.Equal(img, pg) {
				t.Fatal("restored image differs from the page")
			}
		})
	}
}

func TestInsertChargesUsage(t *testing.T) {
	l := openTestLog(t, vfs.OS(), t.TempDir(), 0)
	defer closeLog(t, l)
	var parent usage.Counters
	u := usage.Counters{Parent: &parent}
	start := l.InsertLSN()
	end, err := l.Insert(&Record{Rmgr: RmgrXact, Main: []byte("commit")}, &u)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(end, &u); err != nil {
		t.Fatal(err)
	}
	s := parent.Read()
	if s.WALRecords != 1 || s.WALBytes != int64(end-start) || s.WALFlushes != 1 || s.WALWriteBytes != int64(end-start) {
		t.Fatalf("parent counters %+v, want 1 record of %d bytes, 1 flush writing them", s, end-start)
	}
	if err := l.Flush(end, &u); err != nil {
		t.Fatal(err)
	}
	if got := u.WALFlushes.Load(); got != 1 {
		t.Fatalf("flushing durable WAL again cost %d fsyncs in total, want 1", got)
	}
}

func TestConcurrentFlushesShareFsyncs(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, vfs.OS(), dir, 0)
	const workers, perWorker = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				rec := &Record{Rmgr: RmgrXact, XID: uint64(w*perWorker + i), Main: make([]byte, 64)}
				lsn, err := l.Insert(rec, nil)
				if err == nil {
					err = l.Flush(lsn, nil)
				}
				if err == nil && l.FlushedLSN() < lsn {
					err = fmt.Errorf("flush returned before %X was durable (flushed %X)", lsn, l.FlushedLSN())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := l.Stats()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Records != workers*perWorker {
		t.Fatalf("stats: %d records, want %d", st.Records, workers*perWorker)
	}
	if st.Flushes >= st.Records {
		t.Fatalf("%d fsyncs for %d commits: flushes were not grouped", st.Flushes, st.Records)
	}
	t.Logf("%d commits, %d fsyncs", st.Records, st.Flushes)
	recs, err := readAll(t, vfs.OS(), dir, FirstLSN)
	if err != io.EOF {
		t.Fatalf("reader: %v", err)
	}
	seen := map[uint64]bool{}
	for _, r := range recs {
		seen[r.XID] = true
	}
	if len(recs) != workers*perWorker || len(seen) != workers*perWorker {
		t.Fatalf("read %d records with %d distinct xids, want %d", len(recs), len(seen), workers*perWorker)
	}
}

func TestRemoveBeforeKeepsRedoAndRetainedSegments(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, vfs.OS(), dir, 0)
	defer closeLog(t, l)
	fill := func(segs int) {
		t.Helper()
		target := l.InsertLSN() + LSN(segs*testSegSize)
		for l.InsertLSN() < target {
			if _, err := l.Insert(&Record{Rmgr: RmgrXLOG, Main: make([]byte, 4000)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(l.InsertLSN(), nil); err != nil {
			t.Fatal(err)
		}
	}
	present := func() []uint64 {
		t.Helper()
		s, err := listSegments(vfs.OS(), walDir(dir), testSegSize)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	fill(3)
	redo := l.SetRedoPtr() // in segment 3
	fill(3)                // now writing in segment 6
	// Asking to remove everything keeps the redo pointer's segment.
	if err := l.RemoveBefore(l.InsertLSN()); err != nil {
		t.Fatal(err)
	}
	if got, first := present(), uint64(redo)/testSegSize; got[0] != first {
		t.Fatalf("segments %v after RemoveBefore, want the first to be %d (holds the redo pointer)", got, first)
	}
	// A retention LSN holds back removal even after a newer redo pointer.
	retain := l.InsertLSN()
	l.SetRetention(retain)
	fill(2)
	l.SetRedoPtr()
	fill(1)
	if err := l.RemoveBefore(l.RedoPtr()); err != nil {
		t.Fatal(err)
	}
	if got, first := present(), uint64(retain)/testSegSize; got[0] != first {
		t.Fatalf("segments %v, want the first to be %d (holds the retention LSN)", got, first)
	}
	// The reader still replays everything from the retained LSN on.
	if recs, err := readAll(t, vfs.OS(), dir, retain); err != io.EOF || len(recs) == 0 {
		t.Fatalf("reading retained WAL: %d records, %v", len(recs), err)
	}
	l.SetRetention(0)
	if err := l.RemoveBefore(l.RedoPtr()); err != nil {
		t.Fatal(err)
	}
	if got, first := present(), uint64(l.RedoPtr())/testSegSize; got[0] != first {
		t.Fatalf("segments %v after clearing retention, want the first to be %d", got, first)
	}
}

func TestFailedFsyncIsSticky(t *testing.T) {
	fsys := faultfs.New(vfs.OS())
	l := openTestLog(t, fsys, t.TempDir(), 0)
	lsn, err := l.Insert(&Record{Rmgr: RmgrXact, Main: []byte("a")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	syncsBefore := fsys.Count(faultfs.OpSync)
	rule := fsys.Inject(faultfs.Rule{Ops: faultfs.OpSync, Path: "wal", Times: 1, Fault: faultfs.EIO})
	err = l.Flush(lsn, nil)
	if !errors.Is(err, syscall.EIO) || rule.Fired() != 1 {
		t.Fatalf("flush with failing fsync: %v (rule fired %d times), want EIO", err, rule.Fired())
	}
	// The device "recovers" (the rule fired once): the log must not trust it.
	if l.FlushedLSN() >= lsn {
		t.Fatalf("flushed LSN advanced to %X despite the failed fsync", l.FlushedLSN())
	}
	if _, err := l.Insert(&Record{Rmgr: RmgrXact}, nil); !errors.Is(err, syscall.EIO) {
		t.Fatalf("insert after failed fsync: %v, want EIO", err)
	}
	if err := l.Flush(lsn, nil); !errors.Is(err, syscall.EIO) {
		t.Fatalf("retried flush: %v, want EIO", err)
	}
	if err := l.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("close: %v, want EIO", err)
	}
	if got := fsys.Count(faultfs.OpSync) - syncsBefore; got != 1 {
		t.Fatalf("%d fsyncs attempted; a failed fsync must never be retried", got)
	}
}

func TestClosedLogRefusesInserts(t *testing.T) {
	l := openTestLog(t, vfs.OS(), t.TempDir(), 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Insert(&Record{Rmgr: RmgrXact}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("insert after close: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestInsertRejectsOversizedRecords(t *testing.T) {
	l := openTestLog(t, vfs.OS(), t.TempDir(), 0)
	defer closeLog(t, l)
	cases := []*Record{
		{Rmgr: RmgrHeap, Main: make([]byte, MaxRecordSize)},
		{Rmgr: RmgrHeap, Blocks: []BlockRef{{Data: make([]byte, MaxRecordSize-MinRecordSize-blockHeaderSize-1)}},
			Main: make([]byte, 2)},
	}
	for i, rec := range cases {
		if _, err := l.Insert(rec, nil); err == nil {
			t.Fatalf("case %d: oversized record accepted", i)
		}
	}
	if l.InsertLSN() != FirstLSN {
		t.Fatalf("refused records moved the insert point to %X", l.InsertLSN())
	}
}

func TestInsertRejectsBadImages(t *testing.T) {
	l := openTestLog(t, vfs.OS(), t.TempDir(), 0)
	defer closeLog(t, l)
	_, err := l.Insert(&Record{Rmgr: RmgrHeap, Blocks: []BlockRef{{Page: page.Page(make([]byte, 100))}}}, nil)
	if err == nil {
		t.Fatal("insert with a 100-byte page succeeded")
	}
}

func TestInsertWritesLargeBuffersOutWithoutFsync(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, vfs.OS(), dir, 0)
	var u usage.Counters
	var end LSN
	for end < FirstLSN+2*writeOutBytes {
		var err error
		if end, err = l.Insert(&Record{Rmgr: RmgrHeap, Blocks: []BlockRef{{Rel: 1, Image: fullPage()}}}, &u); err != nil {
			t.Fatal(err)
		}
	}
	st := l.Stats()
	if st.WriteBytes < writeOutBytes || st.Flushes != 0 || l.FlushedLSN() != FirstLSN {
		t.Fatalf("after %d bytes of inserts: wrote %d bytes, %d fsyncs, flushed to %X; want a write-out without fsync",
			end-FirstLSN, st.WriteBytes, st.Flushes, l.FlushedLSN())
	}
	if got := u.WALWriteBytes.Load(); got != st.WriteBytes {
		t.Fatalf("inserter charged %d written bytes, log wrote %d", got, st.WriteBytes)
	}
	if err := l.Flush(end, nil); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.WriteBytes != int64(end-FirstLSN) {
		t.Fatalf("wrote %d bytes in total, want exactly the %d inserted", st.WriteBytes, end-FirstLSN)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := readAll(t, vfs.OS(), dir, FirstLSN)
	if err != io.EOF || len(recs) == 0 || recs[len(recs)-1].EndLSN != end {
		t.Fatalf("read %d records (%v), want them to end at %X", len(recs), err, end)
	}
}

// TestFailedDirectoryFsyncIsSticky fails the WAL directory's fsync after
// segment recycling, after a segment's creation by the writer, and after
// one created ahead of need: the renamed file may revert to its old name
// (or vanish) on a power loss, so records written into it would be lost
// though acknowledged. The log must refuse every later insert and flush,
// as after a failed file fsync.
func TestFailedDirectoryFsyncIsSticky(t *testing.T) {
	fill := func(t *testing.T, l *Log, segs int) error {
		target := l.InsertLSN() + LSN(segs*testSegSize)
		for l.InsertLSN() < target {
			if _, err := l.Insert(&Record{Rmgr: RmgrXLOG, Main: make([]byte, 4000)}, nil); err != nil {
				return err
			}
		}
		return l.Flush(l.InsertLSN(), nil)
	}
	cases := []struct {
		name       string
		noPrealloc bool
		act        func(t *testing.T, l *Log) error
	}{
		{name: "recycling", act: func(t *testing.T, l *Log) error {
			return l.RemoveBefore(l.SetRedoPtr())
		}},
		{name: "segment created by the writer", noPrealloc: true, act: func(t *testing.T, l *Log) error {
			return fill(t, l, 2)
		}},
		{name: "segment created ahead of need", act: func(t *testing.T, l *Log) error {
			// Flushing each record writes the segment little by little, so
			// the next one is created in the background before the writer
			// needs it.
			target := l.InsertLSN() + LSN(2*testSegSize)
			for l.InsertLSN() < target {
				end, err := l.Insert(&Record{Rmgr: RmgrXLOG, Main: make([]byte, 4000)}, nil)
				if err == nil {
					err = l.Flush(end, nil)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := faultfs.New(vfs.OS())
			opts := testOpts
			opts.NoPrealloc = tc.noPrealloc
			l, err := Open(fsys, t.TempDir(), 0, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := fill(t, l, 3); err != nil {
				t.Fatal(err)
			}
			// Let a pending creation ahead of need finish first, so that the
			// failing fsync is the one the case is about.
			if err := l.RemoveBefore(0); err != nil {
				t.Fatal(err)
			}
			rule := fsys.Inject(faultfs.Rule{Ops: faultfs.OpSyncDir, Path: "wal", Times: 1, Fault: faultfs.EIO})
			err = tc.act(t, l)
			if rule.Fired() != 1 {
				t.Fatalf("no WAL directory fsync (err %v)", err)
			}
			if err == nil {
				// The background creation failed; the writer finds out
				// when it reaches the segment.
				err = fill(t, l, 2)
			}
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("%s with a failed directory fsync = %v, want EIO", tc.name, err)
			}
			if _, err := l.Insert(&Record{Rmgr: RmgrXact, Main: []byte("a")}, nil); !errors.Is(err, syscall.EIO) {
				t.Fatalf("insert after a failed directory fsync = %v, want the sticky EIO", err)
			}
			if err := l.Close(); !errors.Is(err, syscall.EIO) {
				t.Fatalf("close = %v, want the sticky EIO", err)
			}
		})
	}
}

// TestInsertsAfterAWriteOutFillABufferInsteadOfGrowingOne: once the buffer
// has been handed to the writer, the inserts that follow go into a buffer
// of the same capacity, not one grown from nothing by doubling (which
// copied and zeroed the inserted bytes several times over: a vacuum
// inserting a full-page image per page paid it after every write-out that
// found no spare buffer).
func TestInsertsAfterAWriteOutFillABufferInsteadOfGrowingOne(t *testing.T) {
	l := openTestLog(t, vfs.OS(), t.TempDir(), 0)
	defer closeLog(t, l)
	img := &Record{Rmgr: RmgrHeap, Blocks: []BlockRef{{Rel: 1, Block: 3, Image: fullPage()}}}
	for l.Stats().WriteBytes == 0 { // until the first write-out took the buffer
		if _, err := l.Insert(img, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Fewer bytes than a write-out, so the buffer is neither written nor swapped.
	n := writeOutBytes / (2 * page.Size)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		if _, err := l.Insert(img, nil); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if allocs := after.Mallocs - before.Mallocs; allocs != 0 {
		t.Fatalf("%d full-page inserts after a write-out allocated %d times, want 0", n, allocs)
	}
}
