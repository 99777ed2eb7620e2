package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// DROP TABLE waits for the open transactions that used the table; a
// transaction that had not used it waits behind the drop and then finds
// the table gone.
func TestDropWaitsForOpenTransactionsThatUsedTheTable(t *testing.T) {
	for _, truncate := range []bool{false, true} {
		name := "drop"
		if truncate {
			name = "truncate"
		}
		t.Run(name, func(t *testing.T) {
			db, _ := newDB(t, testOpts())
			if err := db.CreateTable("t", accountCols); err != nil {
				t.Fatal(err)
			}
			reader := mustTx(t, db)
			if err := reader.Scan("t", func(_ page.TID, _ []any) error { return nil }); err != nil {
				t.Fatal(err)
			}
			dropped := make(chan error, 1)
			go func() {
				if truncate {
					dropped <- db.TruncateTable(context.Background(), "t")
				} else {
					dropped <- db.DropTable(context.Background(), "t")
				}
			}()
			for deadline := time.Now().Add(20 * time.Second); db.uses.waiting("t") == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the %s never started waiting", name)
				}
			}
			late := mustTx(t, db) // has not used t: waits behind the DDL
			inserted := make(chan error, 1)
			go func() {
				_, err := late.Insert("t", []any{1, "late", 1})
				inserted <- err
			}()
			select {
			case err := <-dropped:
				t.Fatalf("%s returned %v while a transaction that read the table was open", name, err)
			case err := <-inserted:
				t.Fatalf("a new transaction's insert returned %v while the %s waited", err, name)
			case <-time.After(100 * time.Millisecond):
			}
			// The open transaction keeps working meanwhile.
			if _, err := reader.Insert("t", []any{2, "reader", 2}); err != nil {
				t.Fatalf("the waited-for transaction's insert: %v", err)
			}
			if err := reader.Commit(); err != nil {
				t.Fatal(err)
			}
			if err := <-dropped; err != nil {
				t.Fatal(err)
			}
			err := <-inserted
			switch {
			case !truncate && !errors.Is(err, ErrNoSuchTable):
				t.Fatalf("insert after the drop: %v, want ErrNoSuchTable", err)
			case truncate && err != nil:
				t.Fatalf("insert after the truncate: %v", err)
			}
			if err := late.Commit(); err != nil {
				t.Fatal(err)
			}
			if truncate {
				if rows := scanAll(t, db, "t"); len(rows) != 1 || rows[1] == nil {
					t.Fatalf("after truncate and the late insert: %v, want row 1 only", rows)
				}
			}
			checkClean(t, db)
		})
	}
}

func TestDropGivesUpWithErrTableInUseWhenItsContextEnds(t *testing.T) {
	db, _ := newDB(t, testOpts())
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	holder := mustTx(t, db)
	if _, err := holder.Insert("t", []any{1, "held", 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := db.DropTable(ctx, "t")
	if !errors.Is(err, ErrTableInUse) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("DropTable under an open transaction: %v, want ErrTableInUse and the deadline", err)
	}
	// Nothing was dropped, and nobody waits behind a drop that gave up.
	other := mustTx(t, db)
	if _, err := other.Insert("t", []any{2, "other", 2}); err != nil {
		t.Fatal(err)
	}
	for _, tx := range []*Tx{holder, other} {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if n := db.uses.count("t"); n != 0 {
		t.Fatalf("%d transactions still recorded as users after they ended", n)
	}
	if err := db.DropTable(context.Background(), "t"); err != nil {
		t.Fatal(err)
	}
}
