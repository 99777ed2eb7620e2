package bench

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// benchCols are the columns of every benchmark table: a primary key, a
// second key that is a permutation of it (so its index is in random heap
// order, as in real secondary indexes) and a payload.
var benchCols = []engine.Column{
	{Name: "id", Type: engine.Int8},
	{Name: "k", Type: engine.Int8},
	{Name: "pay", Type: engine.Bytea},
}

// TableSpec describes one table of a data set.
type TableSpec struct {
	Name    string
	Rows    int
	Payload int     // payload bytes per row
	DeadPct float64 // percentage of rows deleted (committed) after loading
	Seed    int64
	// Loaders is how many goroutines insert (and delete) rows at once,
	// each a contiguous range of ids; 0 or 1 = one, in id order, so that
	// heap order follows id order. More loaders interleave ranges on the
	// pages (only for tables where physical order does not matter).
	Loaders int
}

// IDIndex and KIndex are the names of a table's two indexes.
func IDIndex(table string) string { return table + "_id" }

// KIndex is the index on the permuted key column.
func KIndex(table string) string { return table + "_k" }

// kOf is the permuted key of id in a table of n rows: a bijection of
// [0, n) when the multiplier is coprime with n (a prime larger than any n
// used here is).
func kOf(id int64, n int) int64 { return (id * 1_000_003) % int64(n) }

// payloadOf returns a deterministic payload of n bytes for id.
func payloadOf(id int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(id>>uint(8*(i%8))) ^ byte(i*31)
	}
	return b
}

// loadBatch is how many rows one loading transaction inserts or deletes.
const loadBatch = 5000

// BuildDataSet initialises a data directory at dir holding the tables
// of specs: rows inserted, both indexes built, DeadPct % of the rows
// (chosen at random) deleted and committed, then a clean shutdown so the
// directory can be copied.
func BuildDataSet(dir string, opts engine.Options, specs []TableSpec) error {
	if err := engine.Init(dir, opts); err != nil {
		return fmt.Errorf("init data set %s: %w", dir, err)
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		return fmt.Errorf("open data set %s: %w", dir, err)
	}
	// Tables load concurrently: on a shared machine more runnable threads
	// get a larger share of the CPU, and the tables do not interact.
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxConcurrentLoads)
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := loadTable(db, s); err != nil {
				errs[i] = fmt.Errorf("load table %s: %w", s.Name, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		db.Close()
		return err
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("close data set %s: %w", dir, err)
	}
	return nil
}

func loadTable(db *engine.DB, s TableSpec) error {
	if err := db.CreateTable(s.Name, benchCols); err != nil {
		return err
	}
	tids := make([]page.TID, s.Rows)
	ids := make([]int, s.Rows)
	for i := range ids {
		ids[i] = i
	}
	err := inParallel(ids, s.Loaders, func(batch []int) error {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		for _, id := range batch {
			tid, err := tx.Insert(s.Name, []any{int64(id), kOf(int64(id), s.Rows), payloadOf(int64(id), s.Payload)})
			if err != nil {
				return errors.Join(err, tx.Rollback())
			}
			tids[id] = tid
		}
		return tx.Commit()
	})
	if err != nil {
		return err
	}
	// Indexes are built after loading (bottom-up, fast) but before the
	// deletes, so that they hold entries of the rows that become dead,
	// which is what index vacuum has to remove.
	if err := db.CreateIndex(IDIndex(s.Name), s.Name, "id"); err != nil {
		return err
	}
	if err := db.CreateIndex(KIndex(s.Name), s.Name, "k"); err != nil {
		return err
	}
	rng := rand.New(rand.NewSource(s.Seed))
	perm := rng.Perm(s.Rows)
	n := int(float64(s.Rows)*s.DeadPct/100 + 0.5)
	// Deleting in id order (heap order) instead of at random visits each
	// page once while it is cached; the set deleted is the same.
	doomed := perm[:n]
	slices.Sort(doomed)
	return inParallel(doomed, s.Loaders, func(batch []int) error {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		for _, id := range batch {
			if err := tx.Delete(s.Name, tids[id]); err != nil {
				return errors.Join(err, tx.Rollback())
			}
		}
		return tx.Commit()
	})
}

// maxConcurrentLoads bounds how many tables load at once.
const maxConcurrentLoads = 4

// inParallel splits items into workers contiguous ranges and calls fn for
// each batch of at most loadBatch items of a range, one goroutine per
// range. It returns the first error.
func inParallel(items []int, workers int, fn func(batch []int) error) error {
	workers = max(1, workers)
	per := (len(items) + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := min(w*per, len(items)), min((w+1)*per, len(items))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := lo; b < hi; b += loadBatch {
				if err := fn(items[b:min(b+loadBatch, hi)]); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// dirBytes is the total size of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error { // best effort: unreadable entries count 0
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
