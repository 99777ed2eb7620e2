package redo

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

const rel storage.RelFileNode = 100

func newEnv(t *testing.T) *Env {
	t.Helper()
	dir := t.TempDir()
	fs := vfs.OS()
	st, err := storage.Open(fs, dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, err := wal.Open(fs, dir, 0, wal.Options{SegmentSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := buffer.New(st, log, buffer.Options{Frames: 32})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := errors.Join(log.Close(), st.Close()); err != nil {
			t.Error(err)
		}
	})
	return &Env{Pool: pool, Storage: st, Skip: func(r storage.RelFileNode) bool { return r == 666 }}
}

func record(end wal.LSN, blk storage.BlockNumber, image []byte) *wal.Record {
	return &wal.Record{Rmgr: wal.RmgrHeap, EndLSN: end, StartLSN: end - 50,
		Blocks: []wal.BlockRef{{Rel: rel, Fork: storage.MainFork, Block: blk, Image: image}}}
}

// writePage stores a formatted page with the given LSN as block blk.
func writePage(t *testing.T, env *Env, blk storage.BlockNumber, lsn uint64) {
	t.Helper()
	if err := env.Storage.Create(rel, storage.MainFork); err != nil {
		t.Fatal(err)
	}
	p := make(page.Page, page.Size)
	page.Init(p, 0)
	p.SetLSN(lsn)
	for n, _ := env.Storage.NBlocks(rel, storage.MainFork); n < blk; n++ {
		if _, err := env.Storage.Extend(rel, storage.MainFork, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Storage.Write(rel, storage.MainFork, blk, p, nil); err != nil {
		t.Fatal(err)
	}
}

func TestReadBlockPastTheEndExtendsTheForkWithZeroPages(t *testing.T) {
	env := newEnv(t)
	b, act, err := ReadBlock(env, record(1000, 3, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if act != Apply || !b.Page().IsNew() || b.Tag().Block != 3 {
		t.Fatalf("action %v, new %v, block %d: want Apply on a new block 3", act, b.Page().IsNew(), b.Tag().Block)
	}
	page.Init(b.Page(), 0)
	Finish(b, record(1000, 3, nil))
	if n, _ := env.Storage.NBlocks(rel, storage.MainFork); n != 4 {
		t.Fatalf("fork has %d blocks, want 4", n)
	}
	// Replaying the same record again finds it applied.
	b, act, err = ReadBlock(env, record(1000, 3, nil), 0)
	if err != nil {
		t.Fatal(err)
	}
	if act != Done || b.Page().LSN() != 1000 {
		t.Fatalf("second replay: %v with page LSN %d, want Done at 1000", act, b.Page().LSN())
	}
	Release(b)
}

func TestReadBlockComparesPageLSNWithRecordEnd(t *testing.T) {
	cases := []struct {
		pageLSN uint64
		recEnd  wal.LSN
		want    Action
	}{
		{pageLSN: 500, recEnd: 1000, want: Apply},
		{pageLSN: 1000, recEnd: 1000, want: Done},
		{pageLSN: 2000, recEnd: 1000, want: Done},
	}
	for _, c := range cases {
		env := newEnv(t)
		writePage(t, env, 0, c.pageLSN)
		b, act, err := ReadBlock(env, record(c.recEnd, 0, nil), 0)
		if err != nil {
			t.Fatal(err)
		}
		if act != c.want {
			t.Errorf("page LSN %d, record end %d: %v, want %v", c.pageLSN, c.recEnd, act, c.want)
		}
		Release(b)
	}
}

func TestReadBlockRestoresImageOverATornPage(t *testing.T) {
	env := newEnv(t)
	writePage(t, env, 0, 10)
	// Tear the page on disk: its checksum no longer matches.
	f, err := os.OpenFile(env.Storage.Path(rel, storage.MainFork), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xAB}, 4096), 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadBlock(env, record(100, 0, nil), 0); err == nil {
		t.Fatal("a torn page without an image was read without error")
	}

	img := make(page.Page, page.Size)
	page.Init(img, 0)
	if _, err := img.AddItem([]byte("restored tuple"), 0); err != nil {
		t.Fatal(err)
	}
	b, act, err := ReadBlock(env, record(5000, 0, img), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer Release(b)
	if act != Done || b.Page().LSN() != 5000 || !bytes.Equal(b.Page().ItemData(1), []byte("restored tuple")) {
		t.Fatalf("action %v, LSN %d, item %q: want Done with the image at LSN 5000", act, b.Page().LSN(), b.Page().ItemData(1))
	}
}

func TestReadBlockSkipsRelationsNotInTheCatalog(t *testing.T) {
	env := newEnv(t)
	rec := record(100, 0, nil)
	rec.Blocks[0].Rel = 666
	b, act, err := ReadBlock(env, rec, 0)
	if err != nil || act != Skipped || b != nil {
		t.Fatalf("got %v %v %v, want Skipped with no buffer", b, act, err)
	}
	if _, _, err := ReadBlock(env, rec, 5); err == nil {
		t.Fatal("out-of-range block reference accepted")
	}
}
