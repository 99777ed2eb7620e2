package vacuum_test

import (
	"context"
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// TestOneVacuumOfATableAtATime: while a VACUUM FULL of t works, a second
// vacuum of t fails at once with NoWait, gives up when its context ends,
// and otherwise waits and then runs on the table the FULL left; a vacuum
// of another table is not held up.
func TestOneVacuumOfATableAtATime(t *testing.T) {
	db, _ := newDB(t, testOpts())
	tb := createTable(t, db, "t", 2, 4000, 100)
	deletePercent(t, db, tb, 30, rand.New(rand.NewSource(5)))
	other := createTable(t, db, "u", 1, 500, 100)
	deletePercent(t, db, other, 30, rand.New(rand.NewSource(6)))

	// A FULL slow enough to be caught at work (20,000 units/s).
	fullOpts := slowOpts(20000)
	fullOpts.Full = true
	run, err := vacuum.NewBatch(fullOpts)
	if err != nil {
		t.Fatal(err)
	}
	fullDone := make(chan error, 1)
	go func() {
		_, err := db.VacuumBatch(context.Background(), run, []string{"t"})
		fullDone <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); run.Progress().HeapBlocksScanned < 2; {
		if time.Now().After(deadline) {
			t.Fatal("VACUUM FULL did not get under way")
		}
		time.Sleep(time.Millisecond)
	}

	noWait := unthrottled()
	noWait.NoWait = true
	if _, err := db.Vacuum(context.Background(), "t", noWait); !errors.Is(err, vacuum.ErrVacuumInProgress) {
		t.Errorf("NoWait vacuum during FULL returned %v, want ErrVacuumInProgress", err)
	}
	if _, err := db.VacuumFull(context.Background(), "t", noWait); !errors.Is(err, vacuum.ErrVacuumInProgress) {
		t.Errorf("NoWait FULL during FULL returned %v, want ErrVacuumInProgress", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	start := time.Now()
	_, err = db.Vacuum(ctx, "t", unthrottled())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiting vacuum with a 30 ms deadline returned %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("waiting vacuum took %v to give up after its 30 ms deadline", took)
	}
	// Another table is not affected.
	if _, err := db.Vacuum(context.Background(), "u", noWait); err != nil {
		t.Errorf("vacuum of another table during the FULL of t: %v", err)
	}

	// A waiting vacuum runs only after the FULL, on the rewritten table.
	type result struct {
		rep *vacuum.Report
		err error
	}
	lazyDone := make(chan result, 1)
	go func() {
		rep, err := db.Vacuum(context.Background(), "t", unthrottled())
		lazyDone <- result{rep, err}
	}()
	if err := <-fullDone; err != nil {
		t.Fatalf("VACUUM FULL: %v", err)
	}
	lr := <-lazyDone
	if lr.err != nil {
		t.Fatalf("vacuum that waited for the FULL: %v", lr.err)
	}
	// The order is proven by what the waiting vacuum found, not by clocks (the FULL releases
	// the lock before its goroutine can note the time): run before or beside the FULL, it
	// would have removed the dead tuples the FULL removes.
	if lr.rep.TuplesRemoved != 0 || lr.rep.TuplesRemaining != int64(len(tb.live)) {
		t.Errorf("vacuum after FULL removed %d and left %d tuples, want 0 and %d (the rewritten table)",
			lr.rep.TuplesRemoved, lr.rep.TuplesRemaining, len(tb.live))
	}
	// The lock is free again.
	if _, err := db.Vacuum(context.Background(), "t", noWait); err != nil {
		t.Errorf("NoWait vacuum after both finished: %v", err)
	}
	checkClean(t, db)
	refreshTIDs(t, db, tb)
	verifyRows(t, db, tb)
}

// TestAPanicInAVacuumWorkerIsReturnedAsAnError panics inside a table's
// worker goroutine (here in the callback that resolves the table): the run
// returns a *PanicError instead of the process dying.
func TestAPanicInAVacuumWorkerIsReturnedAsAnError(t *testing.T) {
	run, err := vacuum.NewBatch(vacuum.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	_, err = run.VacuumTables(context.Background(), []string{"t"}, func(context.Context, string) (*vacuum.Target, error) {
		panic("boom")
	})
	var pe *vacuum.PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" {
		t.Fatalf("VacuumTables with a panicking worker = %v, want a *vacuum.PanicError", err)
	}
}
