package btree

import (
	"errors"
	"io"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/redo"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// workload runs inserts with splits, a bulk delete, more inserts and a
// bottom-up build against env, flushing the pool once in the middle (so
// the relation files hold a mix of old and new page versions), and
// returns the final entries of index 10 and index 11.
func workload(t *testing.T, env *testEnv) (want10, want11 []Entry) {
	t.Helper()
	ix := mustCreate(t, env, 10)
	es := randomEntries(8, 20_000, 5_000)
	insertAll(t, ix, es[:10_000])
	if err := env.deps.Pool.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if err := env.deps.Storage.SyncAll(); err != nil {
		t.Fatal(err)
	}
	insertAll(t, ix, es[10_000:])
	if _, err := ix.BulkDelete(func(tid page.TID) bool { return tid.Off%3 == 0 }, nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 3_000 {
		if err := ix.Insert(IntKey(int64(i)), tidFor(500_000+i), nil); err != nil {
			t.Fatal(err)
		}
	}
	built, err := Build(env.deps, 11, iterate(sorted(es[:7_000])), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.deps.Log.Flush(env.deps.Log.InsertLSN(), nil); err != nil {
		t.Fatal(err)
	}
	return allEntries(t, ix), allEntries(t, built)
}

// replay applies every btree record of the WAL in walDir to deps.
func replay(t *testing.T, fs vfs.FS, walDir string, deps Deps) int {
	t.Helper()
	r, err := wal.NewReader(fs, walDir, wal.FirstLSN, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	env := &redo.Env{Pool: deps.Pool, Storage: deps.Storage}
	n := 0
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Rmgr != wal.RmgrBtree {
			continue
		}
		if err := Redo(env, rec); err != nil {
			t.Fatal(err)
		}
		n++
	}
}

// recoveryDeps opens a fresh storage manager and pool over the data in dir
// (as after a crash: nothing of the old pool survives), with a scratch WAL.
func recoveryDeps(t *testing.T, dir string) Deps {
	t.Helper()
	fs := vfs.OS()
	st, err := storage.Open(fs, dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log, err := wal.Open(fs, t.TempDir(), 0, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := buffer.New(st, log, buffer.Options{Frames: 2048})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = log.Close(); _ = st.Close() })
	return Deps{Pool: pool, Storage: st, Log: log}
}

func TestRedoReplaysTheWorkloadIntoAnEmptyDirectory(t *testing.T) {
	src := newEnv(t, 256)
	want10, want11 := workload(t, src)
	deps := recoveryDeps(t, t.TempDir())
	if n := replay(t, src.fs, src.dir, deps); n == 0 {
		t.Fatal("no btree records replayed")
	}
	for rel, want := range map[storage.RelFileNode][]Entry{10: want10, 11: want11} {
		ix := Open(deps, rel)
		if got := allEntries(t, ix); !equalEntries(got, want) {
			t.Fatalf("index %d after redo has %d entries, want %d", rel, len(got), len(want))
		}
		mustCheck(t, ix)
	}
}

func TestRedoOverPartlyWrittenFilesIsIdempotent(t *testing.T) {
	src := newEnv(t, 256)
	want10, want11 := workload(t, src)
	// "Crash": the pool's unwritten pages are lost; the files hold the
	// pages flushed midway. Replay the whole log over them, twice.
	deps := recoveryDeps(t, src.dir)
	replay(t, src.fs, src.dir, deps)
	replay(t, src.fs, src.dir, deps)
	for rel, want := range map[storage.RelFileNode][]Entry{10: want10, 11: want11} {
		ix := Open(deps, rel)
		if got := allEntries(t, ix); !equalEntries(got, want) {
			t.Fatalf("index %d after redo has %d entries, want %d", rel, len(got), len(want))
		}
		mustCheck(t, ix)
	}
}
