package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

func TestSegmentNamesArePostgreSQLs(t *testing.T) {
	cases := []struct {
		lsn  LSN
		size int64
		want string
	}{
		{FirstLSN, DefaultSegmentSize, "000000010000000000000000"},
		{0x1_0000_0000 + 3*DefaultSegmentSize + 7, DefaultSegmentSize, "000000010000000100000003"},
		{0xFF_FFFF_FFFF, DefaultSegmentSize, "00000001000000FF000000FF"},
		{5 * testSegSize, testSegSize, "000000010000000000000005"},
	}
	for _, c := range cases {
		segno := uint64(c.lsn) / uint64(c.size)
		if got := SegmentName(segno, c.size); got != c.want {
			t.Errorf("SegmentName(LSN %X, %d) = %s, want %s", uint64(c.lsn), c.size, got, c.want)
		}
		if back, ok := ParseSegmentName(c.want, c.size); !ok || back != segno {
			t.Errorf("ParseSegmentName(%s) = %d, %v; want %d", c.want, back, ok, segno)
		}
	}
	for _, bad := range []string{"000000020000000000000000", "0000000100000000000000zz", "00000001000000000000000", "000000010000000001000000"} {
		if _, ok := ParseSegmentName(bad, DefaultSegmentSize); ok {
			t.Errorf("ParseSegmentName(%q) accepted", bad)
		}
	}
}

func TestOldSegmentNamesAreRefusedUntilRenamed(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, vfs.OS(), dir, 0)
	for range 150 {
		if _, err := l.Insert(&Record{Rmgr: RmgrXLOG, Main: make([]byte, 1000)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	end := l.InsertLSN()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs, err := listSegments(vfs.OS(), walDir(dir), testSegSize)
	if err != nil || len(segs) < 2 {
		t.Fatalf("segments %v, %v; want at least 2", segs, err)
	}
	for _, s := range segs { // as an older build named them
		if err := os.Rename(filepath.Join(walDir(dir), segName(s, testSegSize)),
			filepath.Join(walDir(dir), fmt.Sprintf("%016X", s*testSegSize))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(vfs.OS(), dir, end, testOpts); !errors.Is(err, ErrOldSegmentNames) {
		t.Fatalf("Open of old names: %v, want ErrOldSegmentNames", err)
	}
	if _, err := NewReader(vfs.OS(), dir, FirstLSN, testOpts); !errors.Is(err, ErrOldSegmentNames) {
		t.Fatalf("NewReader of old names: %v, want ErrOldSegmentNames", err)
	}
	n, err := RenameOldSegments(vfs.OS(), dir, testSegSize)
	if err != nil || n != len(segs) {
		t.Fatalf("RenameOldSegments = %d, %v; want %d", n, err, len(segs))
	}
	rd, err := NewReader(vfs.OS(), dir, FirstLSN, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rd.Close() }()
	recs := 0
	for {
		if _, err := rd.Next(); err != nil {
			break
		}
		recs++
	}
	if recs != 150 {
		t.Fatalf("read %d records after the rename, want 150", recs)
	}
}
