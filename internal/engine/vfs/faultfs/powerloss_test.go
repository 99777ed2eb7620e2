package faultfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
)

func newFS(t *testing.T) (*FS, string) {
	t.Helper()
	return New(vfs.NewOS(t.Logf)), t.TempDir()
}

func fill(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func create(t *testing.T, fs vfs.FS, name string) vfs.File {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func write(t *testing.T, f vfs.File, b []byte, off int64) {
	t.Helper()
	if n, err := f.WriteAt(b, off); err != nil || n != len(b) {
		t.Fatalf("WriteAt(%d bytes at %d) = %d, %v", len(b), off, n, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// onDisk reads a file with the plain os package, as a restarted process
// would.
func onDisk(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

func TestPowerLossKeepsSyncedWritesAndUndoesUnsyncedOnes(t *testing.T) {
	fs, dir := newFS(t)
	name := filepath.Join(dir, "data")
	f := create(t, fs, name)
	must(t, fs.SyncDir(dir))
	write(t, f, fill(8192, 'a'), 0)
	write(t, f, fill(8192, 'b'), 8192)
	must(t, f.Sync())
	write(t, f, fill(100, 'x'), 50)       // overwrite, unsynced
	write(t, f, fill(8192, 'c'), 16384)   // extension, unsynced
	write(t, f, fill(10, 'y'), 8192+4000) // overwrite, unsynced
	must(t, fs.PowerLoss(PowerLossOptions{}))

	want := append(fill(8192, 'a'), fill(8192, 'b')...)
	if got := onDisk(t, name); !bytes.Equal(got, want) {
		t.Fatalf("after power loss: %d bytes, equal to synced state: %v", len(got), bytes.Equal(got, want))
	}
}

func TestPowerLossUndoesUnsyncedTruncation(t *testing.T) {
	fs, dir := newFS(t)
	name := filepath.Join(dir, "data")
	f := create(t, fs, name)
	must(t, fs.SyncDir(dir))
	write(t, f, fill(20000, 'a'), 0)
	must(t, f.Sync())
	must(t, f.Truncate(5000))
	write(t, f, fill(10, 'z'), 4995)
	must(t, f.Truncate(30000))
	must(t, fs.PowerLoss(PowerLossOptions{}))
	if got := onDisk(t, name); !bytes.Equal(got, fill(20000, 'a')) {
		t.Fatalf("truncations not undone: %d bytes", len(got))
	}
}

func TestPowerLossSyncCoversOnlyWritesBeforeIt(t *testing.T) {
	fs, dir := newFS(t)
	name := filepath.Join(dir, "data")
	f := create(t, fs, name)
	must(t, fs.SyncDir(dir))
	write(t, f, fill(4096, '1'), 0)
	must(t, f.Sync())
	write(t, f, fill(4096, '2'), 0)
	must(t, f.Sync())
	write(t, f, fill(4096, '3'), 0)
	must(t, fs.PowerLoss(PowerLossOptions{}))
	if got := onDisk(t, name); !bytes.Equal(got, fill(4096, '2')) {
		t.Fatalf("want the second synced version, got %q...", got[:4])
	}
}

func TestPowerLossTearsPageWritesAtFourKiBGranularity(t *testing.T) {
	seen := map[string]int{}
	for seed := range uint64(40) {
		fs, dir := newFS(t)
		name := filepath.Join(dir, "data")
		f := create(t, fs, name)
		must(t, fs.SyncDir(dir))
		write(t, f, fill(8192, 'o'), 0)
		must(t, f.Sync())
		write(t, f, fill(8192, 'n'), 0)
		must(t, fs.PowerLoss(PowerLossOptions{TearProb: 1, Seed: seed}))
		got := onDisk(t, name)
		if len(got) != 8192 {
			t.Fatalf("seed %d: %d bytes", seed, len(got))
		}
		first, second := got[:4096], got[4096:]
		for _, half := range [][]byte{first, second} {
			if !bytes.Equal(half, fill(4096, 'o')) && !bytes.Equal(half, fill(4096, 'n')) {
				t.Fatalf("seed %d: a 4 KiB half is mixed: not torn at 4 KiB", seed)
			}
		}
		pattern := string(first[0]) + string(second[0])
		if pattern != "on" && pattern != "no" {
			t.Fatalf("seed %d: halves %q, want exactly one new half", seed, pattern)
		}
		seen[pattern]++
	}
	if seen["on"] == 0 || seen["no"] == 0 {
		t.Fatalf("tearing never kept one of the halves: %v", seen)
	}
}

func TestTornHalfIsNotOverwrittenByOlderUnsyncedWrite(t *testing.T) {
	// Two unsynced writes of the same page: if the later one tears, its
	// kept half must survive the revert of the earlier one.
	for seed := range uint64(10) {
		fs, dir := newFS(t)
		name := filepath.Join(dir, "data")
		f := create(t, fs, name)
		must(t, fs.SyncDir(dir))
		write(t, f, fill(8192, 'o'), 0)
		must(t, f.Sync())
		write(t, f, fill(8192, '1'), 0)
		write(t, f, fill(8192, '2'), 0)
		must(t, fs.PowerLoss(PowerLossOptions{TearProb: 1, Seed: seed}))
		got := onDisk(t, name)
		if !bytes.Contains(got, fill(4096, '2')) {
			t.Fatalf("seed %d: no 4 KiB half of the last write survived: %q %q", seed, got[0], got[4096])
		}
	}
}

func TestPowerLossRemovesFilesCreatedSinceLastSyncDir(t *testing.T) {
	fs, dir := newFS(t)
	synced := filepath.Join(dir, "synced")
	unsynced := filepath.Join(dir, "unsynced")
	f := create(t, fs, synced)
	write(t, f, []byte("kept"), 0)
	must(t, f.Sync())
	must(t, fs.SyncDir(dir))
	g := create(t, fs, unsynced)
	write(t, g, []byte("lost"), 0)
	must(t, g.Sync()) // file synced, directory not
	sub := filepath.Join(dir, "a", "b")
	must(t, fs.MkdirAll(sub, 0o755))
	create(t, fs, filepath.Join(sub, "deep"))
	must(t, fs.PowerLoss(PowerLossOptions{}))
	if !exists(synced) || string(onDisk(t, synced)) != "kept" {
		t.Fatal("file created before SyncDir is gone or changed")
	}
	if exists(unsynced) {
		t.Fatal("file created after the last SyncDir survived")
	}
	if exists(filepath.Join(dir, "a")) {
		t.Fatal("directory created without syncing its parent survived")
	}
}

func TestPowerLossRevertsUnsyncedRenameAndRemove(t *testing.T) {
	fs, dir := newFS(t)
	names := map[string]string{"old": "old contents", "target": "target contents", "victim": "victim contents"}
	for n, c := range names {
		f := create(t, fs, filepath.Join(dir, n))
		write(t, f, []byte(c), 0)
		must(t, f.Sync())
		must(t, f.Close())
	}
	must(t, fs.SyncDir(dir))

	// Unsynced changes: an extra write to victim, then remove it; rename
	// old over target.
	v, err := fs.OpenFile(filepath.Join(dir, "victim"), os.O_RDWR, 0)
	must(t, err)
	write(t, v, []byte("XXXXXX"), 0)
	must(t, v.Close())
	must(t, fs.Remove(filepath.Join(dir, "victim")))
	must(t, fs.Rename(filepath.Join(dir, "old"), filepath.Join(dir, "target")))
	must(t, fs.PowerLoss(PowerLossOptions{}))

	for n, c := range names {
		if got := string(onDisk(t, filepath.Join(dir, n))); got != c {
			t.Errorf("%s = %q after power loss, want %q", n, got, c)
		}
	}
}

func TestSyncDirMakesRenameDurable(t *testing.T) {
	fs, dir := newFS(t)
	tmp, final := filepath.Join(dir, "catalog.tmp"), filepath.Join(dir, "catalog")
	f := create(t, fs, tmp)
	write(t, f, []byte("v2"), 0)
	must(t, f.Sync())
	must(t, f.Close())
	must(t, fs.Rename(tmp, final))
	must(t, fs.SyncDir(dir))
	must(t, fs.PowerLoss(PowerLossOptions{}))
	if got := string(onDisk(t, final)); got != "v2" || exists(tmp) {
		t.Fatalf("atomic replace not durable: final=%q tmp exists=%v", got, exists(tmp))
	}
}

func TestAfterPowerLossEveryOperationFailsAndLocksAreReleased(t *testing.T) {
	fs, dir := newFS(t)
	f := create(t, fs, filepath.Join(dir, "f"))
	lock := filepath.Join(dir, "LOCK")
	if _, err := fs.Lock(lock); err != nil {
		t.Fatal(err)
	}
	must(t, fs.PowerLoss(PowerLossOptions{}))
	if err := fs.PowerLoss(PowerLossOptions{}); !errors.Is(err, ErrPoweredOff) {
		t.Fatalf("second PowerLoss = %v", err)
	}
	ops := map[string]error{}
	_, ops["write"] = f.WriteAt([]byte("x"), 0)
	_, ops["read"] = f.ReadAt(make([]byte, 1), 0)
	ops["sync"] = f.Sync()
	ops["truncate"] = f.Truncate(0)
	_, ops["size"] = f.Size()
	ops["close"] = f.Close()
	_, ops["open"] = fs.OpenFile(filepath.Join(dir, "g"), os.O_RDWR|os.O_CREATE, 0o644)
	ops["rename"] = fs.Rename(filepath.Join(dir, "f"), filepath.Join(dir, "h"))
	ops["remove"] = fs.Remove(filepath.Join(dir, "f"))
	ops["mkdir"] = fs.MkdirAll(filepath.Join(dir, "d"), 0o755)
	ops["syncdir"] = fs.SyncDir(dir)
	_, ops["stat"] = fs.Stat(dir)
	_, ops["readdir"] = fs.ReadDir(dir)
	_, ops["lock"] = fs.Lock(lock)
	_, ops["freebytes"] = fs.FreeBytes(dir)
	for op, err := range ops {
		if !errors.Is(err, ErrPoweredOff) {
			t.Errorf("%s after power loss: %v, want ErrPoweredOff", op, err)
		}
	}
	l, err := vfs.NewOS(t.Logf).Lock(lock)
	if err != nil {
		t.Fatalf("lock still held after power loss: %v", err)
	}
	must(t, l.Close())
}

func TestCrashAfterCutsPowerAtTheNthMutatingOperation(t *testing.T) {
	fs, dir := newFS(t)
	name := filepath.Join(dir, "wal")
	f := create(t, fs, name) // mutating op 1 (create)
	must(t, fs.SyncDir(dir)) // 2
	fs.CrashAfter(4, PowerLossOptions{})
	write(t, f, fill(10, '1'), 0)  // 1st after arming
	must(t, f.Sync())              // 2nd
	write(t, f, fill(10, '2'), 10) // 3rd
	if _, err := f.ReadAt(make([]byte, 5), 0); err != nil {
		t.Fatalf("reads do not count: %v", err)
	}
	if _, err := f.WriteAt(fill(10, '3'), 20); !errors.Is(err, ErrPoweredOff) { // 4th: power cut
		t.Fatalf("4th mutating op = %v, want ErrPoweredOff", err)
	}
	if !fs.PoweredOff() {
		t.Fatal("not powered off")
	}
	if got := string(onDisk(t, name)); got != "1111111111" {
		t.Fatalf("on disk %q, want only the synced write", got)
	}
	if n := fs.Count(OpWrite); n != 2 {
		t.Fatalf("Count(OpWrite) = %d, want 2 (the third never ran)", n)
	}
}

func TestConcurrentWritersThenPowerLossLeaveSyncedPrefixes(t *testing.T) {
	fs, dir := newFS(t)
	const writers, rounds = 4, 50
	files := make([]vfs.File, writers)
	for i := range files {
		files[i] = create(t, fs, filepath.Join(dir, fmt.Sprint(i)))
	}
	must(t, fs.SyncDir(dir))
	synced := make([]int, writers)
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				if _, err := f.WriteAt(fill(512, byte('a'+r%26)), int64(r)*512); err != nil {
					return
				}
				if r%7 == 0 {
					if f.Sync() != nil {
						return
					}
					synced[i] = r + 1
				}
			}
		}()
	}
	wg.Wait()
	must(t, fs.PowerLoss(PowerLossOptions{}))
	for i := range files {
		got := onDisk(t, filepath.Join(dir, fmt.Sprint(i)))
		if len(got) != synced[i]*512 {
			t.Errorf("file %d: %d bytes, want %d synced", i, len(got), synced[i]*512)
		}
	}
}

func TestUnsyncedWritesFollowTheFileThroughARename(t *testing.T) {
	fs, dir := newFS(t)
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	f := create(t, fs, a)
	write(t, f, []byte("synced"), 0)
	must(t, f.Sync())
	must(t, fs.SyncDir(dir))
	write(t, f, []byte("LOST"), 0)
	must(t, fs.Rename(a, b))
	must(t, fs.SyncDir(dir)) // the rename is durable, the write is not
	must(t, fs.PowerLoss(PowerLossOptions{}))
	if exists(a) {
		t.Fatal("old name survived a durable rename")
	}
	if got := string(onDisk(t, b)); got != "synced" {
		t.Fatalf("renamed file = %q, want its synced contents", got)
	}
}
