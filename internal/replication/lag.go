package replication

import (
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// lagSamples bounds the positions a lagTracker remembers.
const lagSamples = 1024

// lagTracker measures write, flush and replay lag as PostgreSQL's walsender does: it
// remembers when each position was sent, and when the standby reports having written,
// flushed or replayed past one, the lag is the time since it was sent. Once the standby
// has caught up and WAL stops, the lag of the last position stays (as PostgreSQL's does
// until new WAL comes).
type lagTracker struct {
	buf        [lagSamples]lagSample
	head, size int
	read       [3]int // per kind: index into buf of the next sample not yet reached
	last       [3]time.Duration
	known      [3]bool
}

type lagSample struct {
	lsn  wal.LSN
	sent time.Time
}

// sent records that WAL up to lsn was sent at t.
func (l *lagTracker) sent(lsn wal.LSN, t time.Time) {
	if l.size == lagSamples {
		// Full: drop the oldest (the readers' positions move with it).
		l.head = (l.head + 1) % lagSamples
		l.size--
		for k := range l.read {
			if l.read[k] > 0 {
				l.read[k]--
			}
		}
	}
	l.buf[(l.head+l.size)%lagSamples] = lagSample{lsn: lsn, sent: t}
	l.size++
}

// reported records the standby's positions received at t.
func (l *lagTracker) reported(write, flush, apply wal.LSN, t time.Time) {
	for k, pos := range [3]wal.LSN{write, flush, apply} {
		for l.read[k] < l.size {
			s := l.buf[(l.head+l.read[k])%lagSamples]
			if s.lsn > pos {
				break
			}
			l.last[k], l.known[k] = t.Sub(s.sent), true
			l.read[k]++
		}
	}
	// Samples every kind has passed are no longer needed.
	done := min(l.read[0], l.read[1], l.read[2])
	l.head = (l.head + done) % lagSamples
	l.size -= done
	for k := range l.read {
		l.read[k] -= done
	}
}

// lags returns the write, flush and replay lags (-1 when not known yet). A position sent
// and not yet reached counts as lagging since it was sent.
func (l *lagTracker) lags(now time.Time) (time.Duration, time.Duration, time.Duration) {
	var out [3]time.Duration
	for k := range out {
		out[k] = -1
		if l.known[k] {
			out[k] = l.last[k]
		}
		if l.read[k] < l.size {
			if d := now.Sub(l.buf[(l.head+l.read[k])%lagSamples].sent); d > out[k] {
				out[k] = d
			}
		}
	}
	return out[0], out[1], out[2]
}
