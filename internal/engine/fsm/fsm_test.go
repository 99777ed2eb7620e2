package fsm

import (
	"os"
	"sync"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

const rel storage.RelFileNode = 16384

type stack struct {
	st   *storage.Manager
	log  *wal.Log
	pool *buffer.Pool
}

func newStack(t *testing.T, dir string) *stack {
	t.Helper()
	fs := vfs.OS()
	s := &stack{}
	var err error
	if s.st, err = storage.Open(fs, dir, storage.Options{}); err != nil {
		t.Fatal(err)
	}
	if s.log, err = wal.Open(fs, dir, 0, testWALOptions); err != nil {
		t.Fatal(err)
	}
	if s.pool, err = buffer.New(s.st, s.log, buffer.Options{Frames: 32}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close(t) })
	return s
}

func (s *stack) close(t *testing.T) {
	if s.st == nil {
		return
	}
	if err := s.pool.FlushAll(); err != nil {
		t.Error(err)
	}
	_ = s.log.Close()
	_ = s.st.Close()
	s.st = nil
}

func TestCategoryRoundsDownAndCaps(t *testing.T) {
	cases := []struct{ free, want int }{{-5, 0}, {0, 0}, {31, 0}, {32, 1}, {100, 3}, {8152, 254}, {100000, 255}}
	for _, c := range cases {
		if got := Category(c.free); int(got) != c.want {
			t.Errorf("Category(%d) = %d, want %d", c.free, got, c.want)
		}
	}
}

func TestSearchFindsAPageWithEnoughRecordedSpace(t *testing.T) {
	s := newStack(t, t.TempDir())
	m := New(s.pool, s.st, rel)
	if _, ok, err := m.Search(100, nil); err != nil || ok {
		t.Fatalf("Search on an empty map = %v, %v", ok, err)
	}
	far := storage.BlockNumber(BytesPerPage + 10) // second FSM page
	for blk, free := range map[storage.BlockNumber]int{0: 50, 1: 400, 2: 8000, far: 5000} {
		if err := m.Record(blk, free, nil); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		need int
		want []storage.BlockNumber // acceptable answers
		ok   bool
	}{
		{300, []storage.BlockNumber{1, 2, far}, true},
		{6000, []storage.BlockNumber{2}, true},
		{8100, nil, false},
	}
	for _, c := range cases {
		blk, ok, err := m.Search(c.need, nil)
		if err != nil || ok != c.ok {
			t.Fatalf("Search(%d) = %d, %v, %v; want ok=%v", c.need, blk, ok, err, c.ok)
		}
		if ok {
			got, _ := m.Get(blk, nil)
			if got < c.need {
				t.Errorf("Search(%d) = block %d with only %d bytes recorded", c.need, blk, got)
			}
		}
	}
	// Filling block 2 makes the far block the only one with 4000 bytes.
	if err := m.Record(2, 0, nil); err != nil {
		t.Fatal(err)
	}
	if blk, ok, _ := m.Search(4000, nil); !ok || blk != far {
		t.Errorf("Search(4000) = %d, %v; want %d", blk, ok, far)
	}
	// Space recorded after a failed search is found again (the max hint
	// must not hide it).
	if _, ok, _ := m.Search(7000, nil); ok {
		t.Fatal("found 7000 bytes nowhere recorded")
	}
	if err := m.Record(1, 7500, nil); err != nil {
		t.Fatal(err)
	}
	if blk, ok, _ := m.Search(7000, nil); !ok || blk != 1 {
		t.Errorf("Search(7000) after recording block 1 = %d, %v", blk, ok)
	}
}

func TestTornFSMPageReadsAsNoFreeSpace(t *testing.T) {
	dir := t.TempDir()
	s := newStack(t, dir)
	m := New(s.pool, s.st, rel)
	if err := m.Record(3, 4000, nil); err != nil {
		t.Fatal(err)
	}
	path := s.st.Path(rel, storage.FSMFork)
	s.close(t)
	// Damage the page on disk: its checksum no longer matches.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xde, 0xad, 0xbe, 0xef}, page.Size-100); err != nil {
		t.Fatal(err)
	}
	f.Close()

	s2 := newStack(t, dir)
	m2 := New(s2.pool, s2.st, rel)
	if got, err := m2.Get(3, nil); err != nil || got != 0 {
		t.Fatalf("Get on a torn FSM page = %d, %v; want 0, nil", got, err)
	}
	if _, ok, err := m2.Search(100, nil); err != nil || ok {
		t.Fatalf("Search on a torn FSM page = %v, %v; want nothing, nil", ok, err)
	}
	// Recording again repairs it.
	if err := m2.Record(3, 4000, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := m2.Get(3, nil); got < 3968 {
		t.Errorf("Get after re-recording = %d", got)
	}
}

func TestTruncateForgetsPagesPastTheNewEnd(t *testing.T) {
	s := newStack(t, t.TempDir())
	m := New(s.pool, s.st, rel)
	for _, blk := range []storage.BlockNumber{1, 5, 9, BytesPerPage + 2} {
		if err := m.Record(blk, 1000, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Truncate(6); err != nil {
		t.Fatal(err)
	}
	for blk, want := range map[storage.BlockNumber]int{1: 992, 5: 992, 9: 0, BytesPerPage + 2: 0} {
		if got, _ := m.Get(blk, nil); got != want {
			t.Errorf("Get(%d) after truncate = %d, want %d", blk, got, want)
		}
	}
	if n, _ := s.st.NBlocks(rel, storage.FSMFork); n != 1 {
		t.Errorf("FSM fork has %d pages, want 1", n)
	}
}

func TestConcurrentRecordAndSearch(t *testing.T) {
	s := newStack(t, t.TempDir())
	m := New(s.pool, s.st, rel)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				blk := storage.BlockNumber(w*1000 + i)
				if err := m.Record(blk, (i%8)*1000, nil); err != nil {
					t.Error(err)
					return
				}
				if _, _, err := m.Search(3000, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	blk, ok, err := m.Search(6900, nil)
	if err != nil || !ok {
		t.Fatalf("Search(6900) = %d, %v, %v", blk, ok, err)
	}
	if got, _ := m.Get(blk, nil); got < 6900 {
		t.Errorf("block %d has %d bytes recorded", blk, got)
	}
}

// testWALOptions uses small segments so each test's log is cheap to create.
var testWALOptions = wal.Options{SegmentSize: 1 << 20}
