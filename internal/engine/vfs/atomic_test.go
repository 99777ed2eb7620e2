package vfs_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

// TestWriteFileAtomicPowerLoss cuts the power at every mutating operation of a replace (and
// once after it) and checks that the file then holds exactly the old or the new contents.
func TestWriteFileAtomicPowerLoss(t *testing.T) {
	oldData := bytes.Repeat([]byte("old!"), 4096) // 16 KiB: several tearable chunks
	newData := bytes.Repeat([]byte("NEW."), 4096)
	sawOld, sawNew := false, false
	for n := 1; n <= 12; n++ {
		dir := t.TempDir()
		if err := vfs.WriteFileAtomic(vfs.OS(), dir, "f", "f.tmp", oldData); err != nil {
			t.Fatal(err)
		}
		fs := faultfs.New(vfs.OS())
		opts := faultfs.PowerLossOptions{TearProb: 0.5, Seed: uint64(n)}
		fs.CrashAfter(n, opts)
		err := vfs.WriteFileAtomic(fs, dir, "f", "f.tmp", newData)
		if !fs.PoweredOff() {
			if err != nil {
				t.Fatalf("crash point %d: replace failed without a power cut: %v", n, err)
			}
			if err := fs.PowerLoss(opts); err != nil {
				t.Fatal(err)
			}
		}
		got, rerr := os.ReadFile(filepath.Join(dir, "f"))
		if rerr != nil {
			t.Fatalf("crash point %d: %v", n, rerr)
		}
		switch {
		case bytes.Equal(got, oldData):
			sawOld = true
		case bytes.Equal(got, newData):
			sawNew = true
			if err != nil {
				t.Errorf("crash point %d: the new file is durable but the replace reported %v", n, err)
			}
		default:
			t.Fatalf("crash point %d: file holds %d bytes that are neither old nor new", n, len(got))
		}
	}
	if !sawOld || !sawNew {
		t.Fatalf("crash points covered old=%v new=%v; want both", sawOld, sawNew)
	}
}
