package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/sql"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// conn is one client connection.
type conn struct {
	srv *Server
	nc  net.Conn
	be  *pgproto3.Backend
	// stamp and fr give each message the kernel's receive time (recvtime.go); nil where
	// the socket cannot (statements are then timed from their start).
	stamp  *stampedConn
	fr     *framer
	pid    uint32
	secret [4]byte
	sess   *sql.Session
	user   string
	repl   string // replicationMode of the startup packet: "", "physical" or "database"

	mu       sync.Mutex
	busy     bool               // a message is being processed
	stopping bool               // Shutdown asked: end after the current message
	cancelFn context.CancelFunc // the running statement's, nil when none
	base     context.Context
	baseStop context.CancelFunc
	// stmtCtx is the statements' context, derived from base and kept from one statement
	// to the next until a CancelRequest cancels it (statementContext); stmtCancel cancels it.
	stmtCtx    context.Context
	stmtCancel context.CancelFunc
	act        sql.Activity // what pg_stat_activity shows of this session, guarded by mu

	stmts   map[string]*sql.Statement
	portals map[string]*portal
	// skipToSync: an extended-protocol message failed; everything up to Sync is skipped.
	skipToSync bool
}

// portal is a bound statement, with its result once executed.
type portal struct {
	stmt    *sql.Statement
	params  []any
	formats []int16 // result column formats, one per column
	res     *sql.Result
	pos     int
}

func (c *conn) serve() {
	c.base, c.baseStop = context.WithCancel(context.Background())
	defer c.baseStop()
	defer func() { _ = c.nc.Close() }()
	defer c.srv.unregister(c)
	c.stampReads()
	if err := c.startup(); err != nil {
		if !errors.Is(err, io.EOF) {
			c.srv.cfg.Logf("connection from %s: startup: %v", c.nc.RemoteAddr(), err)
		}
		return
	}
	defer c.sess.Close()
	if c.repl != "" {
		c.serveReplication()
		return
	}
	c.loop()
}

// stampReads reads the connection through recvmsg with the kernel's receive times, when
// the socket allows it; the server logs, the first time each way, how statements are timed.
func (c *conn) stampReads() {
	sc, err := newStampedConn(c.nc)
	if err != nil {
		c.srv.unstampedOnce.Do(func() {
			c.srv.cfg.Logf("statement latency is timed from each statement's start, not from its message's arrival: %v", err)
		})
		return
	}
	c.stamp, c.nc = sc, sc
	c.srv.stampedOnce.Do(func() {
		c.srv.cfg.Logf("statement latency is timed from the kernel's receive time of each statement's message (SO_TIMESTAMPNS)")
	})
}

// reader is what pgproto3 reads messages from: a framer over c.nc when reads are stamped.
func (c *conn) reader() io.Reader {
	if c.stamp == nil {
		return c.nc
	}
	c.fr = newFramer(c.nc, c.stamp)
	return c.fr
}

// stop asks the connection to end: now if idle, else after its current message.
func (c *conn) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopping = true
	if !c.busy {
		fatal(c.nc, pgerr.New(pgerr.AdminShutdown, "terminating connection due to administrator command"))
		_ = c.nc.Close()
	}
}

// kill cancels the running statement and closes the connection.
func (c *conn) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.baseStop != nil {
		c.baseStop()
	}
	_ = c.nc.Close()
}

func (c *conn) cancelStatement() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancelFn != nil {
		c.cancelFn()
	}
}

// startup runs the startup phase up to the first ReadyForQuery.
func (c *conn) startup() error {
	_ = c.nc.SetDeadline(time.Now().Add(startupTimeout))
	c.be = pgproto3.NewBackend(c.reader(), c.nc)
	c.be.SetMaxBodyLen(MaxMessageBytes)
	tlsDone := false
	var sm *pgproto3.StartupMessage
	for sm == nil {
		msg, err := c.be.ReceiveStartupMessage()
		if err != nil {
			return fmt.Errorf("startup message: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.SSLRequest:
			if tlsDone || c.srv.cfg.TLS == nil {
				if _, err := c.nc.Write([]byte{'N'}); err != nil {
					return err
				}
				continue
			}
			// Bytes that came with the request would be read as if TLS had protected them
			// (the class of PostgreSQL's CVE-2021-23214): refuse them, as PostgreSQL does.
			if c.fr != nil && c.fr.buffered() > 0 {
				return errors.New("received unencrypted data after the SSL request")
			}
			if _, err := c.nc.Write([]byte{'S'}); err != nil {
				return err
			}
			tc := tls.Server(c.nc, c.srv.cfg.TLS)
			if err := tc.Handshake(); err != nil {
				return fmt.Errorf("TLS handshake: %w", err)
			}
			c.nc, tlsDone = tc, true
			c.be = pgproto3.NewBackend(c.reader(), c.nc)
			c.be.SetMaxBodyLen(MaxMessageBytes)
		case *pgproto3.GSSEncRequest:
			if _, err := c.nc.Write([]byte{'N'}); err != nil {
				return err
			}
		case *pgproto3.CancelRequest:
			c.srv.cancel(m)
			return io.EOF
		case *pgproto3.StartupMessage:
			sm = m
			if c.fr != nil {
				c.fr.typed = true // the messages after it start with a type byte
			}
		default:
			return fmt.Errorf("unexpected startup message %T", msg)
		}
	}
	user := sm.Parameters["user"]
	if user == "" {
		fatal(c.nc, pgerr.New(pgerr.InvalidAuthorization, "no PostgreSQL user name specified in startup packet"))
		return io.EOF
	}
	c.user = user
	repl := replicationMode(sm.Parameters["replication"])
	if repl != "" && c.srv.cfg.Replication == nil {
		fatal(c.nc, pgerr.Unsupported("replication connections"))
		return io.EOF
	}
	db := sm.Parameters["database"]
	if db == "" || repl == "physical" {
		db = user // a physical replication connection names no database
	}
	if repl != "physical" && db != c.srv.cfg.Database {
		fatal(c.nc, pgerr.New(pgerr.InvalidCatalogName, "database \"%s\" does not exist", db))
		return io.EOF
	}
	if perr := c.srv.register(c); perr != nil {
		fatal(c.nc, perr)
		return io.EOF
	}
	if err := c.authenticate(); err != nil {
		return err
	}
	if repl != "" && c.srv.cfg.Auth != AuthTrust && !c.srv.cfg.Users[user].Replication {
		fatal(c.nc, pgerr.New("42501", "must be superuser or replication role to start walsender"))
		return io.EOF
	}
	c.repl = repl
	startup := map[string]string{}
	for k, v := range sm.Parameters {
		startup[k] = v
	}
	c.sess = sql.NewSession(sql.Config{DB: c.srv.cfg.DB, PID: c.pid, User: user, Database: db,
		Startup: startup, MaxConnections: c.srv.cfg.MaxConnections, Activity: c.srv.activity,
		Vacuums: c.srv.vacuums, Signal: c.srv.signal, Latency: c.srv.latency,
		Views: c.srv.cfg.Views})
	c.sess.SetCopySource(c)
	app, _ := c.sess.Setting("application_name")
	c.mu.Lock()
	c.act = sql.Activity{PID: int64(c.pid), Database: db, User: user, AppName: app, State: "idle",
		ClientAddr: clientAddr(c.nc.RemoteAddr()), BackendStart: time.Now()}
	c.mu.Unlock()
	c.be.Send(&pgproto3.AuthenticationOk{})
	for _, r := range c.sess.ParameterReports() {
		c.be.Send(&pgproto3.ParameterStatus{Name: r.Name, Value: r.Value})
	}
	c.be.Send(&pgproto3.BackendKeyData{ProcessID: c.pid, SecretKey: c.secret[:]})
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if err := c.be.Flush(); err != nil {
		return err
	}
	c.stmts, c.portals = map[string]*sql.Statement{}, map[string]*portal{}
	return c.nc.SetDeadline(time.Time{})
}

// authenticate runs SCRAM-SHA-256 (or nothing, under trust).
func (c *conn) authenticate() error {
	if c.srv.cfg.Auth == AuthTrust {
		return nil
	}
	failed := func() error {
		fatal(c.nc, pgerr.New(pgerr.InvalidPassword, "password authentication failed for user \"%s\"", c.user))
		return io.EOF
	}
	conv, err := c.srv.cfg.Users.NewConversation(c.user)
	if err != nil {
		return err
	}
	c.be.Send(&pgproto3.AuthenticationSASL{AuthMechanisms: []string{"SCRAM-SHA-256"}})
	if err := c.be.Flush(); err != nil {
		return err
	}
	if err := c.be.SetAuthType(pgproto3.AuthTypeSASL); err != nil {
		return err
	}
	msg, err := c.be.Receive()
	if err != nil {
		return fmt.Errorf("SASL initial response: %w", err)
	}
	init, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok || init.AuthMechanism != "SCRAM-SHA-256" {
		fatal(c.nc, pgerr.New(pgerr.ProtocolViolation, "expected SASL response for SCRAM-SHA-256"))
		return io.EOF
	}
	out, err := conv.Step(init.Data)
	if err != nil {
		return failed()
	}
	c.be.Send(&pgproto3.AuthenticationSASLContinue{Data: out})
	if err := c.be.Flush(); err != nil {
		return err
	}
	if err := c.be.SetAuthType(pgproto3.AuthTypeSASLContinue); err != nil {
		return err
	}
	msg, err = c.be.Receive()
	if err != nil {
		return fmt.Errorf("SASL response: %w", err)
	}
	resp, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		fatal(c.nc, pgerr.New(pgerr.ProtocolViolation, "expected SASL response"))
		return io.EOF
	}
	final, err := conv.Step(resp.Data)
	if err != nil || !conv.Valid(c.srv.cfg.Users, c.user) {
		return failed()
	}
	c.be.Send(&pgproto3.AuthenticationSASLFinal{Data: final})
	return nil
}

// loop reads and answers messages until Terminate, a broken connection or Shutdown.
func (c *conn) loop() {
	for {
		c.mu.Lock()
		if c.stopping {
			c.mu.Unlock()
			fatal(c.nc, pgerr.New(pgerr.AdminShutdown, "terminating connection due to administrator command"))
			return
		}
		c.busy = false
		c.mu.Unlock()
		msg, err := c.be.Receive()
		c.mu.Lock()
		c.busy = true
		stopping := c.stopping
		c.mu.Unlock()
		if err != nil || stopping {
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !stopping {
				c.srv.cfg.Logf("session %d: read: %v", c.pid, err)
				if isProtocolError(err) {
					fatal(c.nc, pgerr.New(pgerr.ProtocolViolation, "invalid frontend message: %v", err))
				}
			}
			return
		}
		if _, ok := msg.(*pgproto3.Terminate); ok {
			return
		}
		if c.fr != nil {
			c.sess.SetReceived(c.fr.received())
		}
		if err := c.handle(msg); err != nil {
			c.srv.cfg.Logf("session %d: %v", c.pid, err)
			return
		}
	}
}

func isProtocolError(err error) bool {
	var ne net.Error
	return !errors.As(err, &ne) && !errors.Is(err, io.ErrUnexpectedEOF)
}

// handle answers one message; an error ends the connection.
func (c *conn) handle(msg pgproto3.FrontendMessage) error {
	if c.skipToSync {
		if _, ok := msg.(*pgproto3.Sync); !ok {
			return nil
		}
	}
	switch m := msg.(type) {
	case *pgproto3.Query:
		c.simpleQuery(m.String)
		c.readyForQuery()
		return c.be.Flush()
	case *pgproto3.Parse:
		c.extended(c.parse(m))
	case *pgproto3.Bind:
		c.extended(c.bind(m))
	case *pgproto3.Describe:
		c.extended(c.describe(m))
	case *pgproto3.Execute:
		c.extended(c.execute(m))
	case *pgproto3.Close:
		if m.ObjectType == 'S' {
			delete(c.stmts, m.Name)
		} else {
			delete(c.portals, m.Name)
		}
		c.be.Send(&pgproto3.CloseComplete{})
	case *pgproto3.Sync:
		if !c.skipToSync {
			if err := c.sess.EndImplicit(); err != nil {
				c.sendError(err)
			}
		}
		c.skipToSync = false
		delete(c.portals, "")
		c.readyForQuery()
		return c.be.Flush()
	case *pgproto3.Flush:
		return c.be.Flush()
	case *pgproto3.CopyData, *pgproto3.CopyDone, *pgproto3.CopyFail:
		// Not in COPY: PostgreSQL ignores these outside a COPY too.
		return nil
	default:
		fatal(c.nc, pgerr.New(pgerr.ProtocolViolation, "unexpected message type %T", msg))
		return fmt.Errorf("unexpected message %T", msg)
	}
	return nil
}

// extended records an extended-protocol failure: the error is sent and every message up
// to Sync is skipped.
func (c *conn) extended(err error) {
	if err == nil {
		return
	}
	c.sess.Abort()
	c.sendError(err)
	c.skipToSync = true
}

func (c *conn) sendError(err error) {
	e := pgerr.As(err)
	if e.Code == pgerr.InternalError {
		c.srv.cfg.Logf("session %d: internal error: %v", c.pid, err)
	}
	c.be.Send(errorResponse(e))
}

// running records that a query starts (pg_stat_activity's state active).
func (c *conn) running(query string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.act.State, c.act.Query, c.act.QueryStart = "active", query, now
	if c.act.XactStart.IsZero() {
		c.act.XactStart = now
	}
}

func (c *conn) readyForQuery() {
	app, _ := c.sess.Setting("application_name")
	c.mu.Lock()
	c.act.AppName = app
	switch c.sess.TxStatus() {
	case 'T':
		c.act.State = "idle in transaction"
	case 'E':
		c.act.State = "idle in transaction (aborted)"
	default:
		c.act.State, c.act.XactStart = "idle", time.Time{}
	}
	c.mu.Unlock()
	for _, r := range c.sess.ChangedReports() {
		c.be.Send(&pgproto3.ParameterStatus{Name: r.Name, Value: r.Value})
	}
	c.be.Send(&pgproto3.ReadyForQuery{TxStatus: c.sess.TxStatus()})
}

// statementContext returns the context of a statement about to run, canceled by a
// CancelRequest while the statement runs; done must be called after. A context that no
// CancelRequest reached serves the next statement too (making one per statement costs
// three allocations and a registration with base, on every Execute); a canceled one is
// replaced.
func (c *conn) statementContext() (context.Context, func()) {
	if c.stmtCtx == nil || c.stmtCtx.Err() != nil {
		c.stmtCtx, c.stmtCancel = context.WithCancel(c.base)
	}
	c.mu.Lock()
	c.cancelFn = c.stmtCancel
	c.mu.Unlock()
	return c.stmtCtx, c.endStatement
}

// endStatement ends what statementContext began: a CancelRequest arriving later finds no
// statement to cancel.
func (c *conn) endStatement() {
	c.mu.Lock()
	c.cancelFn = nil
	c.mu.Unlock()
}

func (c *conn) simpleQuery(q string) {
	c.running(q)
	ctx, done := c.statementContext()
	defer done()
	err := c.sess.Query(ctx, q, func(res *sql.Result) error {
		for _, n := range res.Notices {
			c.be.Send(noticeResponse(n))
		}
		if res.Tag == "" && res.Columns == nil {
			c.be.Send(&pgproto3.EmptyQueryResponse{})
			return nil
		}
		if res.Columns != nil {
			c.be.Send(rowDescription(res.Columns, nil))
		}
		if err := c.sendRows(res, nil, 0, len(res.Rows)); err != nil {
			return err
		}
		c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(res.Tag)})
		return nil
	})
	if err != nil {
		c.sendError(err)
	}
}

func rowDescription(cols []sql.Column, formats []int16) *pgproto3.RowDescription {
	rd := &pgproto3.RowDescription{Fields: make([]pgproto3.FieldDescription, len(cols))}
	for i, col := range cols {
		f := int16(0)
		if formats != nil {
			f = formats[i]
		}
		rd.Fields[i] = pgproto3.FieldDescription{Name: []byte(col.Name), DataTypeOID: col.Type.OID,
			DataTypeSize: col.Type.Size, TypeModifier: -1, Format: f}
	}
	return rd
}

func (c *conn) sendRows(res *sql.Result, formats []int16, from, to int) error {
	for _, r := range res.Rows[from:to] {
		vals := make([][]byte, len(r))
		for i, v := range r {
			f := int16(0)
			if formats != nil {
				f = formats[i]
			}
			b, err := types.Format(res.Columns[i].Type, f, v)
			if err != nil {
				return err
			}
			vals[i] = b
		}
		c.be.Send(&pgproto3.DataRow{Values: vals})
	}
	return nil
}

func (c *conn) parse(m *pgproto3.Parse) error {
	if m.Name != "" {
		if _, exists := c.stmts[m.Name]; exists {
			return pgerr.New(pgerr.DuplicatePreparedStatement, "prepared statement \"%s\" already exists", m.Name)
		}
	}
	st, err := c.sess.Prepare(m.Query, m.ParameterOIDs)
	if err != nil {
		return err
	}
	c.stmts[m.Name] = st
	c.be.Send(&pgproto3.ParseComplete{})
	return nil
}

// formatsFor expands a format-code list (none = text, one = for all, else one each).
func formatsFor(codes []int16, n int) ([]int16, error) {
	out := make([]int16, n)
	switch len(codes) {
	case 0:
	case 1:
		for i := range out {
			out[i] = codes[0]
		}
	default:
		if len(codes) != n {
			return nil, pgerr.New(pgerr.ProtocolViolation, "bind message has %d format codes for %d values", len(codes), n)
		}
		copy(out, codes)
	}
	for _, f := range out {
		if f != 0 && f != 1 {
			return nil, pgerr.New(pgerr.ProtocolViolation, "unsupported format code: %d", f)
		}
	}
	return out, nil
}

func (c *conn) bind(m *pgproto3.Bind) error {
	st, ok := c.stmts[m.PreparedStatement]
	if !ok {
		return pgerr.New(pgerr.InvalidPreparedStatement, "prepared statement \"%s\" does not exist", m.PreparedStatement)
	}
	if len(m.Parameters) != len(st.ParamTypes) {
		return pgerr.New(pgerr.ProtocolViolation, "bind message supplies %d parameters, but prepared statement \"%s\" requires %d", len(m.Parameters), m.PreparedStatement, len(st.ParamTypes))
	}
	pf, err := formatsFor(m.ParameterFormatCodes, len(m.Parameters))
	if err != nil {
		return err
	}
	params := make([]any, len(m.Parameters))
	for i, b := range m.Parameters {
		v, err := types.Parse(st.ParamTypes[i], pf[i], b)
		if err != nil {
			return err
		}
		params[i] = v
	}
	rf, err := formatsFor(m.ResultFormatCodes, len(st.Columns))
	if err != nil {
		return err
	}
	if m.DestinationPortal != "" {
		if _, exists := c.portals[m.DestinationPortal]; exists {
			return pgerr.New("42P03", "cursor \"%s\" already exists", m.DestinationPortal)
		}
	}
	c.portals[m.DestinationPortal] = &portal{stmt: st, params: params, formats: rf}
	c.be.Send(&pgproto3.BindComplete{})
	return nil
}

func (c *conn) describe(m *pgproto3.Describe) error {
	if m.ObjectType == 'S' {
		st, ok := c.stmts[m.Name]
		if !ok {
			return pgerr.New(pgerr.InvalidPreparedStatement, "prepared statement \"%s\" does not exist", m.Name)
		}
		oids := make([]uint32, len(st.ParamTypes))
		for i, t := range st.ParamTypes {
			oids[i] = t.OID
		}
		c.be.Send(&pgproto3.ParameterDescription{ParameterOIDs: oids})
		if st.Columns == nil {
			c.be.Send(&pgproto3.NoData{})
		} else {
			c.be.Send(rowDescription(st.Columns, nil))
		}
		return nil
	}
	p, ok := c.portals[m.Name]
	if !ok {
		return pgerr.New(pgerr.InvalidCursorName, "portal \"%s\" does not exist", m.Name)
	}
	if p.stmt.Columns == nil {
		c.be.Send(&pgproto3.NoData{})
	} else {
		c.be.Send(rowDescription(p.stmt.Columns, p.formats))
	}
	return nil
}

func (c *conn) execute(m *pgproto3.Execute) error {
	p, ok := c.portals[m.Portal]
	if !ok {
		return pgerr.New(pgerr.InvalidCursorName, "portal \"%s\" does not exist", m.Portal)
	}
	if p.stmt.Empty() {
		c.be.Send(&pgproto3.EmptyQueryResponse{})
		return nil
	}
	if p.res == nil {
		c.running(p.stmt.Query)
		ctx, done := c.statementContext()
		res, err := c.sess.Execute(ctx, p.stmt, p.params)
		done()
		if err != nil {
			return err
		}
		for _, n := range res.Notices {
			c.be.Send(noticeResponse(n))
		}
		// The result's columns may differ from the prepared ones if the catalog changed.
		if len(res.Columns) != len(p.stmt.Columns) {
			return pgerr.New("0A000", "cached plan must not change result type")
		}
		p.res = res
	}
	end := len(p.res.Rows)
	if m.MaxRows > 0 && p.pos+int(m.MaxRows) < end {
		end = p.pos + int(m.MaxRows)
	}
	if err := c.sendRows(p.res, p.formats, p.pos, end); err != nil {
		return err
	}
	p.pos = end
	if p.pos < len(p.res.Rows) {
		c.be.Send(&pgproto3.PortalSuspended{})
		return nil
	}
	c.be.Send(&pgproto3.CommandComplete{CommandTag: []byte(p.res.Tag)})
	return nil
}

// Start answers a COPY FROM STDIN with CopyInResponse (text format).
func (c *conn) Start(ncols int) error {
	c.be.Send(&pgproto3.CopyInResponse{OverallFormat: 0, ColumnFormatCodes: make([]uint16, ncols)})
	return c.be.Flush()
}

// Next returns the next CopyData payload, io.EOF at CopyDone.
func (c *conn) Next() ([]byte, error) {
	for {
		msg, err := c.be.Receive()
		if err != nil {
			return nil, fmt.Errorf("COPY data: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			return m.Data, nil
		case *pgproto3.CopyDone:
			return nil, io.EOF
		case *pgproto3.CopyFail:
			return nil, pgerr.New(pgerr.QueryCanceled, "COPY from stdin failed: %s", m.Message)
		case *pgproto3.Flush, *pgproto3.Sync:
			// Allowed during COPY and ignored, as PostgreSQL does.
		default:
			return nil, pgerr.New(pgerr.ProtocolViolation, "unexpected message type %T during COPY from stdin", msg)
		}
	}
}

// Drain discards the rest of a failed COPY's stream.
func (c *conn) Drain() error {
	for {
		_, err := c.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		var pe *pgerr.Error
		if errors.As(err, &pe) {
			return nil // CopyFail or a wrong message: the stream is over either way
		}
		if err != nil {
			return err
		}
	}
}
