package btree

import (
	"bytes"
	"fmt"
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
	return openEnvFS(t, dir, frames, vfs.OS())
}

func openEnvFS(t testing.TB, dir string, frames int, fs vfs.FS) *testEnv {
	t.Helper()
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
	ix, err := create(env.deps, rel, nil, testLayout)
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
		out[i] = Entry{Key: testKey(int64(r.IntN(keySpace))), TID: tidFor(i)}
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
	if err := ix.AllEntries(nil, func(k []byte, tid page.TID) error {
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

// testLayout is the page layout mustCreate makes indexes in (layout 2, as
// Create does; TestLayoutOneIndexesKeepWorking runs tests in layout 1).
var testLayout = layout2

// equalEntries compares entry lists (Entry holds a slice, so it is not
// comparable with ==).
func equalEntries(a, b []Entry) bool {
	return slices.EqualFunc(a, b, func(x, y Entry) bool { return Compare(x, y) == 0 })
}

// keyInt is the integer of an IntKey (tests over integer keys).
func keyInt(t testing.TB, key []byte) int64 {
	t.Helper()
	k, err := intOfKey(key)
	if err != nil {
		t.Fatalf("key %x: %v", key, err)
	}
	return k
}

// rangeInts is Range over integer keys [lo, hi].
func rangeInts(ix *Index, lo, hi int64, fn func(k int64, tid page.TID) error) error {
	return ix.Range(IntKey(lo), IntKey(hi), nil, func(key []byte, tid page.TID) error {
		k, err := intOfKey(key)
		if err != nil {
			return err
		}
		return fn(k, tid)
	})
}

// longKeys makes randomEntries use testKey's variable-length keys
// (TestLongVariableKeys sets it); otherwise keys are IntKeys.
var longKeys bool

// testKey is key k: IntKey(k), or with longKeys a key of 0 to 1000 bytes
// that grows with k's hash (distinct for distinct k).
func testKey(k int64) []byte {
	if !longKeys {
		return IntKey(k)
	}
	n := int(uint64(k)*2654435761%1000) + 1
	return append(bytes.Repeat([]byte{byte('a' + k%26)}, n)[:max(n-20, 0)], fmt.Sprintf("%020d", k)...)[:min(n, MaxKeySize)]
}
