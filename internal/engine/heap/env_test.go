package heap

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/redo"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vm"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// testEnv is a real engine stack (files, fsync, WAL, buffer pool) in a
// temporary directory, with one heap relation.
type testEnv struct {
	t    *testing.T
	dir  string
	fs   vfs.FS
	st   *storage.Manager
	log  *wal.Log
	pool *buffer.Pool
	txns *txn.Manager
	rel  *Rel

	walOpts wal.Options

	// replayedWithoutImage counts heap records replayed by this package's
	// redo code rather than restored from a full-page image.
	replayedWithoutImage int
}

const testRel storage.RelFileNode = 16384

func newTestEnv(t testing.TB, frames int) *testEnv {
	t.Helper()
	return newTestEnvWAL(t, frames, testWALOptions)
}

// newTestEnvWAL is newTestEnv with chosen WAL options (benchmarks use
// large segments so segment creation does not dominate).
func newTestEnvWAL(t testing.TB, frames int, walOpts wal.Options) *testEnv {
	t.Helper()
	dir := t.TempDir()
	fs := vfs.OS()
	st, err := storage.Open(fs, dir, storage.Options{})
	if err != nil {
		t.Fatalf("storage.Open: %v", err)
	}
	log, err := wal.Open(fs, dir, 0, walOpts)
	if err != nil {
		t.Fatalf("wal.Open: %v", err)
	}
	pool, err := buffer.New(st, log, buffer.Options{Frames: frames})
	if err != nil {
		t.Fatalf("buffer.New: %v", err)
	}
	txns, err := txn.NewManager(fs, dir, log, 0)
	if err != nil {
		t.Fatalf("txn.NewManager: %v", err)
	}
	d := Deps{Pool: pool, Storage: st, Log: log, Txns: txns}
	rel, err := Create(d, testRel)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	e := &testEnv{dir: dir, fs: fs, st: st, log: log, pool: pool, txns: txns, rel: rel, walOpts: walOpts}
	if tt, ok := t.(*testing.T); ok {
		e.t = tt
	}
	t.Cleanup(func() {
		_ = log.Close()
		_ = st.Close()
	})
	return e
}

func (e *testEnv) begin() *txn.Txn { return e.txns.Begin() }

func (e *testEnv) commit(t *txn.Txn) {
	e.t.Helper()
	if err := e.txns.Commit(t, nil); err != nil {
		e.t.Fatalf("commit: %v", err)
	}
}

func (e *testEnv) insert(t *txn.Txn, row string) page.TID {
	e.t.Helper()
	tid, err := e.rel.Insert(t, []byte(row), nil)
	if err != nil {
		e.t.Fatalf("insert %q: %v", row, err)
	}
	return tid
}

// insertCommitted inserts rows in one committed transaction.
func (e *testEnv) insertCommitted(rows ...string) []page.TID {
	e.t.Helper()
	t := e.begin()
	tids := make([]page.TID, len(rows))
	for i, r := range rows {
		tids[i] = e.insert(t, r)
	}
	e.commit(t)
	return tids
}

// visibleRows scans the relation with snap and returns tid -> row.
func (e *testEnv) visibleRows(rel *Rel, snap *txn.Snapshot) map[page.TID]string {
	e.t.Helper()
	out := map[page.TID]string{}
	err := rel.Scan(context.Background(), snap, nil, func(tid page.TID, data []byte) error {
		out[tid] = string(data)
		return nil
	})
	if err != nil {
		e.t.Fatalf("scan: %v", err)
	}
	return out
}

func (e *testEnv) nblocks() uint32 {
	e.t.Helper()
	n, err := e.rel.NBlocks()
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// replayAll replays every WAL record of e into a fresh directory through
// the resource managers' redo routines and returns the rebuilt stack.
func (e *testEnv) replayAll() *testEnv {
	e.t.Helper()
	// The fresh stack created its own (empty) relation files; replay
	// recreates everything from e's log.
	return e.replayInto(newTestEnvWAL(e.t, e.pool.Frames(), e.walOpts))
}

// replayInto replays every WAL record of e into f's pool and storage.
func (e *testEnv) replayInto(f *testEnv) *testEnv {
	e.t.Helper()
	if err := e.log.Flush(e.log.InsertLSN(), nil); err != nil {
		e.t.Fatal(err)
	}
	env := &redo.Env{Pool: f.pool, Storage: f.st}
	r, err := wal.NewReader(e.fs, e.dir, 0, e.walOpts)
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close()
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			e.t.Fatalf("read WAL: %v", err)
		}
		f.txns.AdvanceNextXID(txn.XID(rec.XID) + 1)
		switch rec.Rmgr {
		case wal.RmgrHeap:
			imaged := false
			for _, b := range rec.Blocks {
				imaged = imaged || b.Image != nil
			}
			if !imaged {
				f.replayedWithoutImage++
			}
			err = Redo(env, rec)
		case wal.RmgrVM:
			err = vm.Redo(env, rec)
		case wal.RmgrXact:
			err = f.txns.Redo(rec)
		case wal.RmgrXLOG:
			for i := range rec.Blocks {
				b, act, rerr := redo.ReadBlock(env, rec, i)
				if rerr != nil {
					err = rerr
					break
				}
				if act == redo.Apply {
					e.t.Fatalf("XLOG record at %X without an image", uint64(rec.StartLSN))
				}
				if act == redo.Done {
					b.Unlock()
					b.Release()
				}
			}
		default:
			e.t.Fatalf("unexpected rmgr %d", rec.Rmgr)
		}
		if err != nil {
			e.t.Fatalf("redo of record at %X (rmgr %d info %d): %v", uint64(rec.StartLSN), rec.Rmgr, rec.Info, err)
		}
	}
	return f
}

// testWALOptions uses small segments so each test's log is cheap to create.
var testWALOptions = wal.Options{SegmentSize: 1 << 20}
