package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// The tests use 4-page segments (segPages) and a 10-block fork: segments
// hold blocks 0-3, 4-7 and 8-9.
func TestReadRunReadsWholePagesUpToSegmentAndForkEnd(t *testing.T) {
	cases := []struct {
		name      string
		start     BlockNumber
		pages     int
		direct    bool
		wantPages int
		wantErr   error
	}{
		{"whole segment", 0, 4, false, 4, nil},
		{"stops at the segment end", 1, 8, false, 3, nil},
		{"middle segment", 4, 4, false, 4, nil},
		{"stops at the end of the fork", 8, 8, false, 2, nil},
		{"last block only", 9, 4, false, 1, nil},
		{"past the end", 10, 4, false, 0, ErrBeyondEnd},
		{"far past the end", 40, 4, false, 0, ErrBeyondEnd},
		{"O_DIRECT", 4, 4, true, 4, nil},
		{"O_DIRECT at the end of the fork", 8, 4, true, 2, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := openTest(t, vfs.NewOS(t.Logf), t.TempDir(), Options{Direct: c.direct})
			writeBlocks(t, m, 3, MainFork, 10, "r")
			if c.direct {
				must(t, m.SyncAll())
			}
			buf := vfs.AlignedBuffer(c.pages * page.Size)
			var u usage.Counters
			n, err := m.ReadRun(3, MainFork, c.start, buf, &u)
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Fatalf("ReadRun err = %v, want %v", err, c.wantErr)
			}
			if n != c.wantPages {
				t.Fatalf("ReadRun read %d pages, want %d", n, c.wantPages)
			}
			for i := range n {
				want := fmt.Sprintf("r-%d", int(c.start)+i)
				if got := tagOf(page.Page(buf[i*page.Size : (i+1)*page.Size])); got != want {
					t.Fatalf("page %d of the run holds %q, want %q", i, got, want)
				}
			}
			if got := u.ReadBytes.Load(); got != int64(n)*page.Size {
				t.Fatalf("charged %d bytes read, want %d", got, n*page.Size)
			}
		})
	}
}

func TestReadRunStopsAtACorruptPageAndNamesIt(t *testing.T) {
	dir := t.TempDir()
	m := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
	writeBlocks(t, m, 7, MainFork, 8, "b")
	seg1 := filepath.Join(dir, "base", "7.1")
	f, err := os.OpenFile(seg1, os.O_RDWR, 0)
	must(t, err)
	b := make([]byte, 1)
	_, err = f.ReadAt(b, 2*page.Size+3000) // block 6
	must(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b, 2*page.Size+3000)
	must(t, err)
	must(t, f.Close())

	buf := vfs.AlignedBuffer(4 * page.Size)
	n, err := m.ReadRun(7, MainFork, 4, buf, nil)
	var ce *CorruptPageError
	if !errors.As(err, &ce) || ce.Block != 6 || ce.File != seg1 {
		t.Fatalf("ReadRun = %d, %v; want *CorruptPageError for %s block 6", n, err, seg1)
	}
	if n != 2 || tagOf(page.Page(buf[:page.Size])) != "b-4" || tagOf(page.Page(buf[page.Size:2*page.Size])) != "b-5" {
		t.Fatalf("ReadRun kept %d good pages, want blocks 4 and 5", n)
	}
	if n, err := m.ReadRun(7, MainFork, 6, buf, nil); n != 0 || !errors.As(err, &ce) || ce.Block != 6 {
		t.Fatalf("run starting at the corrupt block = %d, %v", n, err)
	}
	if n, err := m.ReadRun(7, MainFork, 7, buf, nil); n != 1 || err != nil {
		t.Fatalf("run after the corrupt block = %d, %v", n, err)
	}
}

func TestReadRunRejectsBadBuffers(t *testing.T) {
	m := openTest(t, vfs.NewOS(t.Logf), t.TempDir(), Options{})
	writeBlocks(t, m, 3, MainFork, 2, "x")
	for _, size := range []int{0, page.Size - 1, page.Size + 1} {
		if _, err := m.ReadRun(3, MainFork, 0, make([]byte, size), nil); err == nil {
			t.Fatalf("ReadRun accepted a %d-byte buffer", size)
		}
	}
}

func TestWriteRunWritesAcrossSegmentsAndRefusesToExtend(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			m := openTest(t, vfs.NewOS(t.Logf), t.TempDir(), Options{Direct: direct})
			writeBlocks(t, m, 3, MainFork, 10, "old")
			buf := vfs.AlignedBuffer(6 * page.Size)
			for i := range 6 {
				copy(buf[i*page.Size:], testPage(fmt.Sprintf("new-%d", 2+i)))
			}
			var u usage.Counters
			must(t, m.WriteRun(3, MainFork, 2, buf, &u)) // blocks 2-7: segments 0 and 1
			if got := u.WriteBytes.Load(); got != 6*page.Size {
				t.Fatalf("charged %d bytes written, want %d", got, 6*page.Size)
			}
			for i := range 10 {
				want := fmt.Sprintf("old-%d", i)
				if i >= 2 && i < 8 {
					want = fmt.Sprintf("new-%d", i)
				}
				if got := readTag(t, m, 3, MainFork, BlockNumber(i)); got != want {
					t.Fatalf("block %d reads %q, want %q", i, got, want)
				}
			}
			if err := m.WriteRun(3, MainFork, 8, buf[:3*page.Size], nil); !errors.Is(err, ErrBeyondEnd) {
				t.Fatalf("run past the end = %v, want ErrBeyondEnd", err)
			}
			if n, _ := m.NBlocks(3, MainFork); n != 10 {
				t.Fatalf("fork has %d blocks after a refused run, want 10", n)
			}
			bad := vfs.AlignedBuffer(2 * page.Size)
			copy(bad, testPage("ok"))
			copy(bad[page.Size:], testPage("bad"))
			binary.LittleEndian.PutUint16(bad[page.Size+16:], 8) // upper below lower
			if err := m.WriteRun(3, MainFork, 0, bad, nil); err == nil {
				t.Fatal("WriteRun accepted an invalid page")
			}
			if got := readTag(t, m, 3, MainFork, 0); got != "old-0" {
				t.Fatalf("a refused run changed block 0 to %q", got)
			}
		})
	}
}
