package vacuum

import (
	"sync"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// flushAheadBytes is how much unflushed WAL the background flusher lets
// accumulate before it flushes.
const flushAheadBytes = 64 << 10

// startFlushAhead runs a WAL flusher beside a lazy vacuum (the role of
// PostgreSQL's walwriter, driven by the vacuum and on the otherwise idle
// core): whenever at least flushAheadBytes were inserted past the durable
// end of the log, it flushes them. A dirty page leaving the vacuum ring
// must have its WAL flushed first; with the flusher running ahead it
// finds that done (or shares the flush in progress) instead of waiting
// for an fsync of its own on the vacuum's critical path. Flushing WAL
// early is always safe. Its writes and fsyncs are charged to u. A failed
// flush is sticky in the log, so the vacuum's own next insert reports it;
// the flusher then stops. stop waits for the flusher to exit.
func startFlushAhead(log *wal.Log, u *usage.Counters) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if ins := log.InsertLSN(); ins-log.FlushedLSN() >= flushAheadBytes {
				if err := log.Flush(ins, u); err != nil {
					return
				}
				continue
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
