package sql

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/server/latency"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// Activity is one session as pg_stat_activity shows it; the wire layer reports it.
type Activity struct {
	PID          int64
	Database     string
	User         string
	AppName      string
	ClientAddr   string
	State        string // active, idle, idle in transaction, idle in transaction (aborted)
	Query        string // the running or last query
	BackendStart time.Time
	XactStart    time.Time // zero: no transaction
	QueryStart   time.Time // zero: none yet
}

// activityColumns are pg_stat_activity's columns this server fills, in PostgreSQL's order
// and with its types.
var activityColumns = []column{
	{name: "datname", t: types.Text},
	{name: "pid", t: types.Int4},
	{name: "usename", t: types.Text},
	{name: "application_name", t: types.Text},
	{name: "client_addr", t: types.Text},
	{name: "backend_start", t: types.Timestamptz},
	{name: "xact_start", t: types.Timestamptz},
	{name: "query_start", t: types.Timestamptz},
	{name: "state", t: types.Text},
	{name: "query", t: types.Text},
	{name: "backend_type", t: types.Text},
}

func orNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

// viewRows produces a system view's rows, each one value per column of the view, of the
// column's type as the session's expressions use them (int64 for integers, string for
// text, time.Time for timestamps, nil for NULL).
type viewRows func(*Session, *execCtx) ([][]any, error)

// systemViews are the views this server answers by name (also under pg_catalog), besides
// the Views another package provides (Config.Views, which take precedence).
var systemViews = map[string]struct {
	cols []column
	rows viewRows
}{
	"pg_stat_activity":            {activityColumns, (*Session).activityRows},
	"pg_stat_progress_vacuum":     {progressVacuumColumns, (*Session).progressVacuumRows},
	"pg_stat_progress_cluster":    {progressClusterColumns, (*Session).progressClusterRows},
	"vacuumops_statement_latency": {latencyColumns, (*Session).latencyRows},
	"pg_stat_user_tables":         {userTablesColumns, (*Session).userTablesRows},
	"pg_stat_all_tables":          {userTablesColumns, (*Session).userTablesRows},
}

// systemView returns the source of a system view this server answers (nil: none).
func (s *Session) systemView(rv *pg.RangeVar) *source {
	if rv.Schemaname != "" && rv.Schemaname != "pg_catalog" {
		return nil
	}
	alias := rv.Relname
	if rv.Alias != nil {
		alias = rv.Alias.Aliasname
	}
	if v, ok := s.views[rv.Relname]; ok {
		cols := make([]column, len(v.Columns))
		for i, c := range v.Columns {
			cols[i] = column{name: c.Name, t: c.Type}
		}
		return s.viewSource(alias, cols, func(*Session, *execCtx) ([][]any, error) { return v.Rows(), nil })
	}
	v, ok := systemViews[rv.Relname]
	if !ok {
		return nil
	}
	return s.viewSource(alias, v.cols, v.rows)
}

// viewSource is the one row emitter of every system view (and of pg_control_system() in
// FROM): a source whose columns are named for alias and whose rows, read when the query
// runs, are checked to have one value per column (XX000 otherwise: a view's bug, never a
// short row sent to the client).
func (s *Session) viewSource(alias string, cols []column, rows viewRows) *source {
	out := make([]column, len(cols))
	for i, c := range cols {
		c.table = alias
		out[i] = c
	}
	return &source{cols: out, rowsFn: func(x *execCtx, fn func([]any) error) error {
		rs, err := rows(s, x)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if len(r) != len(out) {
				return pgerr.New(pgerr.InternalError, "view %s: a row of %d values for %d columns", alias, len(r), len(out))
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		return nil
	}}
}

func (s *Session) activityRows(*execCtx) ([][]any, error) {
	if s.activity == nil {
		return nil, nil
	}
	var rows [][]any
	for _, a := range s.activity() {
		rows = append(rows, []any{a.Database, a.PID, a.User, a.AppName, nilIfEmpty(a.ClientAddr), orNull(a.BackendStart),
			orNull(a.XactStart), orNull(a.QueryStart), a.State, a.Query, "client backend"})
	}
	return rows, nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// relationSize is pg_relation_size of the table or index with the given OID: its main
// fork's blocks times the block size (NULL for an OID that names no table, as PostgreSQL
// returns for a dropped one). Index OIDs give NULL too (see docs/sql.md).
func (s *Session) relationSize(oid uint32) (any, error) {
	tables, err := s.db.Tables()
	if err != nil {
		return nil, engineError(err)
	}
	for _, t := range tables {
		if t.OID != oid {
			continue
		}
		n, err := s.db.TablePages(t.Name)
		if err != nil {
			return nil, engineError(err)
		}
		return n * page.Size, nil
	}
	return nil, nil
}

// controlSystemColumns are pg_control_system()'s columns, as PostgreSQL 15 returns them.
var controlSystemColumns = []column{
	{name: "pg_control_version", t: types.Int4},
	{name: "catalog_version_no", t: types.Int4},
	{name: "system_identifier", t: types.Int8},
	{name: "pg_control_last_modified", t: types.Timestamptz},
}

// controlSystem is pg_control_system() in FROM: one row with the data directory's system
// identifier (made at init, kept in the engine's control file), the engine's data format
// version as pg_control_version, 0 as catalog_version_no (the engine has no system
// catalog version) and the control file's modification time.
func (s *Session) controlSystem(rf *pg.RangeFunction, f *pg.FuncCall) (*source, error) {
	if len(f.Args) != 0 {
		return nil, pgerr.New(pgerr.UndefinedFunction, "function pg_control_system with %d arguments does not exist", len(f.Args)).WithPosition(f.Location + 1)
	}
	alias := "pg_control_system"
	if rf.Alias != nil {
		alias = rf.Alias.Aliasname
		if len(rf.Alias.Colnames) > 0 {
			return nil, pgerr.Unsupported("column aliases for pg_control_system()")
		}
	}
	return s.viewSource(alias, controlSystemColumns, func(*Session, *execCtx) ([][]any, error) {
		var modified any
		if fi, err := os.Stat(filepath.Join(s.db.Dir(), wal.ControlFileName)); err == nil {
			modified = fi.ModTime().UTC().Truncate(time.Second)
		}
		// The identifier is an unsigned 64-bit number; PostgreSQL shows it as bigint, so
		// one above 2^63 reads negative there too.
		return [][]any{{int64(engine.DataVersion), int64(0), int64(s.db.SystemID()), modified}}, nil
	}), nil
}

// latencyColumns are vacuumops_statement_latency's: per statement kind, then for all of them
// (kind all), the foreground statements of the last window_seconds and their latency
// percentiles in microseconds.
var latencyColumns = []column{
	{name: "kind", t: types.Text},
	{name: "window_seconds", t: types.Int4},
	{name: "count", t: types.Int8},
	{name: "p50_us", t: types.Int8},
	{name: "p90_us", t: types.Int8},
	{name: "p99_us", t: types.Int8},
	{name: "p999_us", t: types.Int8},
	{name: "max_us", t: types.Int8},
	{name: "mean_us", t: types.Int8},
}

func (s *Session) latencyRows(*execCtx) ([][]any, error) {
	if s.latency == nil {
		return nil, nil
	}
	secs := int64(latency.Window / time.Second)
	us := func(d time.Duration) int64 { return d.Microseconds() }
	var rows [][]any
	for _, st := range s.latency.Snapshot() {
		rows = append(rows, []any{st.Kind, secs, st.Count, us(st.P50), us(st.P90), us(st.P99), us(st.P999), us(st.Max), us(st.Mean)})
	}
	return rows, nil
}

// userTablesColumns are the pg_stat_user_tables columns this server fills, with
// PostgreSQL's names and types.
var userTablesColumns = []column{
	{name: "relid", t: types.Oid},
	{name: "schemaname", t: types.Text},
	{name: "relname", t: types.Text},
	{name: "n_live_tup", t: types.Int8},
	{name: "n_dead_tup", t: types.Int8},
	{name: "last_vacuum", t: types.Timestamptz},
	{name: "vacuum_count", t: types.Int8},
}

// userTablesRows are pg_stat_user_tables' rows: n_live_tup and n_dead_tup are exact, from a
// scan of every table classified against the vacuum horizon (the engine keeps no running
// counters), so reading the view costs a scan of the database (a read: it sets no hint bits,
// engine.DB.Stats); last_vacuum and
// vacuum_count count the VACUUMs finished since the server started.
func (s *Session) userTablesRows(x *execCtx) ([][]any, error) {
	tables, err := s.db.Tables()
	if err != nil {
		return nil, engineError(err)
	}
	stats, err := s.db.Stats(x.ctx)
	if err != nil {
		return nil, engineError(err)
	}
	byName := map[string]engine.TableStats{}
	for _, st := range stats {
		byName[st.Name] = st
	}
	var rows [][]any
	for _, t := range tables {
		st := byName[t.Name]
		v := s.vacuums.vacuumedOf(t.OID)
		rows = append(rows, []any{int64(t.OID), "public", t.Name, st.LiveTuples, st.DeadTuples + st.RecentlyDeadTuples,
			orNull(v.last), v.count})
	}
	return rows, nil
}

// regclass is to_regclass(name): the OID of the table or index name names (a bare or
// public-qualified name, quoted or not, folded to lower case as an identifier), NULL when
// there is none.
func (s *Session) regclass(name string) (any, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, nil
	}
	for i, p := range parts {
		if len(p) >= 2 && strings.HasPrefix(p, `"`) && strings.HasSuffix(p, `"`) {
			parts[i] = strings.ReplaceAll(p[1:len(p)-1], `""`, `"`)
		} else {
			parts[i] = strings.ToLower(p)
		}
	}
	if len(parts) == 2 && parts[0] != "public" {
		return nil, nil
	}
	rel := parts[len(parts)-1]
	tables, err := s.db.Tables()
	if err != nil {
		return nil, engineError(err)
	}
	for _, t := range tables {
		if t.Name == rel {
			return int64(t.OID), nil
		}
		for _, ix := range t.Indexes {
			if ix.Name == rel {
				return int64(ix.OID), nil
			}
		}
	}
	return nil, nil
}
