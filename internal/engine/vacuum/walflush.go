package vacuum

import (
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/usage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// walFlushInterval is how often a lazy vacuum's background WAL flush looks
// at how much of the log is unflushed.
const walFlushInterval = time.Millisecond

// lazyWALFlushAfter is how much unflushed WAL makes a lazy vacuum's
// background flush flush the log: PostgreSQL's wal_writer_flush_after
// default. It was walFlushAfter (256 KiB, VACUUM FULL's piece under a
// WAL-rate limit) until session h80: that fsynced the log up to four
// times as often as the ring evictions did without it (31-80 fsyncs a
// 3,637-page vacuum against 18-20), and h77 measured about 12 % less CPU a
// page without it. A 2 MiB ring laps after about 2 MiB of the vacuum's
// WAL, so at 1 MiB its evictions still mostly find their WAL flushed
// (docs/benchmarks/vacuum-speed.md has the fsyncs and ring flushes).
const lazyWALFlushAfter = 1 << 20

// walFlusher flushes the log in the background while a lazy vacuum runs,
// whenever lazyWALFlushAfter or more of it is unflushed, as PostgreSQL's
// WAL writer does (wal_writer_flush_after). A page the vacuum dirtied may be
// written only once the WAL up to its LSN is durable, so without it every
// lap of a ring (the heap passes', the read-ahead's, an index worker's)
// began with an fdatasync of the log that the evicting goroutine waited
// out, the pass itself whenever it had caught up with its read-ahead.
// Flushing behind the vacuum makes those waits overlap its work; a ring's
// flush then usually finds its LSN durable already. Flushing early is
// always safe (only a page written before its WAL is not), and a failed
// flush is sticky in the log, so the vacuum's own next insert or flush
// reports it. Measured (docs/benchmarks/vacuum-speed.md): in a trace of
// four hinted, buffered vacuums of 200,000 rows, the pass goroutine spent
// 393 ms in fdatasync and 270 ms waiting for another goroutine's flush
// before, 45 ms and 146 ms with it.
type walFlusher struct {
	stop chan struct{}
	done chan struct{}
}

// startWALFlusher starts the background flush of log, charging its
// fsyncs to u, in a goroutine that calls first first (the batch's
// lowerThread); stop ends it.
func startWALFlusher(log *wal.Log, u *usage.Counters, first func()) *walFlusher {
	f := &walFlusher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		first()
		f.run(log, u)
	}()
	return f
}

func (f *walFlusher) run(log *wal.Log, u *usage.Counters) {
	defer close(f.done)
	t := time.NewTicker(walFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		if end := log.InsertLSN(); end-log.FlushedLSN() >= lazyWALFlushAfter {
			if err := log.Flush(end, u); err != nil {
				return // sticky in the log: the vacuum's next insert or flush reports it
			}
		}
	}
}

// stopAndWait ends the background flush and waits for its goroutine (at
// most one flush in progress).
func (f *walFlusher) stopAndWait() {
	close(f.stop)
	<-f.done
}
