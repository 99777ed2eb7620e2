package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// Defaults of PrimaryConfig.
const (
	DefaultKeepaliveInterval = 10 * time.Second
	DefaultSenderTimeout     = 60 * time.Second
	// maxSendBytes bounds one XLogData message's WAL.
	maxSendBytes = 128 << 10
	// pollInterval is how often an idle sender looks for newly flushed WAL.
	pollInterval = 2 * time.Millisecond
)

// PrimaryConfig configures a Primary.
type PrimaryConfig struct {
	DB *engine.DB
	// MaxSlotWALKeepSize is how many bytes of WAL a slot may hold behind the end of the log
	// before it is invalidated (--max-slot-wal-keep-size); < 0 = no limit (PostgreSQL's
	// max_slot_wal_keep_size = -1).
	MaxSlotWALKeepSize int64
	// KeepaliveInterval is how often an idle stream gets a keepalive; 0 = 10 s.
	KeepaliveInterval time.Duration
	// SenderTimeout ends a stream whose client sent nothing for that long; 0 = 60 s.
	SenderTimeout time.Duration
	// SynchronousStandby names the standby (its application_name) every commit waits for
	// (--synchronous-standby): a commit returns once that standby has flushed its commit
	// record, as PostgreSQL's synchronous_commit=on with synchronous_standby_names.
	SynchronousStandby string
	Logf               func(format string, args ...any)
}

// Primary serves replication connections of one engine data directory (a
// wire.ReplicationHandler): the commands, WAL streaming, slots and their WAL retention.
type Primary struct {
	cfg     PrimaryConfig
	db      *engine.DB
	log     *wal.Log
	fs      vfs.FS
	dir     string
	segSize int64
	slots   *Slots

	mu      sync.Mutex
	senders map[uint32]*sender
	holds   map[*walHold]struct{}
	// flushed is closed (and replaced) whenever a standby reports a position or a stream ends.
	flushed chan struct{}

	invalidations atomic.Int64
	stop          chan struct{}
	done          chan struct{}
}

// sender is one START_REPLICATION stream's state, for pg_stat_replication and retention.
type sender struct {
	pid       uint32
	user, app string
	client    string
	slot      string
	start     time.Time

	mu                 sync.Mutex
	state              string // "startup", "catchup", "streaming"
	sent               wal.LSN
	write, flush, play wal.LSN
	replyTime          time.Time
	lags               lagTracker
}

// NewPrimary opens the data directory's slots and starts the housekeeping that applies
// retention and --max-slot-wal-keep-size. Close stops it.
func NewPrimary(cfg PrimaryConfig) (*Primary, error) {
	if cfg.KeepaliveInterval <= 0 {
		cfg.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if cfg.SenderTimeout <= 0 {
		cfg.SenderTimeout = DefaultSenderTimeout
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	fs, dir, log := cfg.DB.FS(), cfg.DB.Dir(), cfg.DB.WAL()
	slots, err := OpenSlots(fs, dir)
	if err != nil {
		return nil, err
	}
	p := &Primary{cfg: cfg, db: cfg.DB, log: log, fs: fs, dir: dir, segSize: log.SegmentSize(),
		slots: slots, senders: map[uint32]*sender{}, holds: map[*walHold]struct{}{}, flushed: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{})}
	p.housekeep()
	go p.housekeeper()
	if cfg.SynchronousStandby != "" {
		cfg.DB.SetCommitWait(p.SyncWait(cfg.SynchronousStandby))
	}
	return p, nil
}

// Close stops the housekeeping (streams end with their connections).
func (p *Primary) Close() {
	if p.cfg.SynchronousStandby != "" {
		p.db.SetCommitWait(nil)
	}
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// Slots are the primary's replication slots.
func (p *Primary) Slots() *Slots { return p.slots }

// Invalidations is how many slots were invalidated for exceeding --max-slot-wal-keep-size
// since the primary started.
func (p *Primary) Invalidations() int64 { return p.invalidations.Load() }

func (p *Primary) housekeeper() {
	defer close(p.done)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			p.log.SetRetention(0)
			return
		case <-t.C:
			p.housekeep()
		}
	}
}

// housekeep invalidates slots past the keep size and sets the log's retention to the
// oldest WAL a valid slot or a running stream still needs.
func (p *Primary) housekeep() {
	end := p.log.FlushedLSN()
	inv, err := p.slots.InvalidateBehind(end, p.cfg.MaxSlotWALKeepSize)
	if err != nil {
		p.cfg.Logf("replication: %v", err)
	}
	for _, sl := range inv {
		p.invalidations.Add(1)
		p.cfg.Logf("replication: invalidating slot %q: its restart LSN %s is %d bytes behind the end of WAL %s, more than --max-slot-wal-keep-size %d",
			sl.Name, FormatLSN(sl.RestartLSN), int64(end-sl.RestartLSN), FormatLSN(end), p.cfg.MaxSlotWALKeepSize)
	}
	p.updateRetention()
}

// updateRetention gives the log the oldest position still needed.
func (p *Primary) updateRetention() {
	keep := p.slots.Retained()
	p.mu.Lock()
	for _, s := range p.senders {
		s.mu.Lock()
		need := max(s.sent, wal.FirstLSN) // 0 is "no retention" to the log
		if keep == 0 || need < keep {
			keep = need
		}
		s.mu.Unlock()
	}
	for h := range p.holds {
		if keep == 0 || h.lsn < keep {
			keep = h.lsn
		}
	}
	p.mu.Unlock()
	p.log.SetRetention(keep)
}

// walHold keeps WAL from lsn (a base backup's redo point).
type walHold struct{ lsn wal.LSN }

func (p *Primary) hold(lsn wal.LSN) *walHold {
	h := &walHold{lsn: max(lsn, wal.FirstLSN)}
	p.mu.Lock()
	p.holds[h] = struct{}{}
	p.mu.Unlock()
	p.updateRetention()
	return h
}

func (p *Primary) moveHold(h *walHold, lsn wal.LSN) {
	p.mu.Lock()
	h.lsn = max(lsn, wal.FirstLSN)
	p.mu.Unlock()
	p.updateRetention()
}

func (p *Primary) release(h *walHold) {
	p.mu.Lock()
	delete(p.holds, h)
	p.mu.Unlock()
	p.updateRetention()
}

// ServeReplication runs the replication commands of one connection.
func (p *Primary) ServeReplication(ctx context.Context, rc wire.ReplicationConn) {
	c := &replConn{p: p, rc: rc, be: rc.Backend, ctx: ctx}
	defer func() { p.slots.DropTemporary(c.temps); p.updateRetention() }()
	for {
		msg, err := c.be.Receive()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				p.cfg.Logf("replication connection %d: read: %v", rc.PID, err)
			}
			return
		}
		switch m := msg.(type) {
		case *pgproto3.Terminate:
			return
		case *pgproto3.Query:
			if err := c.command(m.String); err != nil {
				if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					p.cfg.Logf("replication connection %d: %v", rc.PID, err)
				}
				return
			}
		case *pgproto3.Sync:
			c.ready()
			if c.be.Flush() != nil {
				return
			}
		default:
			c.fatal("08P01", fmt.Sprintf("unexpected message %T on a replication connection", msg))
			return
		}
	}
}

// replConn is one replication connection's command state.
type replConn struct {
	p     *Primary
	rc    wire.ReplicationConn
	be    *pgproto3.Backend
	ctx   context.Context
	temps []string // temporary slots it created
	wmu   sync.Mutex
}

func (c *replConn) ready() { c.be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'}) }

func (c *replConn) sendError(code, msg string) {
	c.be.Send(&pgproto3.ErrorResponse{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: code, Message: msg})
}

func (c *replConn) fatal(code, msg string) {
	c.be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: msg})
	_ = c.be.Flush()
}

// textRow sends a one-row result of text columns (nil = NULL) with column types oids.
func (c *replConn) textRow(names []string, oids []uint32, vals [][]byte, tag string) {
	fields := make([]pgproto3.FieldDescription, len(names))
	for i, n := range names {
		size := int16(-1)
		switch oids[i] {
		case 23:
			size = 4
		case 20:
			size = 8
		}
		fields[i] = pgproto3.FieldDescription{Name: []byte(n), DataTypeOID: oids[i], DataTypeSize: size, TypeModifier: -1}
	}
	c.be.Send(&pgproto3.RowDescription{Fields: fields})
	c.be.Send(&pgproto3.DataRow{Values: vals})
	c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(tag)})
}

// command answers one replication command; an error ends the connection.
func (c *replConn) command(text string) error {
	cmd, err := ParseCommand(text)
	if err != nil {
		c.sendError("42601", err.Error())
		c.ready()
		return c.be.Flush()
	}
	p := c.p
	const textOID, int4OID, int8OID = 25, 23, 20
	switch cmd.Kind {
	case IdentifySystem:
		var db []byte
		if c.rc.Database {
			db = []byte(c.rc.User)
		}
		c.textRow([]string{"systemid", "timeline", "xlogpos", "dbname"}, []uint32{textOID, int4OID, textOID, textOID},
			[][]byte{[]byte(strconv.FormatUint(p.db.SystemID(), 10)), []byte(strconv.Itoa(wal.Timeline)),
				[]byte(FormatLSN(p.log.FlushedLSN())), db}, "IDENTIFY_SYSTEM")
	case Show:
		v, ok := p.show(cmd.Name)
		if !ok {
			c.sendError("42704", fmt.Sprintf("unrecognized configuration parameter %q", cmd.Name))
			break
		}
		c.textRow([]string{cmd.Name}, []uint32{textOID}, [][]byte{[]byte(v)}, "SHOW")
	case CreateSlot:
		var restart wal.LSN
		if cmd.ReserveWAL {
			restart = p.log.FlushedLSN()
		}
		if err := p.slots.Create(cmd.Name, restart, cmd.Temporary); err != nil {
			code := "XX000"
			switch {
			case errors.Is(err, ErrSlotExists):
				code = "42710"
			case validSlotName(cmd.Name) != nil:
				code = "42602"
			}
			c.sendError(code, err.Error())
			break
		}
		if cmd.Temporary {
			c.temps = append(c.temps, cmd.Name)
		}
		p.updateRetention()
		c.textRow([]string{"slot_name", "consistent_point", "snapshot_name", "output_plugin"},
			[]uint32{textOID, textOID, textOID, textOID}, [][]byte{[]byte(cmd.Name), []byte("0/0"), nil, nil},
			"CREATE_REPLICATION_SLOT")
	case DropSlot:
		if err := p.slots.Drop(cmd.Name); err != nil {
			code := "55006"
			if errors.Is(err, ErrNoSlot) {
				code = "42704"
			}
			c.sendError(code, err.Error())
			break
		}
		p.updateRetention()
		c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte("DROP_REPLICATION_SLOT")})
	case ReadSlot:
		vals := [][]byte{nil, nil, nil}
		if sl, ok := p.slots.Get(cmd.Name); ok {
			vals[0] = []byte("physical")
			if sl.RestartLSN != 0 && !sl.Invalidated {
				vals[1], vals[2] = []byte(FormatLSN(sl.RestartLSN)), []byte(strconv.Itoa(wal.Timeline))
			}
		}
		c.textRow([]string{"slot_type", "restart_lsn", "restart_tli"}, []uint32{textOID, textOID, int8OID}, vals,
			"READ_REPLICATION_SLOT")
	case StartReplication:
		return c.stream(cmd)
	case BaseBackupKind:
		return c.baseBackup()
	}
	c.ready()
	return c.be.Flush()
}

// show answers SHOW for the settings replication clients ask for.
func (p *Primary) show(name string) (string, bool) {
	switch name {
	case "wal_segment_size":
		return formatSize(p.segSize), true
	case "data_directory_mode":
		return "0700", true
	case "server_version":
		return ServerVersion, true
	case "max_slot_wal_keep_size":
		if p.cfg.MaxSlotWALKeepSize < 0 {
			return "-1", true
		}
		return formatSize(p.cfg.MaxSlotWALKeepSize), true
	}
	return "", false
}

// ServerVersion is what SHOW server_version answers on a replication connection.
const ServerVersion = "15.0"

// formatSize renders a byte count as PostgreSQL shows memory settings (16MB, 1GB, 64kB).
func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMB", n>>20)
	case n%1024 == 0:
		return fmt.Sprintf("%dkB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// stream runs START_REPLICATION: CopyBoth, then XLogData of the flushed WAL from the
// requested position, keepalives, and the client's status updates, until the client's
// CopyDone (the command then completes) or the connection ends (error returned).
func (c *replConn) stream(cmd *Command) error {
	p := c.p
	if cmd.Timeline != 0 && cmd.Timeline != wal.Timeline {
		c.sendError("XX000", fmt.Sprintf("requested timeline %d is not in this server's history (timeline %d only)", cmd.Timeline, wal.Timeline))
		c.ready()
		return c.be.Flush()
	}
	start := cmd.LSN
	flushed := p.log.FlushedLSN()
	if start > flushed {
		c.sendError("XX000", fmt.Sprintf("requested starting point %s is ahead of the WAL flush position of this server %s",
			FormatLSN(start), FormatLSN(flushed)))
		c.ready()
		return c.be.Flush()
	}
	s := &sender{pid: c.rc.PID, user: c.rc.User, app: c.rc.AppName, client: clientAddr(c.rc.Conn.RemoteAddr()),
		slot: cmd.Name, start: time.Now(), state: "startup", sent: start}
	if cmd.Name != "" {
		sl, err := p.slots.Acquire(cmd.Name, c.rc.PID)
		if err != nil {
			code := "55006"
			if errors.Is(err, ErrNoSlot) {
				code = "42704"
			}
			c.sendError(code, err.Error())
			c.ready()
			return c.be.Flush()
		}
		defer p.slots.Release(cmd.Name, c.rc.PID)
		if sl.Invalidated {
			c.sendError("55000", fmt.Sprintf("can no longer get changes from replication slot %q: it exceeded --max-slot-wal-keep-size and its WAL was removed", cmd.Name))
			c.ready()
			return c.be.Flush()
		}
		if sl.RestartLSN == 0 {
			_ = p.slots.Advance(cmd.Name, max(start, wal.FirstLSN))
		}
	}
	// Registered before the check: from here on the segment cannot be removed.
	p.mu.Lock()
	p.senders[s.pid] = s
	p.mu.Unlock()
	p.updateRetention()
	defer func() {
		p.mu.Lock()
		delete(p.senders, s.pid)
		p.reportedLocked() // a vacuum held for this standby (SlowestReplay) looks again
		p.mu.Unlock()
		p.updateRetention()
	}()
	f, err := p.openSegment(start)
	if err != nil {
		c.sendError("58P01", err.Error())
		c.ready()
		return c.be.Flush()
	}
	_ = f.Close()

	c.be.Send(&pgproto3.CopyBothResponse{OverallFormat: 0})
	if err := c.be.Flush(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	recvDone := make(chan struct{})
	var recvErr error
	var lastRecv atomic.Int64
	lastRecv.Store(time.Now().UnixNano())
	go func() { recvErr = c.receive(ctx, s, &lastRecv); close(recvDone) }()

	sendErr := c.send(ctx, s, &lastRecv, recvDone, &recvErr)
	if errors.Is(sendErr, errClientDone) {
		// The client's CopyDone: answer with ours and complete the command.
		c.wmu.Lock()
		c.be.Send(&pgproto3.CopyDone{})
		c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte("START_STREAMING")})
		c.ready()
		err := c.be.Flush()
		c.wmu.Unlock()
		return err
	}
	cancel()
	_ = c.rc.Conn.Close()
	<-recvDone
	return sendErr
}

var errClientDone = errors.New("client ended the copy")

func clientAddr(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return ""
}

// openSegment opens the segment holding lsn, or says it was removed.
func (p *Primary) openSegment(lsn wal.LSN) (vfs.File, error) {
	path := wal.SegmentPath(p.dir, lsn, p.segSize)
	f, err := p.fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("requested WAL segment %s has already been removed", wal.SegmentName(uint64(lsn)/uint64(p.segSize), p.segSize))
	}
	if err != nil {
		return nil, fmt.Errorf("open WAL segment %s: %w", path, err)
	}
	return f, nil
}

// send streams flushed WAL and keepalives until the receiver ends (its error returned,
// errClientDone on CopyDone) or a write fails.
func (c *replConn) send(ctx context.Context, s *sender, lastRecv *atomic.Int64, recvDone <-chan struct{}, recvErr *error) error {
	p := c.p
	var f vfs.File
	fseg := ^uint64(0)
	defer func() {
		if f != nil {
			_ = f.Close()
		}
	}()
	buf := make([]byte, maxSendBytes)
	msg := make([]byte, 0, maxSendBytes+32)
	lastSend := time.Now()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-recvDone:
			return *recvErr
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		s.mu.Lock()
		pos := s.sent
		s.mu.Unlock()
		end := p.log.FlushedLSN()
		if pos < end {
			segno := uint64(pos) / uint64(p.segSize)
			if f == nil || fseg != segno {
				if f != nil {
					_ = f.Close()
				}
				var err error
				if f, err = p.openSegment(pos); err != nil {
					return err
				}
				fseg = segno
			}
			off := int64(uint64(pos) % uint64(p.segSize))
			n := min(int64(end-pos), p.segSize-off, maxSendBytes)
			if _, err := f.ReadAt(buf[:n], off); err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("read WAL segment %s: %w", f.Name(), err)
			}
			now := time.Now()
			msg = appendXLogData(msg[:0], pos, end, now, buf[:n])
			if err := c.sendCopy(msg); err != nil {
				return err
			}
			s.mu.Lock()
			s.sent = pos + wal.LSN(n)
			s.lags.sent(s.sent, now)
			if s.sent >= end {
				s.state = "streaming"
			} else {
				s.state = "catchup"
			}
			s.mu.Unlock()
			lastSend = now
			continue
		}
		s.mu.Lock()
		if s.state != "streaming" {
			s.state = "streaming"
		}
		s.mu.Unlock()
		now := time.Now()
		idle := now.Sub(time.Unix(0, lastRecv.Load()))
		if idle > p.cfg.SenderTimeout {
			return fmt.Errorf("terminating walsender process due to replication timeout (no reply for %v)", idle.Round(time.Second))
		}
		if now.Sub(lastSend) >= p.cfg.KeepaliveInterval {
			if err := c.sendCopy(encodeKeepalive(end, now, idle > p.cfg.SenderTimeout/2)); err != nil {
				return err
			}
			lastSend = now
		}
		select {
		case <-recvDone:
			return *recvErr
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (c *replConn) sendCopy(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.be.Send(&pgproto3.CopyData{Data: b})
	return c.be.Flush()
}

// receive reads the client's messages during streaming: status updates (recorded, the
// slot advanced to the flush position, a reply sent when asked), hot standby feedback
// (ignored), CopyDone (errClientDone).
func (c *replConn) receive(ctx context.Context, s *sender, lastRecv *atomic.Int64) error {
	p := c.p
	for {
		msg, err := c.be.Receive()
		if err != nil {
			return err
		}
		lastRecv.Store(time.Now().UnixNano())
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			fb, err := DecodeFeedback(m.Data)
			if err != nil {
				return err
			}
			if fb.Status == nil {
				continue
			}
			st := fb.Status
			now := time.Now()
			// The slot first: whoever sees the stream's new position sees the slot's.
			if s.slot != "" && st.Flush != 0 {
				if err := p.slots.Advance(s.slot, st.Flush); err != nil {
					p.cfg.Logf("replication: slot %q: %v", s.slot, err)
				}
			}
			s.mu.Lock()
			s.write, s.flush, s.play = max(s.write, st.Write), max(s.flush, st.Flush), max(s.play, st.Apply)
			s.replyTime = now
			s.lags.reported(st.Write, st.Flush, st.Apply, now)
			end := p.log.FlushedLSN()
			s.mu.Unlock()
			p.mu.Lock()
			p.reportedLocked()
			p.mu.Unlock()
			if st.ReplyRequested {
				if err := c.sendCopy(encodeKeepalive(end, now, false)); err != nil {
					return err
				}
			}
		case *pgproto3.CopyDone:
			return errClientDone
		case *pgproto3.CopyFail:
			return fmt.Errorf("client aborted the stream: %s", m.Message)
		case *pgproto3.Terminate:
			return io.EOF
		default:
			return fmt.Errorf("unexpected message %T during START_REPLICATION", msg)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// SyncWait returns the wait of synchronous replication to the standby named name (its
// application_name): it returns once that standby has reported WAL flushed up to lsn, or
// when ctx ends (engine.DB.SetCommitWait). While the standby is not connected, it waits.
func (p *Primary) SyncWait(name string) func(ctx context.Context, lsn wal.LSN) error {
	return func(ctx context.Context, lsn wal.LSN) error {
		for {
			p.mu.Lock()
			ch, ok := p.flushed, false
			for _, s := range p.senders {
				s.mu.Lock()
				ok = ok || (s.app == name && s.flush >= lsn)
				s.mu.Unlock()
			}
			p.mu.Unlock()
			if ok {
				return nil
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return fmt.Errorf("canceling wait for synchronous replication to %q: %w", name, ctx.Err())
			case <-p.stop:
				return fmt.Errorf("canceling wait for synchronous replication to %q: the server is shutting down", name)
			}
		}
	}
}

// reportedLocked wakes whoever waits on p.flushed (a standby reported a position, or
// left). p.mu is held.
func (p *Primary) reportedLocked() {
	close(p.flushed)
	p.flushed = make(chan struct{})
}

// SlowestReplay is the replay position of the standby furthest behind among those that
// have reported one (a stream that has not reported yet is not counted), how many those
// are, and a channel closed at the next report or departure. It is the vacuum's WAL lag
// bound's view of replication (throttle.WALGate): cheap, no allocation, no waiting.
func (p *Primary) SlowestReplay() (replayed wal.LSN, standbys int, changed <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.senders {
		s.mu.Lock()
		if !s.replyTime.IsZero() {
			if standbys == 0 || s.play < replayed {
				replayed = s.play
			}
			standbys++
		}
		s.mu.Unlock()
	}
	return replayed, standbys, p.flushed
}

// Standby is one streaming standby as pg_stat_replication shows it.
type Standby struct {
	PID                                      uint32
	User, AppName, ClientAddr, State, Slot   string
	BackendStart, ReplyTime                  time.Time
	Sent, Write, Flush, Replay               wal.LSN
	WriteLag, FlushLag, ReplayLag            time.Duration // -1 = not known yet
	SentLagBytes, FlushLagBytes, ReplayBytes int64         // behind the primary's flushed end
}

// Standbys lists the running streams, by process id.
func (p *Primary) Standbys() []Standby {
	end := p.log.FlushedLSN()
	p.mu.Lock()
	ss := make([]*sender, 0, len(p.senders))
	for _, s := range p.senders {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	out := make([]Standby, 0, len(ss))
	now := time.Now()
	for _, s := range ss {
		s.mu.Lock()
		wl, fl, rl := s.lags.lags(now)
		out = append(out, Standby{PID: s.pid, User: s.user, AppName: s.app, ClientAddr: s.client, State: s.state,
			Slot: s.slot, BackendStart: s.start, ReplyTime: s.replyTime, Sent: s.sent, Write: s.write, Flush: s.flush,
			Replay: s.play, WriteLag: wl, FlushLag: fl, ReplayLag: rl,
			SentLagBytes: behind(end, s.sent), FlushLagBytes: behind(end, s.flush), ReplayBytes: behind(end, s.play)})
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Standby) int { return int(a.PID) - int(b.PID) })
	return out
}

func behind(end, pos wal.LSN) int64 {
	if pos >= end {
		return 0
	}
	return int64(end - pos)
}
