// Package wire is the server's PostgreSQL frontend/backend protocol (3.0) side, on the pgx
// project's pgproto3 codec: the startup phase (SSLRequest and GSSENCRequest, CancelRequest,
// the database name, --max-connections, SCRAM-SHA-256 or trust), then one goroutine per
// connection running the simple and extended query protocols over a sql.Session.
//
// Shutdown stops accepting, closes idle connections at once (their open transactions roll
// back), lets running statements finish and closes their connections after them; when its
// context ends first, running statements are canceled.
package wire

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/osthread"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/server/auth"
	"github.com/vacuumops/vacuum-operator/internal/server/latency"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/sql"
)

// Auth methods.
const (
	AuthSCRAM = "scram"
	AuthTrust = "trust"
)

// MaxMessageBytes bounds a frontend message's body: a larger one ends the connection
// (08P01) instead of allocating it.
const MaxMessageBytes = 64 << 20

// startupTimeout bounds the startup phase (a client that connects and says nothing).
const startupTimeout = 30 * time.Second

// Config configures a Server.
type Config struct {
	DB       *engine.DB
	Auth     string     // AuthSCRAM or AuthTrust
	Users    auth.Users // required for AuthSCRAM
	TLS      *tls.Config
	Database string // the one database name clients may connect to
	// MaxConnections bounds concurrent sessions (53300 beyond it); 0 = 100.
	MaxConnections int
	// Replication serves replication connections (startup parameter replication); nil
	// refuses them (0A000).
	Replication ReplicationHandler
	// Views are system views other packages provide (sql.Config.Views).
	Views map[string]sql.View
	// ReplicationLag is the standbys' lag, the adaptive throttle's lag signal (nil: no
	// standby is ever seen).
	ReplicationLag func() sql.ReplicationLag
	// StandbyReplay is the slowest standby's replay position, how many standbys have
	// reported one and a channel closed at the next report: the WAL lag bound's signal
	// (sql.Vacuums.SetStandbyReplay; nil: the bound holds nothing back).
	StandbyReplay func() (replayed wal.LSN, standbys int, changed <-chan struct{})
	// VacuumPriority lowers the OS threads of every VACUUM's workers
	// (sql.Vacuums.SetThreadPriority; the zero value: the foreground's priority).
	VacuumPriority osthread.Priority
	// LogAdaptive logs each change of an adaptive throttle's decision through Logf, with
	// what its judgement read (sql.Vacuums.SetAdaptiveLog).
	LogAdaptive bool
	Logf        func(format string, args ...any)
}

// Server accepts PostgreSQL connections for one engine database.
type Server struct {
	cfg     Config
	nextPID atomic.Uint32
	vacuums *sql.Vacuums // running VACUUMs, for the progress views and vacuum_set_throttle
	latency *latency.Recorder
	// stampedOnce and unstampedOnce log, once each, whether sessions time statements from
	// their messages' receive times (recvtime.go).
	stampedOnce, unstampedOnce sync.Once

	mu       sync.Mutex
	conns    map[uint32]*conn // sessions past startup, by process id
	pending  map[*conn]struct{}
	lns      []net.Listener
	stopping bool
	wg       sync.WaitGroup
}

// New returns a server; Serve runs it on a listener.
func New(cfg Config) *Server {
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = 100
	}
	if cfg.Database == "" {
		cfg.Database = "postgres"
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	s := &Server{cfg: cfg, conns: map[uint32]*conn{}, pending: map[*conn]struct{}{}, vacuums: sql.NewVacuums(), latency: latency.New()}
	s.vacuums.SetReplicationLag(cfg.ReplicationLag)
	s.vacuums.SetThreadPriority(cfg.VacuumPriority, cfg.Logf)
	if cfg.LogAdaptive {
		s.vacuums.SetAdaptiveLog(cfg.Logf)
	}
	s.vacuums.SetStandbyReplay(cfg.StandbyReplay)
	s.nextPID.Store(uint32(1000 + time.Now().UnixNano()%1000))
	return s
}

// Latency is the server's foreground statement latency (its Collector is on /metrics).
func (s *Server) Latency() *latency.Recorder { return s.latency }

// VacuumsRunning is the number of VACUUM statements running now.
func (s *Server) VacuumsRunning() int { return s.vacuums.Count() }

// ErrServerClosed is what Serve returns after Shutdown.
var ErrServerClosed = errors.New("server closed")

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			stopping := s.stopping
			s.mu.Unlock()
			if stopping {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		c := &conn{srv: s, nc: nc}
		s.mu.Lock()
		if s.stopping {
			s.mu.Unlock()
			_ = nc.Close()
			continue
		}
		s.pending[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
		}()
	}
}

// Sessions is the number of sessions past startup.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Shutdown stops the server gracefully (see the package comment) and returns when every
// connection has ended.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	for _, ln := range s.lns {
		_ = ln.Close()
	}
	all := make([]*conn, 0, len(s.conns)+len(s.pending))
	for _, c := range s.conns {
		all = append(all, c)
	}
	for c := range s.pending {
		all = append(all, c)
	}
	s.mu.Unlock()
	for _, c := range all {
		c.stop()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, c := range all {
		c.kill()
	}
	<-done
	return ctx.Err()
}

// activity lists the sessions past startup for pg_stat_activity, in process-id order.
func (s *Server) activity() []sql.Activity {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	out := make([]sql.Activity, 0, len(conns))
	for _, c := range conns {
		c.mu.Lock()
		if c.act.PID != 0 {
			out = append(out, c.act)
		}
		c.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// clientAddr is the client's IP address as pg_stat_activity shows it ("" when not TCP).
func clientAddr(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	return ""
}

// register admits a session past startup, or refuses it (53300, or 57P03 when stopping).
func (s *Server) register(c *conn) *pgerr.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, c)
	if s.stopping {
		return pgerr.New("57P03", "the database system is shutting down")
	}
	if len(s.conns) >= s.cfg.MaxConnections {
		return pgerr.New(pgerr.TooManyConnections, "sorry, too many clients already")
	}
	for {
		pid := s.nextPID.Add(1)
		if _, used := s.conns[pid]; !used && pid != 0 {
			c.pid = pid
			break
		}
	}
	if _, err := rand.Read(c.secret[:]); err != nil {
		return pgerr.Wrap(err, pgerr.InternalError, "random key: %v", err)
	}
	s.conns[c.pid] = c
	return nil
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, c)
	if s.conns[c.pid] == c {
		delete(s.conns, c.pid)
	}
}

// cancel handles a CancelRequest: the session's running statement, if any, is canceled
// when the key matches (a wrong key is ignored silently, as PostgreSQL does).
func (s *Server) cancel(req *pgproto3.CancelRequest) {
	s.mu.Lock()
	c := s.conns[req.ProcessID]
	s.mu.Unlock()
	if c == nil || len(req.SecretKey) != len(c.secret) || subtle.ConstantTimeCompare(req.SecretKey, c.secret[:]) != 1 {
		return
	}
	c.cancelStatement()
}

// signal is pg_cancel_backend (cancel the running statement of session pid) and
// pg_terminate_backend (end the session, rolling back its transaction); false when no
// session has that pid.
func (s *Server) signal(pid uint32, terminate bool) bool {
	s.mu.Lock()
	c := s.conns[pid]
	s.mu.Unlock()
	if c == nil {
		return false
	}
	if terminate {
		c.stop()
	}
	c.cancelStatement()
	return true
}

// fatal writes a FATAL ErrorResponse directly to w (startup phase or shutdown).
func fatal(w io.Writer, e *pgerr.Error) {
	e2 := *e
	e2.Severity = "FATAL"
	buf, err := errorResponse(&e2).Encode(nil)
	if err == nil {
		_, _ = w.Write(buf)
	}
}

func errorResponse(e *pgerr.Error) *pgproto3.ErrorResponse {
	sev := e.Severity
	if sev == "" {
		sev = "ERROR"
	}
	return &pgproto3.ErrorResponse{Severity: sev, SeverityUnlocalized: sev, Code: e.Code, Message: e.Message,
		Detail: e.Detail, Hint: e.Hint, Position: e.Position}
}

func noticeResponse(e *pgerr.Error) *pgproto3.NoticeResponse {
	return (*pgproto3.NoticeResponse)(errorResponse(e))
}
