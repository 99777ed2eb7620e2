package wal

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

// crashWorkload drives a log the way the engine does: records of varied
// size, commits (flushes) now and then, checkpoints that move the redo
// pointer and recycle segments. It stops at the first error (the power
// going off) and reports what a survivor may rely on.
type crashWorkload struct {
	inserted  []*Record // in LSN order, with StartLSN/EndLSN set
	durable   LSN       // highest LSN a Flush acknowledged
	readStart LSN       // where a reader must start: the last redo handed to RemoveBefore
}

func (w *crashWorkload) run(fsys vfs.FS, dir string, seed uint64) error {
	w.readStart = FirstLSN
	l, err := Open(fsys, dir, 0, testOpts)
	if err != nil {
		return err
	}
	defer func() { _ = l.Close() }() // after a crash Close fails: the error that matters is returned below
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range 600 {
		rec := &Record{Rmgr: RmgrHeap, XID: uint64(i + 1), Main: make([]byte, 50+r.IntN(1500))}
		for j := range rec.Main {
			rec.Main[j] = byte(i ^ j)
		}
		start := l.InsertLSN()
		end, err := l.Insert(rec, nil)
		if err != nil {
			return err
		}
		rec.StartLSN, rec.EndLSN = start, end
		w.inserted = append(w.inserted, rec)
		if r.IntN(5) == 0 {
			if err := l.Flush(end, nil); err != nil {
				return err
			}
			w.durable = end
		}
		if i%150 == 149 {
			redo := l.SetRedoPtr()
			if err := l.Flush(redo, nil); err != nil {
				return err
			}
			w.durable = max(w.durable, redo)
			w.readStart = redo
			if err := l.RemoveBefore(redo); err != nil {
				return err
			}
		}
	}
	return l.Close()
}

// checkSurvivors reads the log after a crash: every acknowledged record
// must be there, nothing but inserted records may appear, and a log
// reopened where the valid WAL ends must continue cleanly.
func (w *crashWorkload) checkSurvivors(t *testing.T, dir string) {
	t.Helper()
	fsys := vfs.OS()
	got, err := readAll(t, fsys, dir, w.readStart)
	var ce *CorruptRecordError
	if err != io.EOF && !errors.As(err, &ce) {
		t.Fatalf("reader after the crash: %v", err)
	}
	first := 0
	for first < len(w.inserted) && w.inserted[first].StartLSN < w.readStart {
		first++
	}
	end := w.readStart
	for i, rec := range got {
		want := w.inserted[first+i]
		if rec.StartLSN != want.StartLSN || rec.XID != want.XID || len(rec.Main) != len(want.Main) {
			t.Fatalf("record %d after the crash: xid %d at %X, want xid %d at %X", i, rec.XID, rec.StartLSN, want.XID, want.StartLSN)
		}
		end = rec.EndLSN
	}
	if end < w.durable {
		t.Fatalf("valid WAL ends at %X (%v) but %X was acknowledged durable", end, err, w.durable)
	}
	t.Logf("%d of %d records survive, valid WAL ends at %X (%v), acknowledged up to %X",
		len(got), len(w.inserted)-first, end, err, w.durable)
	l, err := Open(fsys, dir, end, testOpts)
	if err != nil {
		t.Fatalf("reopen at %X: %v", end, err)
	}
	after, err := l.Insert(&Record{Rmgr: RmgrXact, XID: 1 << 40, Main: []byte("after the crash")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := readAll(t, fsys, dir, w.readStart)
	if err != io.EOF || len(again) != len(got)+1 || again[len(got)].EndLSN != after {
		t.Fatalf("after reopening: %d records (%v), want the %d survivors plus the new one", len(again), err, len(got))
	}
}

func TestPowerLossKeepsEveryFlushedRecord(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			dir := t.TempDir()
			fsys := faultfs.New(vfs.OS())
			l, err := Open(fsys, dir, 0, testOpts)
			if err != nil {
				t.Fatal(err)
			}
			w := &crashWorkload{readStart: FirstLSN}
			for i := range 300 {
				rec := &Record{Rmgr: RmgrHeap, XID: uint64(i + 1), Main: make([]byte, 700)}
				start := l.InsertLSN()
				end, err := l.Insert(rec, nil)
				if err != nil {
					t.Fatal(err)
				}
				rec.StartLSN, rec.EndLSN = start, end
				w.inserted = append(w.inserted, rec)
				if i == 200 {
					if err := l.Flush(end, nil); err != nil {
						t.Fatal(err)
					}
					w.durable = end
				}
			}
			// Records 201..299 were written out (the buffer is small
			// enough?) or not: either way they were never acknowledged.
			if err := fsys.PowerLoss(faultfs.PowerLossOptions{TearProb: 0.5, Seed: seed}); err != nil {
				t.Fatal(err)
			}
			w.checkSurvivors(t, dir)
		})
	}
}

func TestCrashAtAnyOperationLeavesAReadableLog(t *testing.T) {
	probe := faultfs.New(vfs.OS())
	var dry crashWorkload
	if err := dry.run(probe, t.TempDir(), 99); err != nil {
		t.Fatalf("workload without a crash: %v", err)
	}
	total := int(probe.MutatingOps())
	trials := 30
	if testing.Short() {
		trials = 5
	}
	r := rand.New(rand.NewPCG(5, 5))
	for trial := range trials {
		n := 1 + r.IntN(total)
		t.Run(fmt.Sprintf("crash at op %d of %d", n, total), func(t *testing.T) {
			dir := t.TempDir()
			fsys := faultfs.New(vfs.OS())
			fsys.CrashAfter(n, faultfs.PowerLossOptions{TearProb: 0.5, Seed: uint64(trial)})
			var w crashWorkload
			if err := w.run(fsys, dir, 99); !errors.Is(err, faultfs.ErrPoweredOff) {
				t.Fatalf("workload ended with %v, want the power to go off", err)
			}
			w.checkSurvivors(t, dir)
		})
	}
}
