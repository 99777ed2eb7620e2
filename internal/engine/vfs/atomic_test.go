package vfs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
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

// TestWriteFileAtomicNamesTheFailedStep fails each step of a replace and
// checks the error names it, and that only the rename and the directory
// fsync count as "maybe replaced".
func TestWriteFileAtomicNamesTheFailedStep(t *testing.T) {
	cases := []struct {
		op    faultfs.Op
		step  vfs.AtomicStep
		maybe bool
	}{
		{faultfs.OpCreate, vfs.StepCreate, false},
		{faultfs.OpWrite, vfs.StepWrite, false},
		{faultfs.OpSync, vfs.StepSync, false},
		{faultfs.OpRename, vfs.StepRename, true},
		{faultfs.OpSyncDir, vfs.StepSyncDir, true},
	}
	for _, tc := range cases {
		t.Run(tc.step.String(), func(t *testing.T) {
			fs := faultfs.New(vfs.OS())
			fs.Inject(faultfs.Rule{Ops: tc.op, Fault: faultfs.EIO})
			err := vfs.WriteFileAtomic(fs, t.TempDir(), "f", "f.tmp", []byte("data"))
			var ae *vfs.AtomicWriteError
			if !errors.As(err, &ae) || ae.Step != tc.step {
				t.Fatalf("replace with a failing %v = %v, want an AtomicWriteError at step %v", tc.op, err, tc.step)
			}
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("error %v does not wrap EIO", err)
			}
			if got := vfs.MaybeReplaced(err); got != tc.maybe {
				t.Fatalf("MaybeReplaced after a failed %v = %v, want %v", tc.step, got, tc.maybe)
			}
		})
	}
}
