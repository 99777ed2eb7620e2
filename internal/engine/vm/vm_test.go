package vm

import (
	"errors"
	"io"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/redo"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

const rel storage.RelFileNode = 16384

type stack struct {
	dir  string
	fs   vfs.FS
	st   *storage.Manager
	log  *wal.Log
	pool *buffer.Pool
}

func newStack(t *testing.T) *stack {
	t.Helper()
	s := &stack{dir: t.TempDir(), fs: vfs.OS()}
	var err error
	if s.st, err = storage.Open(s.fs, s.dir, storage.Options{}); err != nil {
		t.Fatal(err)
	}
	if s.log, err = wal.Open(s.fs, s.dir, 0, testWALOptions); err != nil {
		t.Fatal(err)
	}
	if s.pool, err = buffer.New(s.st, s.log, buffer.Options{Frames: 32}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.log.Close(); _ = s.st.Close() })
	return s
}

func TestSetClearIsSetAndCountAcrossVMPages(t *testing.T) {
	s := newStack(t)
	m := New(s.pool, s.st, s.log, rel)
	blocks := []storage.BlockNumber{0, 7, 8, BitsPerPage - 1, BitsPerPage, 2*BitsPerPage + 3}
	for _, h := range blocks {
		if set, err := m.IsSet(h, nil); err != nil || set {
			t.Fatalf("IsSet(%d) on an empty map = %v, %v", h, set, err)
		}
	}
	for _, h := range blocks {
		if err := m.Set(h, nil, nil); err != nil {
			t.Fatalf("Set(%d): %v", h, err)
		}
	}
	for _, h := range blocks {
		if set, err := m.IsSet(h, nil); err != nil || !set {
			t.Errorf("IsSet(%d) after Set = %v, %v", h, set, err)
		}
	}
	if set, _ := m.IsSet(9, nil); set {
		t.Error("a neighbour's bit was set")
	}
	if n, err := m.Count(3*BitsPerPage, nil); err != nil || n != len(blocks) {
		t.Errorf("Count = %d, %v; want %d", n, err, len(blocks))
	}
	if n, _ := m.Count(8, nil); n != 2 {
		t.Errorf("Count below 8 = %d, want 2 (blocks 0 and 7)", n)
	}
	was, err := m.Clear(7, nil)
	if err != nil || !was {
		t.Fatalf("Clear(7) = %v, %v", was, err)
	}
	if was, _ := m.Clear(7, nil); was {
		t.Error("second Clear reported the bit set")
	}
	if set, _ := m.IsSet(7, nil); set {
		t.Error("bit 7 still set after Clear")
	}
	if n, _ := s.st.NBlocks(rel, storage.VMFork); n != 3 {
		t.Errorf("VM fork has %d pages, want 3", n)
	}
}

func TestSetLogsHeapPageFlagAndRedoReproducesIt(t *testing.T) {
	s := newStack(t)
	m := New(s.pool, s.st, s.log, rel)
	if err := s.st.Create(rel, storage.MainFork); err != nil {
		t.Fatal(err)
	}
	hb, err := s.pool.Extend(rel, storage.MainFork, nil)
	if err != nil {
		t.Fatal(err)
	}
	page.Init(hb.Page(), 0)
	hb.MarkDirty(nil)
	if err := m.Set(0, hb, nil); err != nil {
		t.Fatal(err)
	}
	if hb.Page().Flags()&page.FlagAllVisible == 0 || hb.Page().LSN() == 0 {
		t.Fatalf("heap page flag %v LSN %d after Set", hb.Page().Flags(), hb.Page().LSN())
	}
	heapLSN := hb.Page().LSN()
	hb.Unlock()
	hb.Release()
	if err := m.Set(70000, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.log.Flush(s.log.InsertLSN(), nil); err != nil {
		t.Fatal(err)
	}

	f := newStack(t)
	env := &redo.Env{Pool: f.pool, Storage: f.st}
	r, err := wal.NewReader(s.fs, s.dir, 0, testWALOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := Redo(env, rec); err != nil {
			t.Fatal(err)
		}
		if err := Redo(env, rec); err != nil { // idempotent
			t.Fatal(err)
		}
	}
	fm := New(f.pool, f.st, f.log, rel)
	for _, h := range []storage.BlockNumber{0, 70000} {
		if set, err := fm.IsSet(h, nil); err != nil || !set {
			t.Errorf("after redo IsSet(%d) = %v, %v", h, set, err)
		}
	}
	b, err := f.pool.Read(buffer.Tag{Rel: rel, Fork: storage.MainFork, Block: 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if b.Page().Flags()&page.FlagAllVisible == 0 || b.Page().LSN() != heapLSN {
		t.Errorf("replayed heap page: flags %#x LSN %X, want all-visible at %X", b.Page().Flags(), b.Page().LSN(), heapLSN)
	}
	// ClearForRedo clears whatever the VM page's LSN says.
	if err := ClearForRedo(env, rel, 0); err != nil {
		t.Fatal(err)
	}
	if set, _ := fm.IsSet(0, nil); set {
		t.Error("ClearForRedo left the bit set")
	}
}

func TestTruncateDropsBitsPastTheNewEnd(t *testing.T) {
	s := newStack(t)
	m := New(s.pool, s.st, s.log, rel)
	for _, h := range []storage.BlockNumber{1, 5, 6, 13, BitsPerPage + 1} {
		if err := m.Set(h, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Truncate(6); err != nil {
		t.Fatal(err)
	}
	if n, _ := m.Count(2*BitsPerPage, nil); n != 2 {
		t.Errorf("after truncating to 6 heap blocks: %d bits set, want 2 (blocks 1 and 5)", n)
	}
	if n, _ := s.st.NBlocks(rel, storage.VMFork); n != 1 {
		t.Errorf("VM fork has %d pages, want 1", n)
	}
	if err := m.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.st.NBlocks(rel, storage.VMFork); n != 0 {
		t.Errorf("VM fork has %d pages after truncating to 0, want 0", n)
	}
}

func TestRedoRejectsMalformedRecords(t *testing.T) {
	s := newStack(t)
	env := &redo.Env{Pool: s.pool, Storage: s.st}
	for _, rec := range []*wal.Record{
		{Rmgr: wal.RmgrVM, Info: 9, Main: make([]byte, 4)},
		{Rmgr: wal.RmgrVM, Info: InfoSetAllVisible, Main: make([]byte, 3)},
		{Rmgr: wal.RmgrVM, Info: InfoSetAllVisible, Main: make([]byte, 4),
			Blocks: []wal.BlockRef{{Rel: rel, Fork: storage.VMFork, Block: 5}}},
	} {
		if err := Redo(env, rec); err == nil {
			t.Errorf("Redo(%+v) accepted a malformed record", rec)
		}
	}
}

// testWALOptions uses small segments so each test's log is cheap to create.
var testWALOptions = wal.Options{SegmentSize: 1 << 20}

func TestReaderChargesOneAccessPerVMPageAndAnswersAsIsSet(t *testing.T) {
	s := newStack(t)
	m := New(s.pool, s.st, s.log, rel)
	for _, h := range []storage.BlockNumber{3, 100, BitsPerPage + 5} {
		if err := m.Set(h, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	var c usage.Counters
	r := m.Reader(&buffer.Strategy{Kind: buffer.Normal, Usage: &c})
	defer r.Release()
	for h := range storage.BlockNumber(2*BitsPerPage + 10) { // past the VM's end too
		got, err := r.IsSet(h)
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.IsSet(h, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("Reader.IsSet(%d) = %v, Map.IsSet = %v", h, got, want)
		}
	}
	if got := c.Hits.Load() + c.Misses.Load(); got != 2 {
		t.Fatalf("the reader made %d buffer accesses for two VM pages' worth of heap blocks, want 2", got)
	}
}
