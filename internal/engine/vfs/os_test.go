package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

type logSink struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, fmt.Sprintf(format, args...))
}

func (l *logSink) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

func TestAlignedBufferIsAlignedAndSized(t *testing.T) {
	for _, n := range []int{1, 4096, 8192, 8192 * 3} {
		b := AlignedBuffer(n)
		if len(b) != n || cap(b) != n || uintptrOf(b)%Alignment != 0 {
			t.Fatalf("AlignedBuffer(%d): len %d cap %d addr%%4096 %d", n, len(b), cap(b), uintptrOf(b)%Alignment)
		}
	}
}

func TestOSFileReadWriteSyncTruncate(t *testing.T) {
	fs := NewOS(t.Logf)
	name := filepath.Join(t.TempDir(), "f")
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteAt([]byte("hello world"), 100); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if sz, err := f.Size(); err != nil || sz != 111 {
		t.Fatalf("Size = %d, %v; want 111", sz, err)
	}
	got := make([]byte, 5)
	if _, err := f.ReadAt(got, 106); err != nil || string(got) != "world" {
		t.Fatalf("ReadAt = %q, %v", got, err)
	}
	if err := f.Truncate(50); err != nil {
		t.Fatal(err)
	}
	if sz, _ := f.Size(); sz != 50 {
		t.Fatalf("Size after Truncate = %d", sz)
	}
	if f.Name() != name || f.Direct() {
		t.Fatalf("Name %q Direct %v", f.Name(), f.Direct())
	}
}

func TestODirectOnRealFileSystemOrLoggedFallback(t *testing.T) {
	var logs logSink
	fs := NewOS(logs.logf)
	name := filepath.Join(t.TempDir(), "direct")
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|ODirect, 0o644)
	if err != nil {
		t.Fatalf("OpenFile with ODirect: %v", err)
	}
	defer func() { _ = f.Close() }()
	buf := AlignedBuffer(8192)
	for i := range buf {
		buf[i] = byte(i)
	}
	if _, err := f.WriteAt(buf, 8192); err != nil {
		t.Fatalf("aligned WriteAt: %v", err)
	}
	got := AlignedBuffer(8192)
	if _, err := f.ReadAt(got, 8192); err != nil || !bytes.Equal(got, buf) {
		t.Fatalf("aligned ReadAt: %v (equal %v)", err, bytes.Equal(got, buf))
	}
	if f.Direct() {
		t.Logf("O_DIRECT in effect on %s", fsTypeName(filepath.Dir(name)))
		// The kernel enforces alignment only with O_DIRECT: a misaligned
		// buffer must be refused, which proves the flag is really set.
		mis := make([]byte, 8192+1)[1:]
		if uintptrOf(mis)%512 == 0 {
			t.Skip("could not build a misaligned buffer")
		}
		if _, err := f.ReadAt(mis, 8192); !errors.Is(err, unix.EINVAL) {
			t.Fatalf("misaligned direct read: err=%v, want EINVAL", err)
		}
		return
	}
	if msgs := logs.all(); len(msgs) != 1 || !strings.Contains(msgs[0], "O_DIRECT not supported on") {
		t.Fatalf("fallback to buffered I/O not logged: %q", msgs)
	}
}

func TestODirectRefusedFallsBackAndWarnsOnce(t *testing.T) {
	var logs logSink
	fs := NewOS(logs.logf)
	fs.setDirect = func(uintptr) error { return unix.EINVAL }
	dir := t.TempDir()
	for i := range 3 {
		f, err := fs.OpenFile(filepath.Join(dir, fmt.Sprint(i)), os.O_RDWR|os.O_CREATE|os.O_EXCL|ODirect, 0o644)
		if err != nil {
			t.Fatalf("OpenFile #%d: %v", i, err)
		}
		if f.Direct() {
			t.Fatal("Direct() true although O_DIRECT was refused")
		}
		if _, err := f.WriteAt([]byte("x"), 3); err != nil {
			t.Fatalf("buffered write after fallback: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	msgs := logs.all()
	if len(msgs) != 1 {
		t.Fatalf("want exactly one warning, got %q", msgs)
	}
	if !strings.Contains(msgs[0], "O_DIRECT not supported on") || !strings.Contains(msgs[0], "using buffered I/O") {
		t.Fatalf("warning %q", msgs[0])
	}
}

func TestODirectOtherErrorFailsOpen(t *testing.T) {
	fs := NewOS(t.Logf)
	fs.setDirect = func(uintptr) error { return unix.EPERM }
	if _, err := fs.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE|ODirect, 0o644); !errors.Is(err, unix.EPERM) {
		t.Fatalf("OpenFile = %v, want EPERM", err)
	}
}

func TestLockExcludesSecondLockInSameProcess(t *testing.T) {
	fs := NewOS(t.Logf)
	name := filepath.Join(t.TempDir(), "LOCK")
	l1, err := fs.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fs.Lock(name)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), name) {
		t.Fatalf("second Lock = %v, want ErrLocked naming %s", err, name)
	}
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l1.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	l2, err := fs.Lock(name)
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
}

const lockHelperEnv = "VFS_LOCK_HELPER_PATH"

// TestLockHelperProcess is not a test: the cross-process test runs the test
// binary again with lockHelperEnv set, and this tries the lock there.
func TestLockHelperProcess(t *testing.T) {
	name := os.Getenv(lockHelperEnv)
	if name == "" {
		t.Skip("helper process only")
	}
	l, err := NewOS(t.Logf).Lock(name)
	if errors.Is(err, ErrLocked) {
		fmt.Println("RESULT: locked")
		return
	}
	if err != nil {
		fmt.Println("RESULT: error", err)
		return
	}
	fmt.Println("RESULT: acquired")
	_ = l.Close()
}

func TestLockExcludesOtherProcess(t *testing.T) {
	fs := NewOS(t.Logf)
	name := filepath.Join(t.TempDir(), "LOCK")
	run := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$", "-test.v")
		cmd.Env = append(os.Environ(), lockHelperEnv+"="+name)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if r, ok := strings.CutPrefix(line, "RESULT: "); ok {
				return r
			}
		}
		t.Fatalf("helper printed no result:\n%s", out)
		return ""
	}
	l, err := fs.Lock(name)
	if err != nil {
		t.Fatal(err)
	}
	if got := run(); got != "locked" {
		t.Fatalf("other process while held: %q, want locked", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := run(); got != "acquired" {
		t.Fatalf("other process after release: %q, want acquired", got)
	}
}

func TestSyncDirAndDirectoryOps(t *testing.T) {
	fs := NewOS(t.Logf)
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile(filepath.Join(dir, "x"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "y")); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir(dir); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	ents, err := fs.ReadDir(dir)
	if err != nil || len(ents) != 1 || ents[0].Name() != "y" {
		t.Fatalf("ReadDir = %v, %v", ents, err)
	}
	if _, err := fs.Stat(filepath.Join(dir, "y")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove(filepath.Join(dir, "y")); err != nil {
		t.Fatal(err)
	}
	if err := fs.SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("SyncDir of missing dir = %v", err)
	}
}

func TestFreeBytesMatchesStatfs(t *testing.T) {
	dir := t.TempDir()
	got, err := NewOS(t.Logf).FreeBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	want := st.Bavail * uint64(st.Bsize)
	// Other processes write meanwhile: allow 1 GiB of drift.
	if diff := int64(got) - int64(want); got == 0 || diff > 1<<30 || diff < -(1<<30) {
		t.Fatalf("FreeBytes = %d, statfs says %d", got, want)
	}
	if _, err := NewOS(t.Logf).FreeBytes(filepath.Join(dir, "nope")); err == nil {
		t.Fatal("FreeBytes of missing path succeeded")
	}
}

// TestOSFileStartsWritebackOfWhatItWrote: the request (sync_file_range) is
// accepted for a file with dirty pages and for an empty one.
func TestOSFileStartsWritebackOfWhatItWrote(t *testing.T) {
	f, err := NewOS(t.Logf).OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	w, ok := f.(WritebackStarter)
	if !ok {
		t.Fatal("the operating system's file is no WritebackStarter")
	}
	if err := w.StartWriteback(); err != nil {
		t.Fatalf("StartWriteback of an empty file: %v", err)
	}
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	if err := w.StartWriteback(); err != nil {
		t.Fatalf("StartWriteback: %v", err)
	}
}
