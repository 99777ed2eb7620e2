package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

func TestFailedFsyncIsStickyForEveryLaterChange(t *testing.T) {
	ffs := faultfs.New(vfs.NewOS(t.Logf))
	m := openTest(t, ffs, t.TempDir(), Options{})
	writeBlocks(t, m, 1, MainFork, 3, "a")
	must(t, m.SyncAll())
	must(t, m.Write(1, MainFork, 0, testPage("unsafe"), nil))
	rule := ffs.Inject(faultfs.Rule{Ops: faultfs.OpSync, Path: "base/1", Fault: faultfs.EIO, Times: 1})

	first := m.SyncAll()
	if !errors.Is(first, syscall.EIO) {
		t.Fatalf("SyncAll with failing fsync = %v, want EIO", first)
	}
	ffs.RemoveRule(rule) // the device "recovers": the Manager must not believe it
	var sticky *SyncFailedError
	later := map[string]error{
		"Write":    m.Write(1, MainFork, 1, testPage("b"), nil),
		"SyncAll":  m.SyncAll(),
		"Sync":     m.Sync(1, MainFork),
		"Create":   m.Create(2, MainFork),
		"Truncate": m.Truncate(1, MainFork, 1),
		"Drop":     m.Drop(1),
	}
	_, later["Extend"] = m.Extend(1, MainFork, nil)
	for op, err := range later {
		if !errors.As(err, &sticky) || !errors.Is(err, syscall.EIO) {
			t.Errorf("%s after failed fsync = %v, want *SyncFailedError wrapping EIO", op, err)
		}
	}
	if rule.Fired() != 1 {
		t.Fatalf("fsync failed %d times, want 1", rule.Fired())
	}
	// Reads still work: the data in the OS cache is what we wrote.
	if got := readTag(t, m, 1, MainFork, 0); got != "unsafe" {
		t.Fatalf("read after failure = %q", got)
	}
}

func TestFailedDirectorySyncIsSticky(t *testing.T) {
	ffs := faultfs.New(vfs.NewOS(t.Logf))
	m := openTest(t, ffs, t.TempDir(), Options{})
	must(t, m.Create(4, MainFork))
	ffs.Inject(faultfs.Rule{Ops: faultfs.OpSyncDir, Fault: faultfs.EIO, Times: 1})
	if err := m.SyncAll(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("SyncAll = %v, want EIO from the directory fsync", err)
	}
	if _, err := m.Extend(4, MainFork, nil); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Extend after failed directory sync = %v", err)
	}
}

func TestWriteErrorsAreReportedButNotSticky(t *testing.T) {
	ffs := faultfs.New(vfs.NewOS(t.Logf))
	m := openTest(t, ffs, t.TempDir(), Options{})
	writeBlocks(t, m, 1, MainFork, 2, "a")
	ffs.Inject(faultfs.Rule{Ops: faultfs.OpExtend, Fault: faultfs.ENOSPC, Times: 1})
	_, err := m.Extend(1, MainFork, nil)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "block 2") {
		t.Fatalf("Extend on a full disk = %v, want ENOSPC naming block 2", err)
	}
	ffs.Inject(faultfs.Rule{Ops: faultfs.OpWrite, Fault: faultfs.ShortWrite, Times: 1})
	if err := m.Write(1, MainFork, 0, testPage("short"), nil); err == nil {
		t.Fatal("short write reported success")
	}
	// Space comes back: the same operations succeed and nothing is sticky.
	if blk, err := m.Extend(1, MainFork, nil); err != nil || blk != 2 {
		t.Fatalf("Extend after ENOSPC = %d, %v; want block 2", blk, err)
	}
	must(t, m.Write(1, MainFork, 0, testPage("whole"), nil))
	must(t, m.SyncAll())
	if got := readTag(t, m, 1, MainFork, 0); got != "whole" {
		t.Fatalf("block 0 = %q", got)
	}
}

func TestPowerLossLeavesOnlySyncedBlocks(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) { testPowerLossLeavesOnlySyncedBlocks(t, direct) })
	}
}

func testPowerLossLeavesOnlySyncedBlocks(t *testing.T, direct bool) {
	dir := t.TempDir()
	ffs := faultfs.New(vfs.NewOS(t.Logf))
	m := openTest(t, ffs, dir, Options{Direct: direct})
	writeBlocks(t, m, 20, MainFork, 6, "durable") // two segments
	must(t, m.SyncAll())
	// Unsynced: overwrite, extension into a new segment, a new relation.
	must(t, m.Write(20, MainFork, 1, testPage("lost"), nil))
	for i := 6; i < 9; i++ {
		must(t, m.Write(20, MainFork, BlockNumber(i), testPage("lost"), nil))
	}
	writeBlocks(t, m, 21, MainFork, 2, "new")
	must(t, ffs.PowerLoss(faultfs.PowerLossOptions{}))
	if _, err := m.Extend(20, MainFork, nil); !errors.Is(err, faultfs.ErrPoweredOff) {
		t.Fatalf("Extend after power loss = %v", err)
	}

	m2 := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
	if n, err := m2.NBlocks(20, MainFork); err != nil || n != 6 {
		t.Fatalf("NBlocks after power loss = %d, %v; want 6", n, err)
	}
	for i := range BlockNumber(6) {
		if got := readTag(t, m2, 20, MainFork, i); got != fmt.Sprintf("durable-%d", i) {
			t.Errorf("block %d = %q after power loss", i, got)
		}
	}
	if rels, _ := m2.List(); fmt.Sprint(rels) != "[20]" {
		t.Fatalf("relations after power loss %v, want only the synced one", rels)
	}
}

func TestTornPageWriteIsDetectedAsCorruption(t *testing.T) {
	dir := t.TempDir()
	ffs := faultfs.New(vfs.NewOS(t.Logf))
	m := openTest(t, ffs, dir, Options{})
	writeBlocks(t, m, 30, MainFork, 2, "old")
	must(t, m.SyncAll())
	big := make(page.Page, page.Size)
	page.Init(big, 0)
	_, err := big.AddItem(make([]byte, 6000), 0) // spans both 4 KiB halves
	must(t, err)
	must(t, m.Write(30, MainFork, 1, big, nil))
	must(t, ffs.PowerLoss(faultfs.PowerLossOptions{TearProb: 1, Seed: 3}))

	m2 := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
	err = m2.Read(30, MainFork, 1, make([]byte, page.Size), nil)
	var ce *CorruptPageError
	if !errors.As(err, &ce) || ce.Block != 1 || ce.File != filepath.Join(dir, "base", "30") {
		t.Fatalf("read of torn page = %v, want *CorruptPageError for block 1", err)
	}
}

func TestCrashAtEveryPointKeepsSyncedPrefix(t *testing.T) {
	// Measure a workload's mutating operations, then cut the power at each
	// of them in turn: every block synced before the cut reads back intact.
	workload := func(m *Manager, synced *int) error {
		for round := range 4 {
			for i := range 3 {
				if err := m.Write(40, MainFork, BlockNumber(round*3+i), testPage(fmt.Sprintf("r%d-%d", round, i)), nil); err != nil {
					return err
				}
			}
			if err := m.SyncAll(); err != nil {
				return err
			}
			*synced = (round + 1) * 3
		}
		return nil
	}
	probe := faultfs.New(vfs.NewOS(t.Logf))
	var synced int
	pm := openTest(t, probe, t.TempDir(), Options{})
	before := probe.MutatingOps()
	must(t, workload(pm, &synced))
	total := probe.MutatingOps() - before
	for cut := 1; cut <= int(total); cut++ {
		dir := t.TempDir()
		ffs := faultfs.New(vfs.NewOS(t.Logf))
		m := openTest(t, ffs, dir, Options{})
		ffs.CrashAfter(cut, faultfs.PowerLossOptions{TearProb: 0.5, Seed: uint64(cut)})
		synced := 0
		if err := workload(m, &synced); !errors.Is(err, faultfs.ErrPoweredOff) {
			t.Fatalf("cut %d: workload = %v, want ErrPoweredOff", cut, err)
		}
		m2 := openTest(t, vfs.NewOS(t.Logf), dir, Options{})
		n, err := m2.NBlocks(40, MainFork)
		if err != nil || int(n) < synced {
			t.Fatalf("cut %d: %d blocks survive, %d were synced (%v)", cut, n, synced, err)
		}
		for i := range synced {
			want := fmt.Sprintf("r%d-%d", i/3, i%3)
			if got := readTag(t, m2, 40, MainFork, BlockNumber(i)); got != want {
				t.Fatalf("cut %d: synced block %d = %q, want %q", cut, i, got, want)
			}
		}
	}
}

func TestDirectIOOnRealFileSystemOrLoggedFallback(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	m := openTest(t, vfs.NewOS(logf), dir, Options{Direct: true, Logf: logf})
	writeBlocks(t, m, 50, MainFork, 6, "d")
	unaligned := make([]byte, page.Size+1)[1:] // callers need not align
	must(t, m.Read(50, MainFork, 5, unaligned, nil))
	if tagOf(unaligned) != "d-5" {
		t.Fatalf("direct read returned %q", tagOf(unaligned))
	}
	must(t, m.SyncAll())
	mu.Lock()
	defer mu.Unlock()
	if m.Direct() {
		t.Logf("O_DIRECT in effect")
		if len(logs) != 0 {
			t.Fatalf("warnings although O_DIRECT worked: %q", logs)
		}
		return
	}
	if len(logs) == 0 || !strings.Contains(strings.Join(logs, "\n"), "O_DIRECT not supported on") {
		t.Fatalf("O_DIRECT refused without the warning: %q", logs)
	}
}

func TestDirectIORefusedFallsBackWithOneWarning(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	logf := func(format string, args ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	m := openTest(t, noDirectFS{vfs.NewOS(logf)}, t.TempDir(), Options{Direct: true, Logf: logf})
	writeBlocks(t, m, 51, MainFork, 9, "b") // three segment files
	if m.Direct() {
		t.Fatal("Direct() true although every file was opened buffered")
	}
	if got := readTag(t, m, 51, MainFork, 8); got != "b-8" {
		t.Fatalf("buffered fallback read %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], "O_DIRECT requested but refused") {
		t.Fatalf("want one fallback warning, got %q", logs)
	}
}

// noDirectFS opens every file buffered, like a file system that refuses
// O_DIRECT.
type noDirectFS struct{ vfs.FS }

func (fs noDirectFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	return fs.FS.OpenFile(name, flag&^vfs.ODirect, perm)
}
