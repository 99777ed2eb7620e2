package replication

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// StandbyConfig configures a WAL receiver.
type StandbyConfig struct {
	Primary ConnConfig
	// Dir is the standby's data directory: a base backup of the primary (with its standby
	// state), or absent/empty with BaseBackupIfEmpty.
	Dir               string
	BaseBackupIfEmpty bool
	// Slot is the primary's physical slot to stream from ("" = none).
	Slot string
	// StatusInterval is how often received WAL is fsynced and reported; 0 = 100 ms.
	StatusInterval time.Duration
	// Replayed, when set, is how far the standby's replay got (the engine's
	// ReplayedLSN), reported to the primary as the apply position.
	Replayed func() wal.LSN
	// Flushed, when set, is called after each fsync of received WAL (the engine's
	// WakeFollow, so replay starts at once).
	Flushed func()
	Logf    func(format string, args ...any)
}

// ReceiverStatus is what a WAL receiver reports of itself (pg_stat_wal_receiver's
// figures).
type ReceiverStatus struct {
	Connected        bool
	Received         wal.LSN // written to the segment files
	Flushed          wal.LSN // fsynced and reported as flushed (the standby state may be behind it: see saveEvery)
	LatestEnd        wal.LSN // the primary's end of WAL as last told
	LastMessage      time.Time
	LastError        string
	Reconnects       int
	BaseBackupFromUs bool
}

// Receiver is a standby's WAL receiver: it streams the primary's WAL into the standby's
// WAL directory, fsyncs it before reporting it flushed, saves where to resume (see
// saveState), and after a cut link or its own crash reconnects and resumes from there. The engine
// replays it (engine.OpenStandby and DB.Follow up to Status().Flushed).
type Receiver struct {
	cfg StandbyConfig
	fs  vfs.FS

	mu       sync.Mutex
	status   ReceiverStatus
	state    StandbyState
	prepared bool

	// saved is the flushed position the standby state file holds (saveState); used by
	// Prepare and then by the one stream running at a time.
	saved wal.LSN
}

// NewReceiver prepares a receiver (Run streams).
func NewReceiver(cfg StandbyConfig) *Receiver {
	if cfg.StatusInterval <= 0 {
		cfg.StatusInterval = 100 * time.Millisecond
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Receiver{cfg: cfg, fs: vfs.OS()}
}

// Status returns the receiver's figures.
func (r *Receiver) Status() ReceiverStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Run prepares the directory (Prepare) unless that was done, then streams until ctx
// ends, reconnecting after failures (1 s, doubling to 10 s).
func (r *Receiver) Run(ctx context.Context) error {
	r.mu.Lock()
	prepared := r.prepared
	r.mu.Unlock()
	if !prepared {
		if err := r.Prepare(ctx); err != nil {
			return err
		}
	}
	backoff := time.Second
	for {
		err := r.stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		r.mu.Lock()
		r.status.Connected = false
		r.status.Reconnects++
		if err != nil {
			r.status.LastError = err.Error()
		}
		r.mu.Unlock()
		r.cfg.Logf("standby: streaming from %s:%s ended: %v; reconnecting in %v", r.cfg.Primary.Host, r.cfg.Primary.Port, err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// Prepare takes the base backup when asked and the directory is empty, and reads the
// standby state (how far WAL was flushed): after it the directory opens as a standby.
func (r *Receiver) Prepare(ctx context.Context) error {
	st, err := ReadStandbyState(r.cfg.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		ents, derr := os.ReadDir(r.cfg.Dir)
		empty := errors.Is(derr, fs.ErrNotExist) || (derr == nil && len(ents) == 0)
		if !empty || !r.cfg.BaseBackupIfEmpty {
			return fmt.Errorf("standby %s: no %s (not a base backup of a primary); take one with engine-server basebackup, or serve --basebackup-if-empty into an empty directory",
				r.cfg.Dir, StandbyStateFileName)
		}
		conn, err := r.cfg.Primary.Connect(ctx)
		if err != nil {
			return err
		}
		res, err := BaseBackup(ctx, conn, r.cfg.Dir)
		_ = conn.Close(context.Background())
		if err != nil {
			return err
		}
		r.cfg.Logf("standby: base backup of system %d taken into %s (WAL %s to %s)", res.SystemID, r.cfg.Dir,
			FormatLSN(res.Redo), FormatLSN(res.End))
		r.mu.Lock()
		r.status.BaseBackupFromUs = true
		r.mu.Unlock()
		if st, err = ReadStandbyState(r.cfg.Dir); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	r.mu.Lock()
	r.state, r.saved = st, st.Flushed
	r.status.Received, r.status.Flushed = st.Flushed, st.Flushed
	r.prepared = true
	r.mu.Unlock()
	return nil
}

// drainWait is how long a receiver that holds all the WAL the primary had flushed waits for
// more before it fsyncs and reports, as PostgreSQL's walreceiver reads what its socket holds
// before it flushes. Without it, a primary that flushes WAL in small pieces (a VACUUM FULL
// under a WAL-rate limit flushes every 256 KiB) cost the standby a segment fsync and a
// standby-state write for every piece even while it was behind, and on a loaded machine the
// receiver fell behind by megabytes of WAL sent but not yet written; a synchronous commit
// now waits at most this much longer.
const drainWait = 200 * time.Microsecond

// applyPoll is how often a receiver whose engine has not yet replayed all the WAL it
// reported flushed looks again, and reports the replay position when it moved. Replay
// follows a flush by a moment, so the position a flush's report carries is behind; without
// this the primary saw replay move only at the next flush or status interval (100 ms), which
// added to the replay lag it shows (and to experiment 5's lag).
const applyPoll = 5 * time.Millisecond

// saveState reports whether a flush from saved to flushed must save the standby state
// first: only when it enters another WAL segment. The state says where a restarted
// receiver resumes; resuming behind the WAL it had flushed only receives those bytes again
// and writes them over themselves (the engine's replay of them on its Open is the same
// replay), so the state need not follow every flush. It must not fall a segment behind
// what the primary was told: a slot keeps the segments from its reported flush position
// on, and a resume position in an older segment could be removed by then. Saved at every
// flush, it cost two fsyncs (the file and its directory's rename) beside the segment's one
// for each flush of received WAL, about 1.5 ms each on this machine's disk, while the
// primary's VACUUM FULL sends a flush piece every few milliseconds (PostgreSQL's
// walreceiver saves nothing per flush: it finds the end of its WAL on disk at restart).
func saveState(saved, flushed wal.LSN, segSize int64) bool {
	return uint64(saved)/uint64(segSize) != uint64(flushed)/uint64(segSize)
}

// segFiles are the open WAL segment files of one stream.
type segFiles struct {
	fs    vfs.FS
	dir   string
	size  int64
	open  map[uint64]vfs.File
	dirty map[uint64]bool
}

func (s *segFiles) write(start wal.LSN, data []byte) error {
	pos := uint64(start)
	for len(data) > 0 {
		segno := pos / uint64(s.size)
		off := int64(pos % uint64(s.size))
		n := min(int64(len(data)), s.size-off)
		f, ok := s.open[segno]
		if !ok {
			var err error
			if f, err = s.get(segno); err != nil {
				return err
			}
		}
		if _, err := f.WriteAt(data[:n], off); err != nil {
			return fmt.Errorf("write WAL segment %s: %w", f.Name(), err)
		}
		s.dirty[segno] = true
		data = data[n:]
		pos += uint64(n)
	}
	return nil
}

// get opens segment segno, creating it full-sized (zeros) and durable when missing.
func (s *segFiles) get(segno uint64) (vfs.File, error) {
	name := filepath.Join(s.dir, wal.WALDirName, wal.SegmentName(segno, s.size))
	f, err := s.fs.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if err := s.fs.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			return nil, err
		}
		f, err = s.fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
		if err == nil {
			if err = f.Truncate(s.size); err == nil {
				if err = f.Sync(); err == nil {
					err = s.fs.SyncDir(filepath.Dir(name))
				}
			}
			if err != nil {
				_ = f.Close()
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open WAL segment %s: %w", name, err)
	}
	// Only one segment or two are written at a time: close the others.
	for n, of := range s.open {
		if !s.dirty[n] {
			_ = of.Close()
			delete(s.open, n)
		}
	}
	s.open[segno] = f
	return f, nil
}

func (s *segFiles) sync() error {
	for segno := range s.dirty {
		if err := s.open[segno].Sync(); err != nil {
			return fmt.Errorf("fsync WAL segment %s: %w", s.open[segno].Name(), err)
		}
		delete(s.dirty, segno)
	}
	return nil
}

func (s *segFiles) close() {
	for _, f := range s.open {
		_ = f.Close()
	}
}

// stream runs one connection: START_REPLICATION from the flushed position, then WAL
// written as it comes, fsynced, saved and reported every StatusInterval and whenever the
// primary asks.
func (r *Receiver) stream(ctx context.Context) error {
	conn, err := r.cfg.Primary.Connect(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	id, err := identify(ctx, conn)
	if err != nil {
		return err
	}
	r.mu.Lock()
	st := r.state
	r.mu.Unlock()
	if id != st.SystemID {
		return fmt.Errorf("the primary is system %d, this standby's data directory is a copy of system %d", id, st.SystemID)
	}
	q := "START_REPLICATION "
	if r.cfg.Slot != "" {
		q += "SLOT " + r.cfg.Slot + " "
	}
	q += "PHYSICAL " + FormatLSN(st.Flushed) + " TIMELINE 1"
	fe := conn.Frontend()
	fe.Send(&pgproto3.Query{String: q})
	if err := fe.Flush(); err != nil {
		return err
	}
	for started := false; !started; {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return fmt.Errorf("START_REPLICATION: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyBothResponse:
			started = true
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("START_REPLICATION: %w", pgconn.ErrorResponseToPgError(m))
		}
	}
	r.mu.Lock()
	r.status.Connected, r.status.LastError = true, ""
	r.mu.Unlock()
	r.cfg.Logf("standby: streaming from %s:%s at %s", r.cfg.Primary.Host, r.cfg.Primary.Port, FormatLSN(st.Flushed))
	segs := &segFiles{fs: r.fs, dir: r.cfg.Dir, size: st.SegmentSize, open: map[uint64]vfs.File{}, dirty: map[uint64]bool{}}
	defer segs.close()
	received, flushed := st.Flushed, st.Flushed
	next := time.Now().Add(r.cfg.StatusInterval)
	// applied is the replay position last reported.
	var applied wal.LSN
	replayed := func() wal.LSN {
		if r.cfg.Replayed == nil {
			return 0
		}
		return min(r.cfg.Replayed(), flushed)
	}
	send := func() error {
		su := StatusUpdate{Write: received, Flush: flushed, Apply: replayed(), Time: time.Now()}
		if err := fe.SendUnbufferedEncodedCopyData(copyData(EncodeStatusUpdate(su))); err != nil {
			return fmt.Errorf("send status update: %w", err)
		}
		applied = su.Apply
		return nil
	}
	report := func() error {
		if received > flushed {
			if err := segs.sync(); err != nil {
				return err
			}
			// st, in memory, is where this process resumes after a cut link: all it has
			// flushed. The file may be behind it (saveState).
			st.Flushed = received
			if saveState(r.saved, received, st.SegmentSize) {
				if err := writeStandbyState(r.fs, r.cfg.Dir, st); err != nil {
					return err
				}
				r.saved = received
			}
			flushed = received
			r.mu.Lock()
			r.state = st
			r.status.Flushed = flushed
			r.mu.Unlock()
			if r.cfg.Flushed != nil {
				r.cfg.Flushed()
			}
		}
		if err := send(); err != nil {
			return err
		}
		next = time.Now().Add(r.cfg.StatusInterval)
		return nil
	}
	// caughtUp: the last WAL received reached the primary's flushed end as it was when
	// sent; the receiver then flushes and reports as soon as no more WAL waits in the
	// connection (see drainWait).
	caughtUp := false
	for {
		if !time.Now().Before(next) {
			if err := report(); err != nil {
				return err
			}
			caughtUp = false
		}
		deadline, now := next, time.Now()
		if d := now.Add(drainWait); caughtUp && d.Before(deadline) {
			deadline = d
		}
		if d := now.Add(applyPoll); r.cfg.Replayed != nil && applied < flushed && d.Before(deadline) {
			deadline = d
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				if caughtUp {
					next = time.Now() // nothing more arrived: flush and report now
				} else if replayed() > applied {
					if err := send(); err != nil { // replay moved: say so, no fsync needed
						return err
					}
				}
				continue
			}
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			sm, err := DecodeServerMessage(m.Data)
			if err != nil {
				return err
			}
			r.mu.Lock()
			r.status.LastMessage, r.status.LatestEnd = time.Now(), sm.End
			r.mu.Unlock()
			if sm.Keepalive {
				if sm.ReplyRequested {
					next = time.Now()
				}
				continue
			}
			if sm.Start != received {
				return fmt.Errorf("primary sent WAL at %s, expected %s", FormatLSN(sm.Start), FormatLSN(received))
			}
			if err := segs.write(sm.Start, sm.Data); err != nil {
				return err
			}
			received += wal.LSN(len(sm.Data))
			r.mu.Lock()
			r.status.Received = received
			r.mu.Unlock()
			// Caught up with what the primary had flushed: flush and report once the
			// connection holds no more, so a synchronous primary's commits wait no
			// longer than that.
			caughtUp = received >= sm.End
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("primary: %w", pgconn.ErrorResponseToPgError(m))
		case *pgproto3.CopyDone:
			return errors.New("the primary ended the stream")
		}
	}
}

// copyData encodes a CopyData message whole.
func copyData(b []byte) []byte {
	out, _ := (&pgproto3.CopyData{Data: b}).Encode(nil) // encoding a CopyData cannot fail
	return out
}
