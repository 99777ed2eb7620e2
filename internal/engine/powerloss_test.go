package engine

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

var powerLossIterations = flag.Int("powerloss.iterations", 50, "simulated power losses in TestCommittedWorkSurvivesPowerLoss")

// TestCommittedWorkSurvivesPowerLoss cuts the power (vfs/faultfs: every
// write not fsynced is lost, page writes torn half-new half-old, directory
// changes not synced undone) at a random file operation while a writer
// runs, then reopens the directory and checks every committed row, the
// absence of uncommitted ones, and Check.
func TestCommittedWorkSurvivesPowerLoss(t *testing.T) {
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
	if err := db.CreateTable(workTable, workCols); err != nil {
		t.Fatal(err)
	}
	if indexesAvailable {
		if err := db.CreateIndex(workTable+"_id", workTable, "id"); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	committed := map[int64]rowVal{}
	replayed, torn, crashedInOpen, crashedInRecovery, vacs := 0, 0, 0, 0, 0
	for iter := 0; iter < *powerLossIterations; iter++ {
		ffs := faultfs.New(vfs.OS())
		o := opts
		o.FS = ffs
		// Sometimes cut the power during Open itself (recovery, the
		// first checkpoint); usually during the writer's work.
		n := 1 + rng.Intn(1000)
		if rng.Intn(8) == 0 {
			n = 1 + rng.Intn(15)
		}
		ffs.CrashAfter(n, faultfs.PowerLossOptions{TearProb: 0.5, Seed: uint64(seed) + uint64(iter)})
		var inflight []workOp
		db, err := Open(dir, o)
		if err == nil {
			inflight, err = runUntilPowerLoss(db, rng.Int63(), committed, &vacs)
			abandonAfterPowerLoss(db)
		} else {
			crashedInOpen++
		}
		if !errors.Is(err, faultfs.ErrPoweredOff) {
			t.Fatalf("iteration %d: writer stopped with %v, want a power loss", iter, err)
		}
		// Sometimes the power fails again during recovery itself: redo
		// must be idempotent across repeated crashes.
		if rng.Intn(4) == 0 {
			crashed, err := crashRecovery(dir, opts, 1+rng.Intn(60), uint64(seed)+uint64(iter)*7)
			if err != nil {
				t.Fatalf("iteration %d: recovery failed other than by power loss: %v", iter, err)
			}
			if crashed {
				crashedInRecovery++
			}
		}

		db, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("iteration %d: reopen after power loss: %v", iter, err)
		}
		ri := db.RecoveryInfo()
		if ri.Replayed > 0 {
			replayed++
		}
		if ri.TornTail != nil {
			torn++
		}
		if verifyAgainstLedger(t, db, committed, inflight) {
			applyOps(committed, inflight)
		}
		verifyIndexes(t, db, committed)
		checkClean(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d power losses (%d during Open, plus %d more during the recovery that followed): %d needed WAL replay, %d ended at a torn WAL record; %d vacuums started; %d rows at the end",
		*powerLossIterations, crashedInOpen, crashedInRecovery, replayed, torn, vacs, len(committed))
	if replayed*2 < *powerLossIterations {
		t.Fatalf("only %d of %d power losses needed a replay: the test does not exercise recovery", replayed, *powerLossIterations)
	}
}

// runUntilPowerLoss runs writer transactions until one fails, applying
// each committed one to committed. It returns the ops of the transaction
// that failed (in flight when the power went) and the error.
func runUntilPowerLoss(db *DB, seed int64, committed map[int64]rowVal, vacs *int) ([]workOp, error) {
	w, err := newWriter(db, seed, fmt.Sprintf("p%d", seed%100000))
	if err != nil {
		return nil, err
	}
	var inflight []workOp
	pending := func(_ int64, ops []workOp) error { inflight = ops; return nil }
	commit := func(int64) error { applyOps(committed, inflight); inflight = nil; return nil }
	defer func() { *vacs += w.vacs }()
	for i := 0; ; i++ {
		if err := w.step(pending, commit); err != nil {
			return inflight, err
		}
		if w.rng.Intn(100) == 0 {
			if err := db.Checkpoint(); err != nil {
				return nil, err
			}
		}
		if w.rng.Intn(80) == 0 {
			if err := w.maintain(context.Background()); err != nil {
				return nil, err
			}
		}
		if w.rng.Intn(60) == 0 {
			// DDL, each switch with its catalog record in the WAL.
			if err := ddlStep(db, fmt.Sprintf("ddl_%d_%d", seed%100000, i), w.rng.Intn(2) == 0); err != nil {
				return nil, err
			}
		}
	}
}

// ddlStep creates a table with an index and a row, and drops it again when drop is set
// (the tables left behind pass the reopened directory's Check).
func ddlStep(db *DB, name string, drop bool) error {
	if err := db.CreateTable(name, workCols); err != nil {
		return err
	}
	if err := db.CreateIndex(name+"_id", name, "id"); err != nil {
		return err
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	if _, err := tx.Insert(name, []any{int64(1), []byte("ddl"), int64(1)}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if drop {
		return db.DropTable(context.Background(), name)
	}
	return nil
}

// abandonAfterPowerLoss drops a DB whose file system is gone.
func abandonAfterPowerLoss(db *DB) {
	if !db.closed.CompareAndSwap(false, true) {
		return
	}
	close(db.stop)
	db.bg.Wait()
	db.mu.Lock()
	defer db.mu.Unlock()
	_ = db.release()
}

// crashRecovery opens dir (which needs recovery) and cuts the power at its
// n-th file operation, or right after Open if it needed fewer. It reports
// whether the power failed inside Open.
func crashRecovery(dir string, opts Options, n int, seed uint64) (bool, error) {
	ffs := faultfs.New(vfs.OS())
	ffs.CrashAfter(n, faultfs.PowerLossOptions{TearProb: 0.5, Seed: seed})
	opts.FS = ffs
	db, err := Open(dir, opts)
	if errors.Is(err, faultfs.ErrPoweredOff) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	_ = ffs.PowerLoss(faultfs.PowerLossOptions{TearProb: 0.5, Seed: seed}) // the Open succeeded: cut the power now
	abandonAfterPowerLoss(db)
	return false, nil
}
