package btree

import (
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// leafOfTID maps every entry's TID to the leaf block holding it.
func leafOfTID(t *testing.T, ix *Index) map[page.TID]storage.BlockNumber {
	t.Helper()
	n, err := ix.nblocks()
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{ix: ix}
	out := map[page.TID]storage.BlockNumber{}
	for blk := storage.BlockNumber(1); blk < n; blk++ {
		p, err := c.snapshot(blk)
		if err != nil {
			t.Fatal(err)
		}
		nd, err := loadNode(p)
		if err != nil {
			t.Fatal(err)
		}
		if !nd.op.isLeaf() {
			continue
		}
		for off := nd.first(); off <= nd.last(); off++ {
			e, _, _ := nd.item(off)
			out[e.TID] = blk
		}
	}
	return out
}

func TestBulkDeleteRemovesExactlyTheDeadEntriesInPhysicalOrder(t *testing.T) {
	env := newEnv(t, 256)
	ix := mustCreate(t, env, 10)
	es := randomEntries(3, 30_000, 1<<30) // TIDs are unique per entry
	insertAll(t, ix, es)
	dead := func(tid page.TID) bool { return (tid.Block*100+uint32(tid.Off))%3 == 0 }
	leafOf := leafOfTID(t, ix)
	nblocks, _ := ix.nblocks()

	var visited []storage.BlockNumber
	hooks := 0
	st, err := ix.BulkDelete(func(tid page.TID) bool {
		visited = append(visited, leafOf[tid])
		return dead(tid)
	}, nil, func() error { hooks++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSorted(visited) {
		t.Fatal("BulkDelete did not visit the leaves in physical block order")
	}
	if len(visited) != len(es) {
		t.Fatalf("callback called %d times, want once per entry (%d)", len(visited), len(es))
	}
	if hooks != int(nblocks)-1 || st.PagesScanned != int64(nblocks)-1 || st.Pages != int64(nblocks) {
		t.Fatalf("hook called %d times, stats %+v; want one call and one page per tree block (%d)", hooks, st, nblocks-1)
	}
	var live []Entry
	for _, e := range es {
		if !dead(e.TID) {
			live = append(live, e)
		}
	}
	if st.EntriesRemoved != int64(len(es)-len(live)) || st.EntriesRemaining != int64(len(live)) {
		t.Fatalf("stats %+v, want %d removed and %d remaining", st, len(es)-len(live), len(live))
	}
	if got := allEntries(t, ix); !equalEntries(got, sorted(live)) {
		t.Fatalf("after bulk delete the index has %d entries, want the %d live ones", len(got), len(live))
	}
	for _, e := range live[:1000] {
		if tids, _ := ix.Lookup(e.Key, nil); !slices.Contains(tids, e.TID) {
			t.Fatalf("live entry %+v lost", e)
		}
	}
	mustCheck(t, ix)

	// The index keeps working: deleted pairs can be inserted again.
	for _, e := range es[:200] {
		if dead(e.TID) {
			if err := ix.Insert(e.Key, e.TID, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	mustCheck(t, ix)
}

func TestBulkDeleteStopsAtTheHooksError(t *testing.T) {
	env := newEnv(t, 128)
	ix := mustCreate(t, env, 10)
	insertAll(t, ix, randomEntries(4, 5_000, 1<<30))
	cancel := errors.New("cancelled")
	calls := 0
	st, err := ix.BulkDelete(func(page.TID) bool { return true }, nil, func() error {
		calls++
		if calls == 2 {
			return cancel
		}
		return nil
	})
	if !errors.Is(err, cancel) || st.PagesScanned != 2 {
		t.Fatalf("err %v after %d pages, want the hook's error after 2", err, st.PagesScanned)
	}
	mustCheck(t, ix)
}

func TestCleanupCountsEntriesAndEmptyLeaves(t *testing.T) {
	env := newEnv(t, 128)
	ix := mustCreate(t, env, 10)
	for i := range 5_000 {
		if err := ix.Insert(IntKey(int64(i)), tidFor(i), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Kill every entry with key < 2000: the leftmost leaves become empty.
	if _, err := ix.BulkDelete(func(tid page.TID) bool { return tid.Block < 20 }, nil, nil); err != nil {
		t.Fatal(err)
	}
	st, err := ix.Cleanup(nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 3_000 || st.EmptyLeafPages < 4 || st.LeafPages <= st.EmptyLeafPages {
		t.Fatalf("cleanup stats %+v, want 3000 entries and several empty leaves", st)
	}
	if tids, _ := ix.Lookup(IntKey(10), nil); len(tids) != 0 {
		t.Fatalf("deleted key still found: %v", tids)
	}
	if tids, _ := ix.Lookup(IntKey(4_000), nil); len(tids) != 1 {
		t.Fatalf("live key not found after emptying leaves: %v", tids)
	}
	mustCheck(t, ix)
}

// slowFS makes every read of a file take readDelay while slow is set, and
// counts the reads in progress.
type slowFS struct {
	vfs.FS
	slow    *atomic.Bool
	reading *atomic.Int32
}

const readDelay = 300 * time.Millisecond

func (f slowFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	fl, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowFile{File: fl, fs: f}, nil
}

type slowFile struct {
	vfs.File
	fs slowFS
}

func (f slowFile) ReadAt(p []byte, off int64) (int, error) {
	if f.fs.slow.Load() {
		f.fs.reading.Add(1)
		defer f.fs.reading.Add(-1)
		time.Sleep(readDelay)
	}
	return f.File.ReadAt(p, off)
}

// A lookup whose pages are in the buffer pool does not wait for a bulk
// delete's read of a page from disk: the read happens before the index's
// write lock is taken (under it, every lookup stalled for a disk read's
// time, which showed as the foreground p99 during an unthrottled VACUUM).
func TestLookupDoesNotWaitForABulkDeletesPageRead(t *testing.T) {
	var slow atomic.Bool
	var reading atomic.Int32
	env := openEnvFS(t, t.TempDir(), 512, slowFS{FS: vfs.OS(), slow: &slow, reading: &reading})
	ix := mustCreate(t, env, 10)
	es := randomEntries(3, 30_000, 1<<30)
	insertAll(t, ix, es)
	if err := env.deps.Pool.FlushAll(); err != nil {
		t.Fatal(err)
	}
	env.deps.Pool.DropRel(10)                            // every page on disk only
	if _, err := ix.Lookup(es[0].Key, nil); err != nil { // its path back in the pool
		t.Fatal(err)
	}
	slow.Store(true)
	defer slow.Store(false)
	stop := errors.New("stop")
	pages := 0
	done := make(chan error, 1)
	go func() {
		_, err := ix.BulkDelete(func(page.TID) bool { return false }, nil, func() error {
			if pages++; pages >= 3 {
				return stop
			}
			return nil
		})
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); reading.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the bulk delete never read a page from disk")
		}
	}
	start := time.Now()
	tids, err := ix.Lookup(es[0].Key, nil)
	took := time.Since(start)
	if err != nil || len(tids) == 0 {
		t.Fatalf("lookup beside the bulk delete: %v, %d TIDs", err, len(tids))
	}
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("bulk delete: %v", err)
	}
	if took > readDelay/3 {
		t.Fatalf("a lookup of cached pages took %v beside a bulk delete's %v disk read: it waited for the read", took, readDelay)
	}
}

// A lookup of one leaf does not wait while a bulk delete works on another:
// the bulk delete holds only the page it changes, not the whole index (with
// the index's write lock held across each leaf's dead-entry lookups and its
// WAL record, every foreground lookup queued behind each of the VACUUM's
// index pages, the foreground tail during a throttled VACUUM).
func TestLookupOfAnotherLeafDoesNotWaitForABulkDeleteInProgress(t *testing.T) {
	env := newEnv(t, 512)
	ix := mustCreate(t, env, 10)
	es := randomEntries(5, 20_000, 1<<30)
	insertAll(t, ix, es)
	leaves := leafOfTID(t, ix)
	inside, release := make(chan storage.BlockNumber, 1), make(chan struct{})
	var once atomic.Bool
	done := make(chan error, 1)
	go func() {
		_, err := ix.BulkDelete(func(tid page.TID) bool {
			if once.CompareAndSwap(false, true) { // the pass's first leaf: hold it
				inside <- leaves[tid]
				<-release
			}
			return false
		}, nil, nil)
		done <- err
	}()
	var held storage.BlockNumber
	select {
	case held = <-inside:
	case <-time.After(10 * time.Second):
		t.Fatal("the bulk delete never looked an entry up")
	}
	var other Entry
	for _, e := range es {
		if leaves[e.TID] != held {
			other = e
			break
		}
	}
	found := make(chan error, 1)
	go func() {
		tids, err := ix.Lookup(other.Key, nil)
		if err == nil && !slices.Contains(tids, other.TID) {
			err = errors.New("the entry is missing")
		}
		found <- err
	}()
	select {
	case err := <-found:
		if err != nil {
			t.Fatalf("lookup of leaf %d beside a bulk delete on leaf %d: %v", leaves[other.TID], held, err)
		}
	case <-time.After(5 * time.Second):
		close(release)
		if err := <-done; err != nil {
			t.Errorf("bulk delete: %v", err)
		}
		t.Fatalf("a lookup of leaf %d waited more than 5 s for a bulk delete in progress on leaf %d", leaves[other.TID], held)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("bulk delete: %v", err)
	}
}
