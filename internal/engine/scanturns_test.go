package engine

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// gateFS holds up every read of the files it gates until the test lets them
// go, and says when the first one arrived.
type gateFS struct {
	vfs.FS
	mu    sync.Mutex
	gates map[string]*gate // by cleaned path
}

type gate struct {
	entered chan struct{} // closed at the first read
	release chan struct{} // closed by open
	once    sync.Once
	opened  sync.Once
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, fs: g, path: filepath.Clean(name)}, nil
}

// close makes reads of path wait until open.
func (g *gateFS) close(path string) *gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gates == nil {
		g.gates = map[string]*gate{}
	}
	gt := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	g.gates[filepath.Clean(path)] = gt
	return gt
}

func (gt *gate) open() { gt.opened.Do(func() { close(gt.release) }) }

type gatedFile struct {
	vfs.File
	fs   *gateFS
	path string
}

func (f *gatedFile) ReadAt(b []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	gt := f.fs.gates[f.path]
	f.fs.mu.Unlock()
	if gt != nil {
		gt.once.Do(func() { close(gt.entered) })
		<-gt.release
	}
	return f.File.ReadAt(b, off)
}

// within waits up to 10 s for ch to be closed or to deliver, failing the test with what.
func within[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10 s", what)
	}
	var zero T
	return zero
}

// TestStatsAndCheckHoldUpACreateTableForOneTableNotTheWholeScan: Stats and Check walk
// the tables one at a time, each under the locks a statement takes; a CREATE TABLE that
// arrives while they read a table waits for that table only, and the transactions
// queued behind the CREATE TABLE go on with it, while the walk is still busy with a
// later table. Both once held db.mu shared across every table: the CREATE TABLE waited
// for the whole walk, and every new transaction (BeginTx takes db.mu shared, which Go's
// RWMutex lets no reader have past a waiting writer) waited with it.
func TestStatsAndCheckHoldUpACreateTableForOneTableNotTheWholeScan(t *testing.T) {
	for _, tc := range []struct {
		name string
		walk func(db *DB) error
	}{
		{"Stats", func(db *DB) error {
			st, err := db.Stats(context.Background())
			if err == nil && len(st) != 3 {
				t.Errorf("Stats gave %d tables, want the 3 catalogued when it started", len(st))
			}
			return err
		}},
		{"Check", func(db *DB) error {
			rep, err := db.Check(context.Background())
			if err == nil && (!rep.OK() || rep.Relations != 3) {
				t.Errorf("Check: %d relations, problems %v; want 3 and none", rep.Relations, rep.Problems)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := testOpts()
			gfs := &gateFS{FS: vfs.NewOS(t.Logf)}
			opts.FS = gfs
			db, dir := newDB(t, opts)
			balanceTables(t, db, "t1", "t2", "t3")
			// Reopen, so that Stats reads the tables from their files, not the pool.
			closeDB(t, db)
			db, err := Open(dir, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeDB(t, db) })
			var gates []*gate
			for _, name := range []string{"t2", "t3"} {
				tb, err := db.cat.Table(name)
				if err != nil {
					t.Fatal(err)
				}
				gates = append(gates, gfs.close(db.st.Path(tb.Rel, storage.MainFork)))
			}
			t.Cleanup(func() { // before the Close above: it waits for the walk
				for _, g := range gates {
					g.open()
				}
			})

			walked := make(chan error, 1)
			go func() { walked <- tc.walk(db) }()
			within(t, tc.name+" reaching t2", gates[0].entered)
			created := make(chan error, 1)
			go func() { created <- db.CreateTable("late", balanceCols) }()
			for deadline := time.Now().Add(10 * time.Second); db.mu.TryRLock(); time.Sleep(time.Millisecond) {
				db.mu.RUnlock()
				if time.Now().After(deadline) {
					t.Fatal("the CREATE TABLE never queued for db.mu")
				}
			}
			gates[0].open()
			if err := within(t, "CREATE TABLE while "+tc.name+" is busy with a later table", created); err != nil {
				t.Fatal(err)
			}
			within(t, tc.name+" reaching t3", gates[1].entered)
			read := make(chan error, 1)
			go func() {
				tx, err := db.Begin()
				if err == nil {
					err = tx.Scan("t1", func(page.TID, []any) error { return nil })
					endTx(tx)
				}
				read <- err
			}()
			if err := within(t, "a new transaction's read while "+tc.name+" is busy with t3", read); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-walked:
				t.Fatalf("%s ended (%v) before t3's read was let go", tc.name, err)
			default:
			}
			gates[1].open()
			if err := within(t, tc.name, walked); err != nil {
				t.Fatal(err)
			}
		})
	}
}
