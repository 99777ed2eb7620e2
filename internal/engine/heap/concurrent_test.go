package heap

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// Writers each own a set of rows and update them repeatedly while readers
// scan and a vacuum loop prunes and vacuums every page. Every scan must see
// exactly one version of every committed row, and at the end each row holds
// its last committed value.
func TestConcurrentWritersReadersAndVacuumKeepOneVersionPerRow(t *testing.T) {
	e := newTestEnv(t, 48)
	const writers, rowsPerWriter, rounds = 3, 20, 15
	owned := make([][]page.TID, writers)
	for w := range owned {
		rows := make([]string, rowsPerWriter)
		for i := range rows {
			rows[i] = fmt.Sprintf("w%d-r%d-v0", w, i)
		}
		owned[w] = e.insertCommitted(rows...)
	}
	total := writers * rowsPerWriter

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 1; round <= rounds; round++ {
				tx := e.txns.Begin()
				for i, tid := range owned[w] {
					nt, err := e.rel.Update(tx, tid, []byte(fmt.Sprintf("w%d-r%d-v%d", w, i, round)), nil)
					if err != nil {
						errs <- fmt.Errorf("writer %d round %d: %w", w, round, err)
						return
					}
					owned[w][i] = nt
				}
				if err := e.txns.Commit(tx, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var bg sync.WaitGroup
	bg.Add(2)
	go func() { // reader
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tx := e.txns.Begin()
			n := 0
			err := e.rel.Scan(context.Background(), tx.Snapshot(), nil, func(page.TID, []byte) error { n++; return nil })
			_ = e.txns.Commit(tx, nil)
			if err != nil || n != total {
				errs <- fmt.Errorf("scan saw %d rows (want %d): %v", n, total, err)
				return
			}
		}
	}()
	go func() { // vacuum
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := e.rel.NBlocks()
			if err != nil {
				errs <- err
				return
			}
			for blk := uint32(0); blk < n; blk++ {
				h := e.txns.OldestXmin()
				pr, err := e.rel.PruneBlock(blk, h, nil)
				if err == nil {
					_, err = e.rel.VacuumBlock(blk, pr.DeadOffsets, h, nil)
				}
				if err != nil {
					errs <- fmt.Errorf("vacuum block %d: %w", blk, err)
					return
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := e.visibleRows(e.rel, e.begin().Snapshot())
	for w := range owned {
		for i, tid := range owned[w] {
			if want := fmt.Sprintf("w%d-r%d-v%d", w, i, rounds); got[tid] != want {
				t.Errorf("row at %v = %q, want %q", tid, got[tid], want)
			}
		}
	}
	if len(got) != total {
		t.Errorf("%d visible rows, want %d", len(got), total)
	}
}

func TestConcurrentUpdatersOfOneRowOneWins(t *testing.T) {
	e := newTestEnv(t, 32)
	tid := e.insertCommitted("start")[0]
	const n = 6
	var wg sync.WaitGroup
	results := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tx := e.txns.Begin()
			_, err := e.rel.Update(tx, tid, []byte(fmt.Sprintf("by-%d", i)), nil)
			results[i] = err
			if err != nil {
				_ = e.txns.Abort(tx, nil)
				return
			}
			results[i] = e.txns.Commit(tx, nil)
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range results {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, ErrConcurrentUpdate) && !errors.Is(err, ErrNotFound):
			t.Errorf("unexpected error %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d updaters of the same version won, want exactly 1", wins)
	}
	if got := e.visibleRows(e.rel, e.begin().Snapshot()); len(got) != 1 {
		t.Errorf("after racing updates: %v, want exactly one version", got)
	}
}
