package engine

import (
	"context"
	"flag"
	"fmt"
	"math/bits"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

var crashIterations = flag.Int("crash.iterations", 20, "SIGKILL iterations of TestCommittedWorkSurvivesSIGKILL")

const (
	crashChildEnv  = "ENGINE_TEST_CRASH_DIR"
	crashLedgerEnv = "ENGINE_TEST_CRASH_LEDGER"
	crashSeedEnv   = "ENGINE_TEST_CRASH_SEED"
)

// crashOpts are shared by the killed writer and the verifier: a small pool
// (dirty pages are evicted mid-transaction), small WAL segments and
// frequent automatic checkpoints, so kills land in every phase.
func crashOpts() Options {
	o := testOpts()
	o.CheckpointWALBytes = 512 << 10
	o.LockTimeout = 10 * time.Second
	return o
}

// crashChild is the writer process: it runs random transactions until it
// is killed, logging each one to the ledger (pending before Commit,
// confirmed after Commit returns, each fsynced).
func crashChild(dir string) {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	seed, _ := strconv.ParseInt(os.Getenv(crashSeedEnv), 10, 64)
	ledger, err := os.OpenFile(os.Getenv(crashLedgerEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fail(err)
	}
	db, err := Open(dir, crashOpts())
	if err != nil {
		fail(err)
	}
	w, err := newWriter(db, seed, "s"+strconv.FormatInt(seed, 10))
	if err != nil {
		fail(err)
	}
	// Transaction numbers must not repeat across writers: the ledger may
	// hold the lines of several (when a crash is left unverified).
	w.seq = seed * 1_000_000_000
	startHotWorkers(db, seed, fail)
	_, _ = os.Stdout.WriteString("ready\n")
	pending := func(seq int64, ops []workOp) error { return appendSync(ledger, pendingLines(seq, ops)) }
	commit := func(seq int64) error { return appendSync(ledger, []byte(fmt.Sprintf("C %d\n", seq))) }
	for i := 0; ; i++ {
		if err := w.step(pending, commit); err != nil {
			fail(err)
		}
		if w.rng.Intn(150) == 0 {
			if err := db.Checkpoint(); err != nil {
				fail(err)
			}
		}
		if w.rng.Intn(100) == 0 {
			if err := w.maintain(context.Background()); err != nil {
				fail(err)
			}
		}
	}
}

// TestCommittedWorkSurvivesSIGKILL kills a writer process again and again:
// the random work table transactions of workload_test.go and, alongside,
// concurrent `balance = balance + delta` transactions on a few hot rows
// (crashhot_test.go). After each kill every confirmed transaction is
// there, each in-flight one all or nothing, and sum(balance) is the sum
// of the committed deltas.
func TestCommittedWorkSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test skipped in -short mode")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	ledgerPath := filepath.Join(base, "ledger") // outside the data directory
	hotPath := filepath.Join(base, "hot-ledger")
	opts := crashOpts()
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
	createHot(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	interrupted, inflightCommitted, doubleCrashes, hotTotal := 0, 0, 0, 0
	earlyKill := false
	unverified := 0 // writers killed early since the last verification
	for iter := 0; iter < *crashIterations; iter++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, crashLedgerEnv+"="+ledgerPath,
			crashSeedEnv+"="+strconv.Itoa(iter+1), hotLedger+"="+hotPath)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if earlyKill {
			// The directory was left crashed: kill the writer while its
			// Open is likely still recovering.
			time.Sleep(time.Duration(rng.Intn(150)) * time.Millisecond)
		} else {
			ready := make([]byte, 6)
			if _, err := stdout.Read(ready); err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("iteration %d: writer did not start: %v", iter, err)
			}
			time.Sleep(time.Duration(20+rng.Intn(400)) * time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("iteration %d: writer exited by itself (%v) before the kill", iter, err)
		}
		if earlyKill {
			doubleCrashes++
		}
		// One time in four, leave the crashed directory to the next
		// writer instead of verifying it now, so that writer's recovery
		// is itself interrupted.
		earlyKill = rng.Intn(4) == 0 && iter+1 < *crashIterations
		if earlyKill {
			unverified++
			continue
		}

		ledger, err := os.ReadFile(ledgerPath)
		if err != nil {
			t.Fatal(err)
		}
		txs, err := parseLedger(ledger)
		if err != nil {
			t.Fatal(err)
		}
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("iteration %d: reopen after SIGKILL: %v", iter, err)
		}
		ri := db.RecoveryInfo()
		if ri.CleanShutdown {
			t.Fatalf("iteration %d: control file says clean shutdown after SIGKILL", iter)
		}
		if ri.Replayed > 0 || ri.TornTail != nil {
			interrupted++
		}
		committed, took := verifyLedgerOutcomes(t, db, txs)
		inflightCommitted += took
		verifyIndexes(t, db, committed)
		hotTxs, hotOpen := verifyHot(t, db, hotPath, unverified+1)
		unverified = 0
		hotTotal += hotTxs
		checkClean(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		// Record the decided outcome, so the next writer's pending lines
		// are the only unconfirmed ones.
		if unconfirmed(txs) > 0 {
			if err := resolveLedger(ledgerPath, committed); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("kill %d: %d rows, replayed %d records (torn tail %v), %d transactions in flight, %d of them committed; %d hot-row transactions, %d in flight",
			iter, len(committed), ri.Replayed, ri.TornTail != nil, unconfirmed(txs), took, hotTxs, hotOpen)
	}
	t.Logf("%d of %d kills interrupted work in flight (WAL replayed); %d kills hit a writer still recovering from the previous one; %d in-flight transactions had committed",
		interrupted, *crashIterations-doubleCrashes, doubleCrashes, inflightCommitted)
	if hotTotal == 0 {
		t.Fatal("no hot-row transaction committed: the balance invariant was never tested")
	}
	if interrupted*2 < *crashIterations-doubleCrashes {
		t.Fatalf("only %d of %d kills needed a replay: the test does not exercise recovery", interrupted, *crashIterations-doubleCrashes)
	}
}

// verifyLedgerOutcomes checks that db shows exactly the ledger's confirmed
// transactions plus some subset of the unconfirmed ones (each all or
// nothing), and returns that state and how many unconfirmed ones it took.
func verifyLedgerOutcomes(t *testing.T, db *DB, txs []ledgerTx) (map[int64]rowVal, int) {
	t.Helper()
	got, err := visibleState(db)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	k := unconfirmed(txs)
	if k > 8 {
		t.Fatalf("%d unconfirmed transactions in the ledger", k)
	}
	for mask := 0; mask < 1<<k; mask++ {
		if want := stateWith(txs, mask); stateDiff(got, want) == "" {
			return want, bits.OnesCount(uint(mask))
		}
	}
	t.Fatalf("visible rows match no outcome of the %d transactions in flight; against the confirmed ones alone: %s",
		k, stateDiff(got, stateWith(txs, 0)))
	return nil, 0
}

// resolveLedger rewrites the ledger as the committed state alone: one
// synthetic transaction that inserts every row, so that the in-flight
// transaction's P lines, now decided, are gone.
func resolveLedger(path string, state map[int64]rowVal) error {
	var ops []workOp
	for id, v := range state {
		ops = append(ops, workOp{'I', id, v.N, v.Val})
	}
	b := pendingLines(0, ops)
	b = append(b, "C 0\n"...)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
