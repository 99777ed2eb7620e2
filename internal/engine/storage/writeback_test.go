package storage

import (
	"os"
	"sync"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

// writebackFS counts the StartWriteback requests of each file it opens.
type writebackFS struct {
	vfs.FS
	mu    sync.Mutex
	calls map[string]int
}

type writebackFile struct {
	vfs.File
	fs *writebackFS
}

func (f *writebackFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &writebackFile{File: file, fs: f}, nil
}

func (f *writebackFile) StartWriteback() error {
	f.fs.mu.Lock()
	f.fs.calls[f.Name()]++
	f.fs.mu.Unlock()
	if w, ok := f.File.(vfs.WritebackStarter); ok {
		return w.StartWriteback()
	}
	return nil
}

// TestStartWritebackAsksEveryFileWrittenSinceSyncAllAndLeavesThemDue: a spread
// checkpoint's writeback request reaches each segment written since the last
// SyncAll, none other, and does not take them off SyncAll's list.
func TestStartWritebackAsksEveryFileWrittenSinceSyncAllAndLeavesThemDue(t *testing.T) {
	wfs := &writebackFS{FS: vfs.NewOS(t.Logf), calls: map[string]int{}}
	m := openTest(t, wfs, t.TempDir(), Options{})
	writeBlocks(t, m, 20, MainFork, segPages+1, "a") // two segments
	writeBlocks(t, m, 21, MainFork, 1, "b")
	must(t, m.SyncAll())
	must(t, m.Write(20, MainFork, 0, testPage("again"), nil)) // the first segment of 20 only
	must(t, m.StartWriteback())
	if want := map[string]int{m.SegmentPath(20, MainFork, 0): 1}; len(wfs.calls) != 1 || wfs.calls[m.SegmentPath(20, MainFork, 0)] != 1 {
		t.Fatalf("writeback requests %v, want %v", wfs.calls, want)
	}
	m.stateMu.Lock()
	due := len(m.dirty)
	m.stateMu.Unlock()
	if due != 1 {
		t.Fatalf("%d files due for SyncAll after StartWriteback, want 1", due)
	}
	must(t, m.SyncAll())
}
