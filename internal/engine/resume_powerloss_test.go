package engine

import (
	"context"
	"errors"
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

// TestResumedVacuumAfterPowerLossesRemovesEveryDeadTuple cuts the power (faultfs, torn
// writes) at random points of lazy vacuums started with Resume, reopening and checking the
// directory after each, until one finishes: then no dead tuple is left and every live row
// is there, as after one uninterrupted vacuum, and the finishing vacuum scanned only from
// the position the cut ones recorded. A position is written after the WAL it claims was
// flushed, so a power loss never makes a resume skip a block whose reclaim was lost.
func TestResumedVacuumAfterPowerLossesRemovesEveryDeadTuple(t *testing.T) {
	if testing.Short() {
		t.Skip("power-loss test skipped in -short mode")
	}
	dir := filepath.Join(t.TempDir(), "data")
	opts := crashOpts()
	opts.LockTimeout = 0
	if err := Init(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	cols := []Column{{Name: "id", Type: Int8, NotNull: true}, {Name: "pay", Type: Bytea}}
	if err := db.CreateTable("t", cols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex("t_id", "t", "id"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	var tids []page.TID
	for id := range int64(4000) {
		tid, err := tx.Insert("t", []any{id, make([]byte, 80)})
		if err != nil {
			t.Fatal(err)
		}
		tids = append(tids, tid)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(11))
	tx, err = db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	dead := 0
	for _, tid := range tids {
		if rng.Intn(10) < 3 {
			if err := tx.Delete("t", tid); err != nil {
				t.Fatal(err)
			}
			dead++
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	vo := vacuum.DefaultOptions()
	vo.Throttle = &throttle.Settings{}
	vo.MaintenanceWorkMem = vacuum.MinMaintenanceWorkMem // a cycle, and a position, per block
	vo.Resume = true
	var last *vacuum.Report
	cuts := 0
	for iter := 0; ; iter++ { // until a vacuum finishes (break below)
		if iter == 60 {
			t.Fatalf("no vacuum finished in %d power cycles", iter)
		}
		ffs := faultfs.New(vfs.OS())
		o := opts
		o.FS = ffs
		ffs.CrashAfter(30+rng.Intn(200+20*iter), faultfs.PowerLossOptions{TearProb: 0.5, Seed: uint64(iter)})
		db, err := Open(dir, o)
		if err == nil {
			var rep *vacuum.Report
			rep, err = db.Vacuum(context.Background(), "t", vo)
			if err == nil {
				last = rep
				ffs.CrashAfter(0, faultfs.PowerLossOptions{})
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				break
			}
			abandonAfterPowerLoss(db)
			cuts++
		}
		if !errors.Is(err, faultfs.ErrPoweredOff) {
			t.Fatalf("power cycle %d: %v, want a power loss", iter, err)
		}
		db, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("power cycle %d: reopen: %v", iter, err)
		}
		checkClean(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if cuts == 0 {
		t.Fatal("no power loss landed in a vacuum: the test resumed nothing")
	}
	if got, want := last.PagesScanned+last.PagesSkipped, last.PagesTotal-last.ResumedFromBlock; got != want {
		t.Errorf("the finishing vacuum scanned %d and skipped %d pages, want %d from block %d", last.PagesScanned, last.PagesSkipped, want, last.ResumedFromBlock)
	}
	if last.ResumedFromBlock == 0 {
		t.Errorf("after %d power losses in vacuums the finishing one started at block 0", cuts)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	checkClean(t, db)
	st, err := db.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st[0].DeadTuples != 0 || st[0].LiveTuples != int64(len(tids)-dead) {
		t.Errorf("after %d power losses and the finishing resume: %d dead, %d live; want 0 and %d (what one vacuum leaves)",
			cuts, st[0].DeadTuples, st[0].LiveTuples, len(tids)-dead)
	}
	t.Logf("%d power losses in vacuums, the last resumed from block %d of %d", cuts, last.ResumedFromBlock, last.PagesTotal)
}
