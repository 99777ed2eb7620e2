package vacuum_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

func TestVacuumFullShrinksTableToFreshLoadSize(t *testing.T) {
	const rows = 4000
	db, _ := newDB(t, testOpts())
	tb := createTable(t, db, "bloated", 2, rows, 100)
	deleted := deletePercent(t, db, tb, 60, rand.New(rand.NewSource(7)))
	before := heapPages(t, db, "bloated")

	// The same surviving rows loaded fresh, for comparison.
	fresh := createTable(t, db, "fresh", 2, 0, 100)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for id := range tb.live {
		if _, err := tx.Insert("fresh", rowOf(id, fresh.payload)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	want := heapPages(t, db, "fresh")

	opts := unthrottled()
	opts.MaintenanceWorkMem = vacuum.MinMaintenanceWorkMem // forces sorted runs on disk
	rep, err := db.VacuumFull(context.Background(), "bloated", opts)
	if err != nil {
		t.Fatal(err)
	}
	got := heapPages(t, db, "bloated")
	t.Logf("heap pages: %d before, %d after FULL, %d for a fresh load", before, got, want)
	if float64(got) > float64(want)*1.10 {
		t.Errorf("after FULL the heap has %d pages, more than 10%% above a fresh load's %d", got, want)
	}
	if rep.TuplesRemoved != int64(deleted) || rep.TuplesRemaining != int64(len(tb.live)) {
		t.Errorf("report: %d removed, %d remaining; want %d and %d", rep.TuplesRemoved, rep.TuplesRemaining, deleted, len(tb.live))
	}
	if rep.PagesRemaining != got || rep.PagesRemoved != before-got {
		t.Errorf("report: %d pages remaining, %d removed; want %d and %d", rep.PagesRemaining, rep.PagesRemoved, got, before-got)
	}
	// Rows moved: refresh the TIDs through a scan before verifying.
	refreshTIDs(t, db, tb)
	checkClean(t, db)
	verifyRows(t, db, tb)
}

// refreshTIDs re-reads every live row's TID (VACUUM FULL moves rows).
func refreshTIDs(t testing.TB, db *engine.DB, tb *table) {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // read only
	for id := range tb.live {
		delete(tb.live, id)
	}
	if err := tx.Scan(tb.name, func(tid page.TID, r []any) error {
		id, ok := r[0].(int64)
		if !ok {
			return fmt.Errorf("column 0 is %T, want int64", r[0])
		}
		tb.live[id] = tid
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// lowSpaceFS reports little free space (the one thing it fakes).
type lowSpaceFS struct {
	vfs.FS
	free uint64
}

func (f lowSpaceFS) FreeBytes(string) (uint64, error) { return f.free, nil }

func TestVacuumFullRefusesWhenTheVolumeIsTooFull(t *testing.T) {
	opts := testOpts()
	opts.FS = lowSpaceFS{FS: vfs.NewOS(t.Logf), free: 64 << 10}
	db, _ := newDB(t, opts)
	tb := createTable(t, db, "t", 1, 2000, 100)
	deletePercent(t, db, tb, 50, rand.New(rand.NewSource(1)))
	relBefore := relfilenode(t, db, "t")
	_, err := db.VacuumFull(context.Background(), "t", unthrottled())
	var ns *vacuum.NoSpaceError
	if !errors.Is(err, vacuum.ErrNoSpace) || !errors.As(err, &ns) {
		t.Fatalf("VacuumFull on a full volume: %v, want ErrNoSpace", err)
	}
	if ns.Need <= ns.Free {
		t.Errorf("error says need %d <= free %d", ns.Need, ns.Free)
	}
	if relfilenode(t, db, "t") != relBefore {
		t.Errorf("the table was switched although FULL refused")
	}
	checkClean(t, db)
	verifyRows(t, db, tb)
}

func TestVacuumFullENOSPCMidwayLeavesOldTableAndNoNewFiles(t *testing.T) {
	ffs := faultfs.New(vfs.NewOS(t.Logf))
	opts := testOpts()
	opts.FS = ffs
	db, dir := newDB(t, opts)
	tb := createTable(t, db, "t", 2, 3000, 100)
	deletePercent(t, db, tb, 30, rand.New(rand.NewSource(2)))
	relBefore := relfilenode(t, db, "t")
	filesBefore := relationFiles(t, dir)

	// Let the new heap get a few pages, then run out of space.
	ffs.Inject(faultfs.Rule{Ops: faultfs.OpExtend, Path: "base", After: 5, Fault: faultfs.ENOSPC})
	_, err := db.VacuumFull(context.Background(), "t", unthrottled())
	ffs.ClearRules()
	if err == nil {
		t.Fatal("VacuumFull succeeded although the volume ran out of space")
	}
	t.Logf("VacuumFull: %v", err)
	if relfilenode(t, db, "t") != relBefore {
		t.Errorf("the table was switched although FULL failed")
	}
	if after := relationFiles(t, dir); len(after) != len(filesBefore) {
		t.Errorf("relation files: %d before, %d after the failed FULL: %v", len(filesBefore), len(after), after)
	}
	checkClean(t, db)
	verifyRows(t, db, tb)
}

func relfilenode(t testing.TB, db *engine.DB, name string) uint32 {
	t.Helper()
	ti, err := db.Table(name)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(ti.Relfilenode)
}

// relationFiles lists the files under the data directory's base/.
func relationFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(filepath.Join(dir, "base"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCancelledVacuumFullLeavesTheOldTableAndNoNewFiles(t *testing.T) {
	db, dir := newDB(t, testOpts())
	tb := loadDeleted(t, db, "t", 4000, 40)
	relBefore := relfilenode(t, db, "t")
	filesBefore := relationFiles(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 450*time.Millisecond)
	defer cancel()
	rep, err := db.VacuumFull(ctx, "t", slowOpts(5000))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled FULL returned %v, want the context's error", err)
	}
	t.Logf("cancelled after rewriting %d of %d pages", rep.PagesScanned, rep.PagesTotal)
	if rep.PagesTotal == 0 {
		t.Errorf("cancelled before the table was even counted")
	}
	if relfilenode(t, db, "t") != relBefore {
		t.Errorf("the table was switched although FULL was cancelled")
	}
	if after := relationFiles(t, dir); len(after) != len(filesBefore) {
		t.Errorf("relation files: %d before, %d after the cancelled FULL", len(filesBefore), len(after))
	}
	checkClean(t, db)
	verifyRows(t, db, tb)
	// Rows stay writable: the table lock was released.
	insertRows(t, db, tb, 1_000_000, 1_000_010)
	verifyRows(t, db, tb)
}

func TestVacuumFullSpaceCheckCountsSortRunsWhenTheyGoToTempDir(t *testing.T) {
	opts := testOpts()
	opts.FS = lowSpaceFS{FS: vfs.NewOS(t.Logf), free: 64 << 10}
	db, _ := newDB(t, opts)
	tb := createTable(t, db, "t", 2, 2000, 100)
	deletePercent(t, db, tb, 50, rand.New(rand.NewSource(1)))
	need := func(tempDir string) uint64 {
		t.Helper()
		o := unthrottled()
		o.TempDir = tempDir
		_, err := db.VacuumFull(context.Background(), "t", o)
		var ns *vacuum.NoSpaceError
		if !errors.As(err, &ns) {
			t.Fatalf("VacuumFull on a full volume (TempDir %q): %v, want a NoSpaceError", tempDir, err)
		}
		return ns.Need
	}
	without, with := need(""), need(t.TempDir())
	// 1,000 kept rows, two indexes, 17 bytes per spilled entry (an
	// 8-byte record header and a 9-byte integer key).
	if with-without != 1000*2*17 {
		t.Errorf("the space check grew by %d bytes with the sort runs on the volume, want %d", with-without, 1000*2*17)
	}
}
