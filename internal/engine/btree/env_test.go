package btree

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// testEnv is a real data directory: storage manager, WAL and buffer pool.
type testEnv struct {
	dir  string
	fs   vfs.FS
	deps Deps
}

func newEnv(t testing.TB, frames int) *testEnv {
	t.Helper()
	return openEnv(t, t.TempDir(), frames)
}

func openEnv(t testing.TB, dir string, frames int) *testEnv {
	t.Helper()
	fs := vfs.OS()
	st, err := storage.Open(fs, dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, err := wal.Open(fs, dir, 0, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := buffer.New(st, log, buffer.Options{Frames: frames})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := log.Close(); err != nil {
			t.Error(err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	return &testEnv{dir: dir, fs: fs, deps: Deps{Pool: pool, Storage: st, Log: log}}
}

func mustCreate(t testing.TB, env *testEnv, rel storage.RelFileNode) *Index {
	t.Helper()
	ix, err := Create(env.deps, rel, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func tidFor(i int) page.TID {
	return page.TID{Block: uint32(i / 100), Off: page.OffsetNumber(i%100 + 1)}
}

// randomEntries returns n distinct entries with keys in [0, keySpace), in
// random order.
func randomEntries(seed uint64, n, keySpace int) []Entry {
	r := rand.New(rand.NewPCG(seed, 7))
	out := make([]Entry, n)
	for i := range out {
		out[i] = Entry{Key: int64(r.IntN(keySpace)), TID: tidFor(i)}
	}
	return out
}

func insertAll(t testing.TB, ix *Index, es []Entry) {
	t.Helper()
	for _, e := range es {
		if err := ix.Insert(e.Key, e.TID, nil); err != nil {
			t.Fatalf("insert %+v: %v", e, err)
		}
	}
}

func allEntries(t testing.TB, ix *Index) []Entry {
	t.Helper()
	var out []Entry
	if err := ix.AllEntries(nil, func(k int64, tid page.TID) error {
		out = append(out, Entry{k, tid})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sorted(es []Entry) []Entry {
	out := slices.Clone(es)
	slices.SortFunc(out, Compare)
	return out
}

// mustCheck runs Check and fails on any reported problem.
func mustCheck(t testing.TB, ix *Index) {
	t.Helper()
	problems := 0
	err := ix.Check(func(blk storage.BlockNumber, msg string) {
		problems++
		if problems <= 10 {
			t.Errorf("check: block %d: %s", blk, msg)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if problems > 0 {
		t.Fatalf("check found %d problems", problems)
	}
}
