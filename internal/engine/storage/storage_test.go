package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

const segPages = 4 // tests use 4-page segments to exercise segmentation

func openTest(t *testing.T, fs vfs.FS, dir string, opts Options) *Manager {
	t.Helper()
	if opts.SegmentSize == 0 {
		opts.SegmentSize = segPages * page.Size
	}
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	m, err := Open(fs, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testPage is a valid page carrying tag in its one item.
func testPage(tag string) page.Page {
	p := make(page.Page, page.Size)
	page.Init(p, 0)
	if _, err := p.AddItem([]byte(tag), 0); err != nil {
		panic(err)
	}
	p.SetLSN(uint64(len(tag)))
	return p
}

func tagOf(p page.Page) string { return string(p.ItemData(1)) }

func writeBlocks(t *testing.T, m *Manager, rel RelFileNode, fork ForkNum, n int, prefix string) {
	t.Helper()
	for i := range n {
		must(t, m.Write(rel, fork, BlockNumber(i), testPage(fmt.Sprintf("%s-%d", prefix, i)), nil))
	}
}

func readTag(t *testing.T, m *Manager, rel RelFileNode, fork ForkNum, blk BlockNumber) string {
	t.Helper()
	buf := make([]byte, page.Size)
	must(t, m.Read(rel, fork, blk, buf, nil))
	return tagOf(buf)
}

func fileSize(t *testing.T, name string) int64 {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestWritesSpanSegmentFilesAndReadBack(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
	writeBlocks(t, m, 100, MainFork, 10, "main")
	writeBlocks(t, m, 100, VMFork, 5, "vm")

	wantFiles := map[string]int64{
		"100": 4 * page.Size, "100.1": 4 * page.Size, "100.2": 2 * page.Size,
		"100_vm": 4 * page.Size, "100_vm.1": page.Size,
	}
	for name, size := range wantFiles {
		if got := fileSize(t, filepath.Join(dir, "base", name)); got != size {
			t.Errorf("%s is %d bytes, want %d", name, got, size)
		}
	}
	for i := range 10 {
		if got := readTag(t, m, 100, MainFork, BlockNumber(i)); got != fmt.Sprintf("main-%d", i) {
			t.Errorf("block %d reads %q", i, got)
		}
	}
	// A fresh Manager computes the sizes from the files.
	must(t, m.SyncAll())
	m2 := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
	for fork, want := range map[ForkNum]BlockNumber{MainFork: 10, VMFork: 5, FSMFork: 0} {
		if n, err := m2.NBlocks(100, fork); err != nil || n != want {
			t.Errorf("NBlocks(fork %d) = %d, %v; want %d", fork, n, err, want)
		}
	}
	if got := readTag(t, m2, 100, VMFork, 4); got != "vm-4" {
		t.Errorf("reopened vm block 4 reads %q", got)
	}
}

func TestWriteLeavesCallerBufferUntouchedAndChargesUsage(t *testing.T) {
	m := openTest(t, vfs.NewOS(t.Logf), t.TempDir(), Options{})
	p := testPage("x")
	orig := bytes.Clone(p)
	var parent usage.Counters
	u := &usage.Counters{Parent: &parent}
	must(t, m.Write(1, MainFork, 0, p, u))
	if !bytes.Equal(p, orig) {
		t.Fatal("Write modified the caller's buffer")
	}
	buf := make([]byte, page.Size)
	must(t, m.Read(1, MainFork, 0, buf, u))
	if _, err := m.Extend(1, MainFork, u); err != nil {
		t.Fatal(err)
	}
	if s := parent.Read(); s.ReadBytes != page.Size || s.WriteBytes != 2*page.Size {
		t.Fatalf("usage %+v, want 1 page read and 2 written", s)
	}
	if page.Page(buf).Checksum() != page.ComputeChecksum(buf, 0) {
		t.Fatal("page read back without a valid checksum")
	}
}

func TestWritePrivateChecksumsTheBufferInPlaceAndReadsBack(t *testing.T) {
	for _, direct := range []bool{false, true} {
		m := openTest(t, vfs.NewOS(t.Logf), t.TempDir(), Options{Direct: direct})
		for i, aligned := range []bool{true, false} {
			var buf []byte
			if aligned {
				buf = vfs.AlignedBuffer(page.Size)
			} else {
				buf = make([]byte, page.Size+1)[1:] // never aligned for O_DIRECT
			}
			copy(buf, testPage(fmt.Sprint("private-", i)))
			must(t, m.WritePrivate(1, MainFork, BlockNumber(i), buf, nil))
			got := make([]byte, page.Size)
			must(t, m.Read(1, MainFork, BlockNumber(i), got, nil))
			if tagOf(got) != fmt.Sprint("private-", i) {
				t.Fatalf("direct=%v aligned=%v: read back %q", direct, aligned, tagOf(got))
			}
			if aligned && !bytes.Equal(buf, got) {
				t.Errorf("direct=%v: an aligned private buffer should carry the checksum written", direct)
			}
		}
		if err := m.WritePrivate(1, MainFork, 5, make([]byte, 10), nil); err == nil {
			t.Error("WritePrivate of a short buffer succeeded")
		}
	}
}

func TestReadOfCorruptPageNamesSegmentFileAndBlock(t *testing.T) {
	cases := []struct {
		name    string
		corrupt func(t *testing.T, seg1 string)
		reason  string
	}{
		{"flipped bit", func(t *testing.T, seg1 string) {
			f, err := os.OpenFile(seg1, os.O_RDWR, 0)
			must(t, err)
			defer func() { _ = f.Close() }()
			b := make([]byte, 1)
			_, err = f.ReadAt(b, page.Size+3000) // block 5 = segment 1, page 1
			must(t, err)
			b[0] ^= 0x10
			_, err = f.WriteAt(b, page.Size+3000)
			must(t, err)
		}, "checksum mismatch"},
		{"page from another block", func(t *testing.T, seg1 string) {
			data, err := os.ReadFile(seg1)
			must(t, err)
			copy(data[page.Size:2*page.Size], data[0:page.Size]) // block 4's image at block 5
			must(t, os.WriteFile(seg1, data, 0o600))
		}, "checksum mismatch for block 5"},
		{"valid checksum, invalid layout", func(t *testing.T, seg1 string) {
			bad := testPage("y")
			binary.LittleEndian.PutUint16(bad[16:], 8) // upper below lower
			page.SetChecksum(bad, 5)
			data, err := os.ReadFile(seg1)
			must(t, err)
			copy(data[page.Size:], bad)
			must(t, os.WriteFile(seg1, data, 0o600))
		}, "bounds"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			m := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
			writeBlocks(t, m, 7, MainFork, 8, "b")
			seg1 := filepath.Join(dir, "base", "7.1")
			c.corrupt(t, seg1)
			err := m.Read(7, MainFork, 5, make([]byte, page.Size), nil)
			var ce *CorruptPageError
			if !errors.As(err, &ce) {
				t.Fatalf("Read = %v, want *CorruptPageError", err)
			}
			if ce.File != seg1 || ce.Block != 5 || !strings.Contains(ce.Reason, c.reason) {
				t.Fatalf("CorruptPageError %+v, want file %s block 5 reason ~%q", ce, seg1, c.reason)
			}
			if !strings.Contains(err.Error(), seg1) || !strings.Contains(err.Error(), "block 5") {
				t.Fatalf("message %q does not name file and block", err)
			}
			if got := readTag(t, m, 7, MainFork, 4); got != "b-4" {
				t.Fatalf("neighboring block reads %q", got)
			}
		})
	}
}

func TestReadPastEndAndWritePastEndAreErrors(t *testing.T) {
	m := openTest(t, vfs.NewOS(t.Logf), t.TempDir(), Options{})
	buf := make([]byte, page.Size)
	if err := m.Read(3, MainFork, 0, buf, nil); !errors.Is(err, ErrBeyondEnd) {
		t.Fatalf("read of missing fork = %v", err)
	}
	writeBlocks(t, m, 3, MainFork, 6, "b")
	for _, blk := range []BlockNumber{6, 7, 100} {
		err := m.Read(3, MainFork, blk, buf, nil)
		if !errors.Is(err, ErrBeyondEnd) || !strings.Contains(err.Error(), fmt.Sprintf("block %d", blk)) {
			t.Fatalf("read of block %d past end = %v", blk, err)
		}
	}
	if err := m.Write(3, MainFork, 8, testPage("z"), nil); !errors.Is(err, ErrBeyondEnd) {
		t.Fatalf("write two past the end = %v", err)
	}
	if err := m.Write(3, MainFork, 6, testPage("z"), nil); err != nil {
		t.Fatalf("write at the end (extension) = %v", err)
	}
	if n, _ := m.NBlocks(3, MainFork); n != 7 {
		t.Fatalf("NBlocks after extending write = %d", n)
	}
	bad := testPage("q")
	bad[14] = 0 // lower below the header
	if err := m.Write(3, MainFork, 0, bad, nil); err == nil || !strings.Contains(err.Error(), "invalid page") {
		t.Fatalf("write of an invalid page = %v", err)
	}
	if err := m.Write(3, MainFork, 0, make([]byte, 100), nil); err == nil {
		t.Fatal("write of a short buffer succeeded")
	}
}

func TestExtendAppendsZeroPagesWithDistinctNumbersConcurrently(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
	const workers, each = 4, 5
	var mu sync.Mutex
	got := map[BlockNumber]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				blk, err := m.Extend(9, FSMFork, nil)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[blk] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != workers*each {
		t.Fatalf("%d distinct blocks from %d extensions", len(got), workers*each)
	}
	for i := range BlockNumber(workers * each) {
		if !got[i] {
			t.Fatalf("block %d never returned", i)
		}
		buf := bytes.Repeat([]byte{1}, page.Size)
		must(t, m.Read(9, FSMFork, i, buf, nil))
		if !page.IsZero(buf) {
			t.Fatalf("extended block %d is not zero", i)
		}
	}
	if sz := fileSize(t, filepath.Join(dir, "base", "9_fsm.4")); sz != 4*page.Size {
		t.Fatalf("last segment %d bytes", sz)
	}
}

func TestTruncateRemovesWholeSegmentsAndShortensTheLast(t *testing.T) {
	cases := []struct {
		to        BlockNumber
		wantFiles map[string]int64
	}{
		{10, map[string]int64{"5": 4, "5.1": 4, "5.2": 2}},
		{9, map[string]int64{"5": 4, "5.1": 4, "5.2": 1}},
		{5, map[string]int64{"5": 4, "5.1": 1}},
		{4, map[string]int64{"5": 4}},
		{1, map[string]int64{"5": 1}},
		{0, map[string]int64{"5": 0}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.to), func(t *testing.T) {
			dir := t.TempDir()
			m := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
			writeBlocks(t, m, 5, MainFork, 10, "t")
			must(t, m.Truncate(5, MainFork, c.to))
			ents, err := os.ReadDir(filepath.Join(dir, "base"))
			must(t, err)
			got := map[string]int64{}
			for _, e := range ents {
				got[e.Name()] = fileSize(t, filepath.Join(dir, "base", e.Name())) / page.Size
			}
			if fmt.Sprint(got) != fmt.Sprint(c.wantFiles) {
				t.Fatalf("files (in pages) %v, want %v", got, c.wantFiles)
			}
			if n, err := m.NBlocks(5, MainFork); err != nil || n != c.to {
				t.Fatalf("NBlocks = %d, %v", n, err)
			}
			// The fork can grow again across the old boundaries.
			writeBlocks(t, m, 5, MainFork, 10, "again")
			if got := readTag(t, m, 5, MainFork, 9); got != "again-9" {
				t.Fatalf("block 9 after regrowth reads %q", got)
			}
		})
	}
}

func TestDropRemovesEveryForkAndListSeesOnlyRelationFiles(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
	writeBlocks(t, m, 11, MainFork, 6, "a")
	writeBlocks(t, m, 11, VMFork, 1, "v")
	writeBlocks(t, m, 11, FSMFork, 5, "f")
	writeBlocks(t, m, 12, MainFork, 1, "b")
	must(t, m.Create(13, MainFork))
	must(t, os.WriteFile(filepath.Join(dir, "base", "catalog.tmp"), nil, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "base", "012"), nil, 0o600))

	rels, err := m.List()
	if err != nil || fmt.Sprint(rels) != "[11 12 13]" {
		t.Fatalf("List = %v, %v", rels, err)
	}
	must(t, m.Drop(11))
	if rels, _ := m.List(); fmt.Sprint(rels) != "[12 13]" {
		t.Fatalf("List after Drop = %v", rels)
	}
	for _, fork := range []ForkNum{MainFork, FSMFork, VMFork} {
		if ok, err := m.Exists(11, fork); ok || err != nil {
			t.Fatalf("fork %d of a dropped relation exists: %v", fork, err)
		}
		if n, _ := m.NBlocks(11, fork); n != 0 {
			t.Fatalf("fork %d of a dropped relation has %d blocks", fork, n)
		}
	}
	if ok, _ := m.Exists(13, MainFork); !ok {
		t.Fatal("created fork does not exist")
	}
	must(t, m.SyncAll())
}

func TestParseFileName(t *testing.T) {
	cases := []struct {
		name string
		rel  RelFileNode
		fork ForkNum
		seg  uint32
		ok   bool
	}{
		{"16384", 16384, MainFork, 0, true},
		{"16384_vm", 16384, VMFork, 0, true},
		{"16384_fsm.12", 16384, FSMFork, 12, true},
		{"7.1", 7, MainFork, 1, true},
		{"7.0", 0, 0, 0, false},
		{"07", 0, 0, 0, false},
		{"7_xx", 0, 0, 0, false},
		{"catalog.json", 0, 0, 0, false},
		{"4294967296", 0, 0, 0, false},
		{"", 0, 0, 0, false},
	}
	for _, c := range cases {
		rel, fork, seg, ok := ParseFileName(c.name)
		if ok != c.ok || rel != c.rel || fork != c.fork || seg != c.seg {
			t.Errorf("ParseFileName(%q) = %d %d %d %v", c.name, rel, fork, seg, ok)
		}
	}
}

func TestOpenRejectsBadSegmentSize(t *testing.T) {
	for _, sz := range []int64{-page.Size, 100, page.Size + 1} {
		if _, err := Open(vfs.NewOS(t.Logf), t.TempDir(), Options{SegmentSize: sz}); err == nil {
			t.Errorf("segment size %d accepted", sz)
		}
	}
}

func TestClosedManagerRefusesWork(t *testing.T) {
	m := openTest(t, vfs.NewOS(t.Logf), t.TempDir(), Options{})
	writeBlocks(t, m, 1, MainFork, 1, "c")
	must(t, m.Close())
	if err := m.Read(1, MainFork, 0, make([]byte, page.Size), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close = %v", err)
	}
	if err := m.Write(1, MainFork, 0, testPage("c"), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close = %v", err)
	}
}

// NBlocks reads a known size without a lock (every fetch of a tuple by its TID
// asks for it); beside concurrent extensions each reader must still see the
// size only grow, never past the extensions begun, and the final size once
// they have all returned. Run with -race: the size is shared without a mutex.
func TestNBlocksBesideConcurrentExtensionsOnlyGrowsAndEndsExact(t *testing.T) {
	m := openTest(t, vfs.NewOS(t.Logf), t.TempDir(), Options{})
	writeBlocks(t, m, 7, MainFork, 3, "t")
	const extenders, each, readers = 2, 40, 3
	var begun atomic.Int64
	begun.Store(3)
	stop := make(chan struct{})
	var rg sync.WaitGroup
	for range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			last := BlockNumber(0)
			for {
				select {
				case <-stop:
					return
				default:
				}
				n, err := m.NBlocks(7, MainFork)
				if err != nil {
					t.Error(err)
					return
				}
				if n < last || int64(n) > begun.Load() {
					t.Errorf("NBlocks = %d after %d, with %d extensions begun", n, last, begun.Load())
					return
				}
				last = n
			}
		}()
	}
	var wg sync.WaitGroup
	for range extenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				begun.Add(1)
				if _, err := m.Extend(7, MainFork, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	if n, err := m.NBlocks(7, MainFork); err != nil || n != 3+extenders*each {
		t.Fatalf("NBlocks after every extension = %d, %v, want %d", n, err, 3+extenders*each)
	}
}
