package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

func TestConcurrentWritersCheckpointsAndReadersStayConsistent(t *testing.T) {
	opts := testOpts()
	opts.CheckpointWALBytes = 256 << 10
	db, dir := newDB(t, opts)
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex("t_id", "t", "id"); err != nil {
		t.Fatal(err)
	}
	const writers, perWriter = 4, 300
	var wg sync.WaitGroup
	errs := make(chan error, writers+2)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				tx, err := db.Begin()
				if err != nil {
					errs <- err
					return
				}
				id := int64(w*perWriter + i)
				tid, err := tx.Insert("t", []any{id, fmt.Sprintf("w%d", w), int64(0)})
				if err == nil && i%3 == 0 {
					_, err = tx.Update("t", tid, []any{id, fmt.Sprintf("w%d", w), int64(1)})
				}
				if err != nil {
					errs <- err
					endTx(tx)
					return
				}
				if i%10 == 9 {
					err = tx.Rollback()
				} else {
					err = tx.Commit()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { // checkpoints
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := db.Checkpoint(); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() { // readers: an index lookup never returns two versions
		defer bg.Done()
		for k := int64(0); ; k = (k + 7) % (writers * perWriter) {
			select {
			case <-stop:
				return
			default:
			}
			tx, err := db.Begin()
			if err != nil {
				errs <- err
				return
			}
			f, err := tx.IndexLookup("t_id", k)
			endTx(tx)
			if err != nil || len(f) > 1 {
				errs <- errors.Join(err, fmt.Errorf("lookup %d found %d rows", k, len(f)))
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := writers * perWriter * 9 / 10
	if rows := scanAll(t, db, "t"); len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	checkClean(t, db)
	abandon(t, db)
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	if rows := scanAll(t, db, "t"); len(rows) != want {
		t.Fatalf("%d rows after crash and recovery, want %d", len(rows), want)
	}
	if _, err := db.Stats(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkClean(t, db)
}

// A scan callback that writes through the same transaction must not
// deadlock with DDL waiting for the DB's exclusive lock.
func TestScanCallbackMayWriteWhileDDLWaits(t *testing.T) {
	db, _ := newDB(t, testOpts())
	fillTable(t, db, 400)
	if err := db.CreateIndex("t_id", "t", "id"); err != nil {
		t.Fatal(err)
	}
	tx := mustTx(t, db)
	ddlDone := make(chan error, 1)
	n := 0
	err := tx.Scan("t", func(tid page.TID, r []any) error {
		if string(bs(r[1])) == "updated" {
			return nil // a version this scan made, met again further on
		}
		n++
		if n == 10 {
			go func() { ddlDone <- db.CreateTable(fmt.Sprintf("other%d", n), accountCols) }()
			time.Sleep(50 * time.Millisecond) // let the DDL queue up for the lock
		}
		_, err := tx.Update("t", tid, []any{r[0], "updated", i64(r[2]) + 1})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-ddlDone; err != nil {
		t.Fatal(err)
	}
	var ranged int
	if err := tx.IndexRange("t_id", []any{0}, []any{99}, func(f Found) error {
		ranged++
		return tx.Delete("t", f.TID)
	}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows := scanAll(t, db, "t")
	if n != 400 || ranged != 100 || len(rows) != 300 || string(bs(rows[200][1])) != "updated" {
		t.Fatalf("scanned %d, ranged %d, %d rows left (row 200 = %v)", n, ranged, len(rows), rows[200])
	}
	checkClean(t, db)
}
