// Package sql is the server's SQL layer: a session's statements, parsed with PostgreSQL's
// own grammar (pg_query_go), planned against the engine's catalog and executed in engine
// transactions with PostgreSQL's transaction-block rules (implicit transactions, aborted
// blocks, autocommit). Package wire turns its results into protocol messages.
//
// A prepared statement keeps its parse tree and parameter types and is planned against the
// catalog of the moment it runs; a SELECT keeps its plan while the engine's catalog is
// unchanged (engine.DB.CatalogGeneration), every other statement is planned again at each
// execution.
package sql

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/server/latency"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// Column is one column of a result.
type Column struct {
	Name string
	Type *types.T
}

// Result is the outcome of one statement.
type Result struct {
	Columns []Column // nil for a statement that returns no rows
	Rows    [][]any
	Tag     string         // CommandComplete tag ("SELECT 3", "INSERT 0 1", ...)
	Notices []*pgerr.Error // notices and warnings raised, in order
}

// Statement is a parsed statement (a prepared statement, or one statement of a query).
type Statement struct {
	Query      string
	raw        *pg.RawStmt // nil for an empty query
	ParamTypes []*types.T  // inferred where the client gave none
	Columns    []Column    // nil when it returns no rows
	// cached is the plan of a SELECT's last execution, made under the catalog generation
	// cachedGen; cachedTables are the tables it named (the session's planned list).
	cached       *plan
	cachedGen    uint64
	cachedTables []string
}

// Empty reports whether the statement is an empty query.
func (st *Statement) Empty() bool { return st.raw == nil }

type txState int

const (
	txIdle   txState = iota // no transaction block (autocommit or an implicit transaction)
	txBlock                 // inside BEGIN ... COMMIT
	txFailed                // inside a block that failed: only ROLLBACK/COMMIT until it ends
)

// Config is what a session is created with.
type Config struct {
	DB       *engine.DB
	PID      uint32
	User     string
	Database string
	// Startup holds the startup packet's parameters (application_name, ...).
	Startup map[string]string
	// MaxConnections is reported as the max_connections setting.
	MaxConnections int
	// Activity lists every session for pg_stat_activity (nil: the view is empty).
	Activity func() []Activity
	// Vacuums is the server's registry of running VACUUMs, shared by its sessions (nil:
	// this session's VACUUMs are not shown in the progress views).
	Vacuums *Vacuums
	// Latency records foreground statement latency (nil: not recorded).
	Latency *latency.Recorder
	// Signal cancels the running statement of session pid (pg_cancel_backend) or ends
	// the session (terminate: pg_terminate_backend); false when no such session exists.
	Signal func(pid uint32, terminate bool) bool
	// Views are system views other packages provide, by name (extviews.go).
	Views map[string]View
}

// Session is one client connection's SQL state. It is not safe for concurrent use.
type Session struct {
	db       *engine.DB
	pid      uint32
	user     string
	settings *settings

	tx       *engine.Tx
	txCancel context.CancelFunc // ends tx's waits (a canceled statement cancels them)
	txFresh  bool               // tx's snapshot was taken for the statement about to run
	state    txState
	implicit bool // tx was opened implicitly (autocommit, a multi-statement Query, extended batch)
	// implicitWrite is set when a foreground write statement ran in the implicit
	// transaction: its commit (the WAL flush a write load waits on) is timed too.
	implicitWrite bool
	txTime        time.Time
	copy          CopySource // the connection's COPY FROM STDIN stream (nil: none)
	activity      func() []Activity
	vacuums       *Vacuums
	latency       *latency.Recorder
	received      time.Time // SetReceived's, until the first statement of its message runs
	signal        func(uint32, bool) bool
	database      string
	// planned are the tables the statement being planned names; used those the open
	// transaction (usedTx) has used.
	planned []string
	used    map[string]bool
	usedTx  *engine.Tx
	// pending are warnings raised while a statement's expressions ran (pg_cancel_backend of
	// an unknown process); run adds them to the statement's result.
	pending []*pgerr.Error
	views   map[string]View
}

// NewSession returns a session in autocommit mode with the startup parameters applied.
func NewSession(c Config) *Session {
	over := map[string]string{"session_authorization": c.User}
	if c.MaxConnections > 0 {
		over["max_connections"] = strconv.Itoa(c.MaxConnections)
	}
	s := &Session{db: c.DB, pid: c.PID, user: c.User, settings: newSettings(over), activity: c.Activity,
		vacuums: c.Vacuums, signal: c.Signal, database: c.Database, latency: c.Latency, views: c.Views}
	for k, v := range c.Startup {
		switch k {
		case "user", "database", "options", "replication":
			continue
		}
		// A startup parameter is the session's default (RESET returns to it), as in
		// PostgreSQL. Unknown or unchangeable ones are ignored.
		if s.settings.set(k, v, false) == nil {
			s.settings.defaults[strings.ToLower(k)] = s.settings.values[strings.ToLower(k)]
		}
	}
	s.settings.changed = map[string]bool{}
	return s
}

// ParameterReports returns every parameter the server reports at startup.
func (s *Session) ParameterReports() []Report { return s.settings.reports() }

// ChangedReports returns the reported parameters changed since the last call (SET).
func (s *Session) ChangedReports() []Report { return s.settings.takeChanged() }

// Setting returns a parameter's current value.
func (s *Session) Setting(name string) (string, bool) { return s.settings.get(name) }

// TxStatus is ReadyForQuery's transaction status: 'I' idle, 'T' in a block, 'E' failed.
func (s *Session) TxStatus() byte {
	switch s.state {
	case txBlock:
		return 'T'
	case txFailed:
		return 'E'
	}
	return 'I'
}

func (s *Session) txStart() time.Time { return s.txTime }

// Parse parses query into its statements (42601 with the position for a syntax error).
func Parse(query string) ([]*pg.RawStmt, error) {
	res, err := pg.Parse(query)
	if err != nil {
		var pe *parser.Error
		if errors.As(err, &pe) {
			e := pgerr.New(pgerr.SyntaxError, "%s", pe.Message)
			if pe.Cursorpos > 0 {
				e.Position = int32(pe.Cursorpos)
			}
			return nil, e
		}
		return nil, pgerr.Wrap(err, pgerr.SyntaxError, "%s", err.Error())
	}
	return res.Stmts, nil
}

// Prepare parses and plans one statement for the extended protocol. paramOIDs are the
// client's parameter types (0 = infer from context).
func (s *Session) Prepare(query string, paramOIDs []uint32) (*Statement, error) {
	stmts, err := Parse(query)
	if err != nil {
		return nil, err
	}
	if len(stmts) > 1 {
		return nil, pgerr.New(pgerr.SyntaxError, "cannot insert multiple commands into a prepared statement")
	}
	st := &Statement{Query: query}
	for _, oid := range paramOIDs {
		if oid == 0 {
			st.ParamTypes = append(st.ParamTypes, nil)
			continue
		}
		t, ok := types.ByOID(oid)
		if !ok {
			return nil, pgerr.New(pgerr.FeatureNotSupported, "parameters of type OID %d are not supported by engine-server", oid)
		}
		st.ParamTypes = append(st.ParamTypes, t)
	}
	if len(stmts) == 0 {
		return st, nil
	}
	st.raw = stmts[0]
	if s.state == txFailed && !endsBlock(st.raw.Stmt) {
		return nil, errAborted()
	}
	if _, ok := st.raw.Stmt.Node.(*pg.Node_TransactionStmt); ok {
		return st, nil // BEGIN, COMMIT, ...: no parameters, no rows
	}
	p, err := s.plan(st.raw.Stmt, &st.ParamTypes)
	if err != nil {
		return nil, err
	}
	for i, t := range st.ParamTypes {
		if t == nil || t == types.Unknown {
			st.ParamTypes[i] = types.Text
		}
	}
	st.Columns = p.cols
	return st, nil
}

func errAborted() *pgerr.Error {
	return pgerr.New(pgerr.InFailedTransaction, "current transaction is aborted, commands ignored until end of transaction block")
}

// endsBlock reports whether n is COMMIT or ROLLBACK (allowed in an aborted block).
func endsBlock(n *pg.Node) bool {
	t, ok := n.Node.(*pg.Node_TransactionStmt)
	if !ok {
		return false
	}
	switch t.TransactionStmt.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT, pg.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		return true
	}
	return false
}

// Execute runs a prepared statement with bound parameter values (already decoded to the
// statement's ParamTypes). Outside a transaction block it runs in the implicit transaction,
// which EndImplicit (at Sync) commits.
func (s *Session) Execute(ctx context.Context, st *Statement, params []any) (*Result, error) {
	if st.raw == nil {
		return &Result{}, nil
	}
	ptypes := append([]*types.T(nil), st.ParamTypes...)
	return s.run(ctx, st, st.raw.Stmt, ptypes, params)
}

// Query runs a simple-protocol query: every statement in turn, all in one implicit
// transaction unless the query opens a block itself. emit receives each statement's result;
// the first error stops the query (the caller reports it) after the implicit transaction is
// rolled back. An empty query emits one Result with an empty Tag.
func (s *Session) Query(ctx context.Context, query string, emit func(*Result) error) error {
	stmts, err := Parse(query)
	if err != nil {
		s.fail()
		return err
	}
	if len(stmts) == 0 {
		return emit(&Result{})
	}
	for _, raw := range stmts {
		res, err := s.run(ctx, nil, raw.Stmt, nil, nil)
		if err != nil {
			return err
		}
		if err := emit(res); err != nil {
			return err
		}
	}
	return s.EndImplicit()
}

// EndImplicit commits the implicit transaction, if one is open (end of a simple Query, or
// Sync in the extended protocol).
//
// The commit of an implicit transaction in which a foreground statement wrote is recorded
// as a "commit" in the latency histograms, as an explicit COMMIT is: an autocommit write
// load waits on it (the WAL flush), so the foreground's latency must include it.
func (s *Session) EndImplicit() error {
	timed := s.implicitWrite && s.latency != nil
	s.implicitWrite = false
	if !s.implicit || s.tx == nil {
		s.implicit = false
		return nil
	}
	tx := s.tx
	s.tx, s.implicit = nil, false
	defer s.txCancel()
	start := time.Now()
	if err := tx.Commit(); err != nil {
		return engineError(err)
	}
	if timed {
		s.latency.Observe("commit", time.Since(start))
	}
	return nil
}

// Abort ends whatever transaction is open after an error: an implicit one is rolled back, a
// block becomes failed (25P02 until ROLLBACK). The wire layer calls it for protocol errors.
func (s *Session) Abort() { s.fail() }

// fail records a statement's failure.
func (s *Session) fail() {
	if s.tx != nil {
		_ = s.tx.Rollback() // the transaction is discarded either way
		s.tx = nil
		s.txCancel()
	}
	if s.state == txBlock {
		s.state = txFailed
	}
	s.implicit, s.implicitWrite = false, false
}

// Close rolls back any open transaction (the connection ended).
func (s *Session) Close() {
	if s.tx != nil {
		_ = s.tx.Rollback() // nothing of an unfinished transaction may remain
		s.tx = nil
		s.txCancel()
	}
	s.state, s.implicit, s.implicitWrite = txIdle, false, false
}

// InTransaction reports whether a transaction (block or implicit) is open.
func (s *Session) InTransaction() bool { return s.tx != nil || s.state != txIdle }

// begin makes sure an engine transaction is open for the next statement.
func (s *Session) begin() error {
	if s.tx != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	tx, err := s.db.BeginTx(ctx)
	if err != nil {
		cancel()
		return engineError(err)
	}
	s.tx, s.txCancel, s.txFresh = tx, cancel, true
	s.txTime = time.Now().UTC()
	if s.state == txIdle {
		s.implicit = true
	}
	return nil
}

// SetReceived tells the session when the message it is about to handle reached the server
// (the kernel's receive time; zero when unknown): the first foreground statement the message
// runs is timed from then, so its latency includes the time the message waited to be read,
// which a client sees and a clock started by the session does not.
func (s *Session) SetReceived(t time.Time) { s.received = t }

// run plans and executes one statement under the transaction rules, and records its
// latency when it is foreground work. st is the prepared statement n belongs to (nil in a
// simple query), whose plan may be reused.
func (s *Session) run(ctx context.Context, st *Statement, n *pg.Node, ptypes []*types.T, params []any) (*Result, error) {
	received := s.received
	s.received = time.Time{} // a later statement of the same message counts from its own start
	if s.latency == nil {
		return s.runStatement(ctx, st, n, ptypes, params)
	}
	kind := statementKind(n)
	if kind == "" || s.maintenance() {
		return s.runStatement(ctx, st, n, ptypes, params)
	}
	start := time.Now()
	if !received.IsZero() && received.Before(start) {
		start = received
	}
	res, err := s.runStatement(ctx, st, n, ptypes, params)
	s.latency.Observe(kind, time.Since(start))
	if err == nil && s.implicit && writes(kind) {
		s.implicitWrite = true
	}
	return res, err
}

// writes reports whether statements of kind change data, so that an implicit transaction
// running one commits with a WAL flush.
func writes(kind string) bool {
	switch kind {
	case "insert", "update", "delete", "copy":
		return true
	}
	return false
}

// MaintenancePrefix starts the application_name of the runner's sessions: their statements
// are not foreground (decisions.md), nor is any VACUUM.
const MaintenancePrefix = "vacuum-runner"

// maintenance reports whether this session's statements are maintenance, not foreground.
func (s *Session) maintenance() bool {
	app, _ := s.settings.get("application_name")
	return strings.HasPrefix(app, MaintenancePrefix)
}

// statementKind is the latency histogram a statement counts in ("" for VACUUM, which is
// never foreground).
func statementKind(n *pg.Node) string {
	switch x := n.Node.(type) {
	case *pg.Node_SelectStmt:
		return "select"
	case *pg.Node_InsertStmt:
		return "insert"
	case *pg.Node_UpdateStmt:
		return "update"
	case *pg.Node_DeleteStmt:
		return "delete"
	case *pg.Node_CopyStmt:
		return "copy"
	case *pg.Node_VacuumStmt:
		return ""
	case *pg.Node_TransactionStmt:
		if x.TransactionStmt.Kind == pg.TransactionStmtKind_TRANS_STMT_COMMIT {
			return "commit"
		}
	}
	return "other"
}

func (s *Session) runStatement(ctx context.Context, st *Statement, n *pg.Node, ptypes []*types.T, params []any) (*Result, error) {
	if s.state == txFailed && !endsBlock(n) {
		return nil, errAborted()
	}
	if ts, ok := n.Node.(*pg.Node_TransactionStmt); ok {
		res, err := s.transaction(ts.TransactionStmt)
		if err != nil {
			s.fail()
		}
		return res, err
	}
	p, err := s.planFor(st, n, &ptypes)
	if err != nil {
		s.fail()
		return nil, err
	}
	if !p.noTx {
		if err := s.begin(); err != nil {
			s.fail()
			return nil, err
		}
		s.noteUses()
		if !s.txFresh {
			// READ COMMITTED: each statement sees what committed before it began.
			s.tx.NewSnapshot()
		}
		s.txFresh = false
	}
	if d := s.statementTimeout(); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, errStatementTimeout)
		defer cancel()
	}
	if s.tx != nil {
		// A canceled statement ends the transaction's row and key waits too (the
		// transaction then rolls back, as after any error).
		defer context.AfterFunc(ctx, s.txCancel)()
	}
	s.pending = nil
	res, err := p.run(&execCtx{ctx: ctx, sess: s, tx: s.tx, params: params})
	if err == nil && len(s.pending) > 0 {
		res.Notices = append(s.pending, res.Notices...)
	}
	s.pending = nil
	if err != nil {
		s.fail()
		return nil, s.contextError(ctx, err)
	}
	return res, nil
}

var errStatementTimeout = errors.New("statement timeout")

// planFor plans n, reusing the plan st (when not nil) keeps from its last execution while
// the catalog has not changed since it was made. Only a SELECT's plan is kept: it holds no
// state of an execution (rows, aggregates and bounds are the run's own), and what it read
// at planning time is the catalog only, so the generation tells when it is stale. The
// generation is read before planning: a catalog change during planning leaves the plan
// stamped older, and the next execution plans again.
func (s *Session) planFor(st *Statement, n *pg.Node, ptypes *[]*types.T) (*plan, error) {
	s.planned = s.planned[:0]
	_, isSelect := n.Node.(*pg.Node_SelectStmt)
	if st == nil || !isSelect {
		return s.plan(n, ptypes)
	}
	gen := s.db.CatalogGeneration()
	if st.cached != nil && st.cachedGen == gen {
		s.planned = append(s.planned, st.cachedTables...)
		return st.cached, nil
	}
	p, err := s.plan(n, ptypes)
	if err != nil {
		st.cached = nil
		return nil, err
	}
	st.cached, st.cachedGen, st.cachedTables = p, gen, slices.Clone(s.planned)
	return p, nil
}

func (s *Session) statementTimeout() time.Duration {
	v, _ := s.settings.get("statement_timeout")
	if v == "" || v == "0" {
		return 0
	}
	if ms, err := strconv.Atoi(v); err == nil {
		return time.Duration(ms) * time.Millisecond
	}
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	return 0
}

// contextError turns a canceled statement into 57014, as PostgreSQL reports it.
func (s *Session) contextError(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if errors.Is(context.Cause(ctx), errStatementTimeout) {
		return pgerr.New(pgerr.QueryCanceled, "canceling statement due to statement timeout")
	}
	return pgerr.New(pgerr.QueryCanceled, "canceling statement due to user request")
}

func (s *Session) transaction(t *pg.TransactionStmt) (*Result, error) {
	switch t.Kind {
	case pg.TransactionStmtKind_TRANS_STMT_BEGIN, pg.TransactionStmtKind_TRANS_STMT_START:
		res := &Result{Tag: "BEGIN"}
		if t.Kind == pg.TransactionStmtKind_TRANS_STMT_START {
			res.Tag = "START TRANSACTION"
		}
		if s.state != txIdle {
			res.Notices = append(res.Notices, warning(pgerr.ActiveTransaction, "there is already a transaction in progress"))
			return res, nil
		}
		if err := s.begin(); err != nil {
			return nil, err
		}
		s.state, s.implicit = txBlock, false
		return res, nil
	case pg.TransactionStmtKind_TRANS_STMT_COMMIT:
		switch s.state {
		case txFailed:
			s.Close()
			return &Result{Tag: "ROLLBACK"}, nil
		case txIdle:
			res := &Result{Tag: "COMMIT"}
			if !s.implicit {
				res.Notices = append(res.Notices, warning(pgerr.NoActiveTransaction, "there is no transaction in progress"))
			}
			return res, s.EndImplicit()
		}
		tx := s.tx
		s.tx, s.state = nil, txIdle
		if tx != nil {
			defer s.txCancel()
			if err := tx.Commit(); err != nil {
				return nil, engineError(err)
			}
		}
		return &Result{Tag: "COMMIT"}, nil
	case pg.TransactionStmtKind_TRANS_STMT_ROLLBACK:
		res := &Result{Tag: "ROLLBACK"}
		if s.state == txIdle && !s.implicit {
			res.Notices = append(res.Notices, warning(pgerr.NoActiveTransaction, "there is no transaction in progress"))
		}
		s.Close()
		return res, nil
	}
	return nil, pgerr.Unsupported(transactionKindName(t.Kind))
}

func transactionKindName(k pg.TransactionStmtKind) string {
	switch k {
	case pg.TransactionStmtKind_TRANS_STMT_SAVEPOINT:
		return "SAVEPOINT"
	case pg.TransactionStmtKind_TRANS_STMT_RELEASE:
		return "RELEASE SAVEPOINT"
	case pg.TransactionStmtKind_TRANS_STMT_ROLLBACK_TO:
		return "ROLLBACK TO SAVEPOINT"
	}
	return "two-phase commit (PREPARE TRANSACTION, COMMIT PREPARED)"
}

func warning(code, msg string) *pgerr.Error {
	e := pgerr.New(code, "%s", msg)
	e.Severity = "WARNING"
	return e
}

func notice(code, format string, args ...any) *pgerr.Error {
	e := pgerr.New(code, format, args...)
	e.Severity = "NOTICE"
	return e
}

// deadlockDetected is 40P01 for the engine's ErrDeadlock err, its DETAIL the engine's
// account of the cycle (each wait, with its table), as PostgreSQL's names the processes
// and locks of the cycle.
func deadlockDetected(err error) *pgerr.Error {
	e := pgerr.Wrap(err, pgerr.DeadlockDetected, "deadlock detected")
	e.Detail = strings.TrimSuffix(err.Error(), ": "+engine.ErrDeadlock.Error()) + "."
	return e
}

// engineError maps the engine's errors to SQLSTATEs.
func engineError(err error) error {
	var pe *pgerr.Error
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, engine.ErrDeadlock):
		return deadlockDetected(err)
	case errors.Is(err, engine.ErrConflict):
		return pgerr.Wrap(err, pgerr.SerializationFailure, "could not serialize access due to concurrent update")
	case errors.Is(err, engine.ErrNoSuchTable):
		return pgerr.Wrap(err, pgerr.UndefinedTable, "relation does not exist")
	case errors.Is(err, engine.ErrExists):
		return pgerr.Wrap(err, pgerr.DuplicateTable, "relation already exists")
	case errors.Is(err, engine.ErrKeyTooLong):
		return pgerr.Wrap(err, pgerr.ProgramLimitExceeded, "index row size exceeds the B-tree's maximum: %s", err.Error())
	case errors.Is(err, engine.ErrTupleTooLarge):
		return pgerr.Wrap(err, pgerr.ProgramLimitExceeded, "row is too big")
	case errors.Is(err, engine.ErrTableRewritten):
		return pgerr.Wrap(err, pgerr.SerializationFailure, "could not serialize access: the table was rewritten during the statement")
	case errors.Is(err, engine.ErrClosed):
		return pgerr.Wrap(err, pgerr.AdminShutdown, "terminating connection due to administrator command")
	case errors.Is(err, engine.ErrReadOnly):
		return pgerr.Wrap(err, pgerr.ReadOnlySQLTransaction, "cannot execute this statement in a read-only transaction (the server is a hot standby)")
	case errors.Is(err, engine.ErrStandbyConflict):
		return pgerr.Wrap(err, pgerr.SerializationFailure, "canceling statement due to conflict with recovery")
	case errors.Is(err, engine.ErrNeedsRecovery):
		return pgerr.Wrap(err, pgerr.IOError, "%s", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return pgerr.Wrap(err, pgerr.QueryCanceled, "canceling statement due to user request")
	}
	return pgerr.Wrap(err, pgerr.InternalError, "%s", err.Error())
}
