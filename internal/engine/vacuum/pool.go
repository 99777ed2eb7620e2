package vacuum

import (
	"context"
	"sync"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
)

// runPool runs n goroutines, each with a worker of its own (its own ring
// and counters, children of the table's), that call do for every job feed
// sends. The first job error cancels the other workers and feed's sends.
// runPool returns once every worker stopped: the first job error, else
// feed's error, else the vacuum's context error. The parallel heap pass and
// the parallel index pass share it.
func runPool[J any](lv *lazy, n int, do func(w *worker, k int, job J) error, feed func(send func(J) error) error) error {
	ctx, cancel := context.WithCancel(lv.w.ctx)
	defer cancel()
	jobs := make(chan J, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k := range n {
		w := lv.run.newWorker(ctx, lv.ts, lv.t.Pool, buffer.Vacuum, lv.run.opts.RingSize)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.releaseVM()
			lv.run.lowerThread()
			for j := range jobs {
				if errs[k] != nil {
					continue // drain: feed must never block on a stopped worker
				}
				errs[k] = func() (err error) {
					defer recoverInto(&err) // a panic is the job's error, not the process's end
					return do(w, k, j)
				}()
				if errs[k] != nil {
					cancel()
				}
			}
		}()
	}
	send := func(j J) error {
		select {
		case jobs <- j:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := feed(send)
	close(jobs)
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	if err != nil {
		return err
	}
	return lv.w.ctx.Err()
}
