package engine

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// The hot-row workload of the SIGKILL test: hotWorkers goroutines of the
// writer process each run transactions of `balance = balance + delta` on
// one of hotRows rows (UpdateRow: they wait for each other and re-check
// the newest version), logging "P seq delta" (fsynced) before Commit and
// "C seq" after it to their own ledger. At every restart the sum of the
// balances must be the sum of the confirmed deltas plus those of some
// subset of the ones in flight.
const (
	hotTable   = "hot"
	hotRows    = 3
	hotWorkers = 4
	hotLedger  = "ENGINE_TEST_CRASH_HOT_LEDGER"
)

var hotCols = []Column{{Name: "id", Type: Int4, NotNull: true}, {Name: "balance", Type: Int8, NotNull: true}}

// createHot makes the hot table with its rows at balance 0.
func createHot(t *testing.T, db *DB) {
	t.Helper()
	if err := db.CreateTable(hotTable, hotCols); err != nil {
		t.Fatal(err)
	}
	if err := db.AddPrimaryKey(hotTable, "id"); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	for id := 1; id <= hotRows; id++ {
		if _, err := tx.Insert(hotTable, []any{id, int64(0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// startHotWorkers runs the hot-row goroutines until the process dies;
// fail is called with the first error.
func startHotWorkers(db *DB, seed int64, fail func(error)) {
	ledger, err := os.OpenFile(os.Getenv(hotLedger), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fail(err)
	}
	var mu sync.Mutex
	log := func(line string) error {
		mu.Lock()
		defer mu.Unlock()
		return appendSync(ledger, []byte(line))
	}
	for g := range hotWorkers {
		go func() {
			rng := rand.New(rand.NewSource(seed*100 + int64(g)))
			for i := int64(0); ; i++ {
				seq := seed*1_000_000_000 + int64(g)*100_000_000 + i
				if err := hotStep(db, rng, seq, log); err != nil {
					fail(fmt.Errorf("hot worker %d: %w", g, err))
				}
			}
		}()
	}
}

func hotStep(db *DB, rng *rand.Rand, seq int64, log func(string) error) error {
	id := int64(rng.Intn(hotRows) + 1)
	delta := int64(rng.Intn(2001) - 1000)
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	found, err := tx.IndexLookup(hotTable+"_pkey", id)
	if err == nil && len(found) != 1 {
		err = fmt.Errorf("row %d found %d times", id, len(found))
	}
	if err == nil {
		var ok bool
		_, ok, err = tx.UpdateRow(hotTable, found[0].TID, func(cur []any) ([]any, bool, error) {
			b, _ := cur[1].(int64)
			return []any{cur[0], b + delta}, true, nil
		})
		if err == nil && !ok {
			err = fmt.Errorf("row %d vanished", id)
		}
	}
	if err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if err := log(fmt.Sprintf("P %d %d\n", seq, delta)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return log(fmt.Sprintf("C %d\n", seq))
}

// verifyHot checks the invariant and rewrites the ledger as the decided
// total, so the next writer's in-flight lines are the only open ones. It
// returns how many hot transactions the writer confirmed since the last
// verification and how many were in flight. writers is how many writers
// ran since then: one killed early (while its Open may still have been
// recovering) may have got as far as its hot workers, and each leaves up
// to hotWorkers transactions in flight.
func verifyHot(t *testing.T, db *DB, path string, writers int) (confirmedTxs, inFlight int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	confirmed, pending := int64(0), map[int64]int64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "P":
			seq, err1 := strconv.ParseInt(f[1], 10, 64)
			d, err2 := strconv.ParseInt(f[2], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("hot ledger line %q", sc.Text())
			}
			pending[seq] = d
		case len(f) == 2 && f[0] == "C":
			seq, err := strconv.ParseInt(f[1], 10, 64)
			d, ok := pending[seq]
			if err != nil || !ok {
				t.Fatalf("hot ledger line %q confirms nothing pending", sc.Text())
			}
			confirmed += d
			delete(pending, seq)
			if seq != 0 {
				confirmedTxs++
			}
		default:
			// A torn last line: the writer died inside its append, so it
			// had not committed yet.
		}
	}
	tx := mustTx(t, db)
	sum, rows := int64(0), 0
	err = tx.Scan(hotTable, func(_ page.TID, r []any) error {
		rows++
		sum += i64(r[1])
		return nil
	})
	endTx(tx)
	if err != nil || rows != hotRows {
		t.Fatalf("hot table: %d rows (%v), want %d", rows, err, hotRows)
	}
	var open []int64
	for _, d := range pending {
		open = append(open, d)
	}
	if len(open) > hotWorkers*writers {
		t.Fatalf("%d hot transactions in flight, at most %d workers in each of %d writers", len(open), hotWorkers, writers)
	}
	for mask := 0; mask < 1<<len(open); mask++ {
		want := confirmed
		for i, d := range open {
			if mask&(1<<i) != 0 {
				want += d
			}
		}
		if want == sum {
			if err := os.WriteFile(path+".tmp", []byte(fmt.Sprintf("P 0 %d\nC 0\n", sum)), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".tmp", path); err != nil {
				t.Fatal(err)
			}
			return confirmedTxs, len(open)
		}
	}
	t.Fatalf("sum(balance) = %d, but the committed deltas sum to %d and no subset of the %d in flight (%v) makes up the difference",
		sum, confirmed, len(open), open)
	return 0, 0
}
