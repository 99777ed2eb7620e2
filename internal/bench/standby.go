package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Standby is a simulated streaming replica: it reads the primary's WAL
// files, record by record, at a fixed byte rate, and holds the primary's
// WAL retention point at what it has consumed, so checkpoints never
// recycle WAL it still has to read. Lag is the primary's insert LSN minus
// the consumed LSN.
type Standby struct {
	fsys     vfs.FS
	dir      string
	opts     wal.Options
	log      *wal.Log
	rate     atomic.Uint64 // bytes per second, float64 bits
	consumed atomic.Uint64
	records  atomic.Int64
	reopens  atomic.Int64
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
}

// standbyTick is how often the standby wakes to consume its allowance.
const standbyTick = 5 * time.Millisecond

// StartStandby starts consuming the WAL of the data directory dir from
// the log's current insert LSN (which must be a record boundary: nothing
// is being inserted when it is called) at rate bytes per second.
func StartStandby(fsys vfs.FS, dir string, log *wal.Log, opts wal.Options, rate float64) *Standby {
	if fsys == nil { // as engine.Options.FS: the operating system's
		fsys = vfs.NewOS(nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Standby{fsys: fsys, dir: dir, opts: opts, log: log, cancel: cancel, done: make(chan struct{})}
	s.SetRate(rate)
	start := log.InsertLSN()
	s.consumed.Store(uint64(start))
	log.SetRetention(start)
	go s.run(ctx)
	return s
}

// SetRate changes the standby's consumption rate (0 = paused).
func (s *Standby) SetRate(bytesPerSecond float64) {
	s.rate.Store(math.Float64bits(max(bytesPerSecond, 0)))
}

// Consumed is the end of the last record the standby has consumed.
func (s *Standby) Consumed() wal.LSN { return wal.LSN(s.consumed.Load()) }

// Lag is the primary's insert LSN minus what the standby consumed.
func (s *Standby) Lag() int64 {
	ins, c := s.log.InsertLSN(), s.Consumed()
	if ins < c {
		return 0
	}
	return int64(ins - c)
}

// Stop stops the standby, clears the retention point and returns the
// first error that ended it early, if any.
func (s *Standby) Stop() error {
	s.cancel()
	<-s.done
	s.log.SetRetention(0)
	return s.err
}

func (s *Standby) run(ctx context.Context) {
	defer close(s.done)
	var rd *wal.Reader
	defer func() {
		if rd != nil {
			rd.Close()
		}
	}()
	budget := 0.0
	last := time.Now()
	tk := time.NewTicker(standbyTick)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		now := time.Now()
		// An idle standby banks at most two ticks of allowance: its rate is
		// a ceiling, not a credit. A record larger than the allowance is
		// consumed on credit (the budget goes negative) and paid for by the
		// following ticks, so the average rate is exact.
		rate := math.Float64frombits(s.rate.Load())
		budget = min(budget+rate*now.Sub(last).Seconds(), rate*standbyTick.Seconds()*2)
		last = now
		for budget > 0 {
			if rd == nil {
				r, err := wal.NewReader(s.fsys, s.dir, s.Consumed(), s.opts)
				if err != nil {
					s.err = fmt.Errorf("standby: open WAL at %d: %w", s.Consumed(), err)
					return
				}
				rd = r
				s.reopens.Add(1)
			}
			rec, err := rd.Next()
			var corrupt *wal.CorruptRecordError
			if errors.Is(err, io.EOF) || errors.As(err, &corrupt) {
				// The end of what the primary has written so far (the
				// last record may be half written): read again next tick.
				rd.Close()
				rd = nil
				break
			}
			if err != nil {
				s.err = fmt.Errorf("standby: read WAL after %d: %w", s.Consumed(), err)
				return
			}
			budget -= float64(rec.EndLSN - s.Consumed())
			s.consumed.Store(uint64(rec.EndLSN))
			s.log.SetRetention(rec.EndLSN)
			s.records.Add(1)
		}
	}
}

// LagSample is one lag measurement.
type LagSample struct {
	At  time.Duration // since sampling began
	Lag int64         // bytes
}

// lagSampler samples a standby's lag every interval until stopped.
type lagSampler struct {
	mu      sync.Mutex
	samples []LagSample
	stop    chan struct{}
	done    chan struct{}
}

func sampleLag(s *Standby, every time.Duration) *lagSampler {
	ls := &lagSampler{stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(ls.done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			ls.mu.Lock()
			ls.samples = append(ls.samples, LagSample{At: time.Since(start), Lag: s.Lag()})
			ls.mu.Unlock()
			select {
			case <-ls.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return ls
}

func (ls *lagSampler) Stop() []LagSample {
	close(ls.stop)
	<-ls.done
	return ls.samples
}
