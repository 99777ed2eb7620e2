package sql

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// execCtx is one execution of a plan.
type execCtx struct {
	ctx    context.Context
	sess   *Session
	tx     *engine.Tx
	params []any
}

func (x *execCtx) env(row []any) *env {
	return &env{ctx: x.ctx, sess: x.sess, row: row, params: x.params}
}

// plan is a planned statement.
type plan struct {
	cols []Column
	noTx bool // runs without a transaction (SET, SHOW)
	run  func(*execCtx) (*Result, error)
}

func (s *Session) plan(n *pg.Node, ptypes *[]*types.T) (*plan, error) {
	switch x := n.Node.(type) {
	case *pg.Node_SelectStmt:
		q, err := s.planSelect(x.SelectStmt, ptypes)
		if err != nil {
			return nil, err
		}
		return &plan{cols: q.cols, run: func(ex *execCtx) (*Result, error) {
			rows, err := q.rows(ex)
			if err != nil {
				return nil, err
			}
			return &Result{Columns: q.cols, Rows: rows, Tag: "SELECT " + strconv.Itoa(len(rows))}, nil
		}}, nil
	case *pg.Node_InsertStmt:
		return s.planInsert(x.InsertStmt, ptypes)
	case *pg.Node_UpdateStmt:
		return s.planUpdate(x.UpdateStmt, ptypes)
	case *pg.Node_DeleteStmt:
		return s.planDelete(x.DeleteStmt, ptypes)
	case *pg.Node_CreateStmt:
		return s.planCreateTable(x.CreateStmt)
	case *pg.Node_IndexStmt:
		return s.planCreateIndex(x.IndexStmt)
	case *pg.Node_VariableSetStmt:
		return s.planSet(x.VariableSetStmt)
	case *pg.Node_VariableShowStmt:
		return s.planShow(x.VariableShowStmt)
	case *pg.Node_DropStmt:
		return s.planDrop(x.DropStmt)
	case *pg.Node_TruncateStmt:
		return s.planTruncate(x.TruncateStmt)
	case *pg.Node_AlterTableStmt:
		return s.planAlterTable(x.AlterTableStmt)
	case *pg.Node_VacuumStmt:
		return s.planVacuum(x.VacuumStmt)
	case *pg.Node_CheckPointStmt:
		return &plan{noTx: true, run: func(*execCtx) (*Result, error) {
			if err := s.db.Checkpoint(); err != nil {
				return nil, engineError(err)
			}
			return &Result{Tag: "CHECKPOINT"}, nil
		}}, nil
	case *pg.Node_CopyStmt:
		return s.planCopy(x.CopyStmt)
	case *pg.Node_ExplainStmt:
		return nil, pgerr.Unsupported("EXPLAIN")
	}
	return nil, pgerr.Unsupported("the statement " + strings.TrimSuffix(nodeName(n), "Stmt"))
}

// tableRef resolves a RangeVar to a table of the engine's catalog.
func (s *Session) tableRef(rv *pg.RangeVar) (engine.TableInfo, error) {
	if rv.Schemaname != "" && rv.Schemaname != "public" {
		return engine.TableInfo{}, pgerr.New(pgerr.UndefinedTable, "relation \"%s.%s\" does not exist", rv.Schemaname, rv.Relname).WithPosition(rv.Location + 1)
	}
	ti, err := s.db.Table(rv.Relname)
	if err != nil {
		if errors.Is(err, engine.ErrNoSuchTable) {
			return ti, pgerr.New(pgerr.UndefinedTable, "relation \"%s\" does not exist", rv.Relname).WithPosition(rv.Location + 1)
		}
		return ti, engineError(err)
	}
	s.planned = append(s.planned, ti.Name)
	return ti, nil
}

// noteUses records the tables the statement just planned as used by the open transaction
// (the engine then holds them for it until it ends, as PostgreSQL's relation locks).
func (s *Session) noteUses() {
	if s.usedTx != s.tx {
		// The map of the session's last transaction serves the next (one map per
		// transaction was an allocation on every autocommit statement).
		if s.used == nil {
			s.used = map[string]bool{}
		}
		clear(s.used)
		s.usedTx = s.tx
	}
	for _, n := range s.planned {
		s.used[n] = true
	}
}

// usedByOpenTx reports whether this session's open transaction used table: a DROP of it
// would wait for that transaction, which is their own.
func (s *Session) usedByOpenTx(table string) bool {
	return s.tx != nil && s.usedTx == s.tx && s.used[table]
}

func tableColumns(ti engine.TableInfo, alias string) []column {
	if alias == "" {
		alias = ti.Name
	}
	cols := make([]column, len(ti.Columns))
	for i, c := range ti.Columns {
		cols[i] = column{table: alias, name: c.Name, t: types.FromStorage(c.Type)}
	}
	return cols
}

// source produces the input rows of a query.
type source struct {
	cols  []column
	table *engine.TableInfo // nil: no table (no FROM, generate_series)
	// index and bounds are the B-tree bounds found in WHERE (index "": scan): equalities
	// on the first eq key columns, then range bounds on the next one.
	index  string
	eq     int
	bounds []bound
	// rowsFn produces rows of a source without a table.
	rowsFn func(*execCtx, func([]any) error) error
}

// bound is one `key column op constant` conjunct of WHERE; pos is the column's position
// in the index's key.
type bound struct {
	pos int
	op  string
	e   *expr
}

// each calls fn for every input row (tid is zero for sources without a table). Rows read
// through an index are candidates: the caller still evaluates the whole WHERE.
func (src *source) each(x *execCtx, fn func(tid page.TID, row []any) error) error {
	if src.table == nil {
		return src.rowsFn(x, func(r []any) error { return fn(page.TID{}, r) })
	}
	if src.index != "" {
		lo, hi, empty, err := src.keyRange(x)
		if err != nil {
			return err
		}
		if empty {
			return nil
		}
		err = x.tx.IndexRange(src.index, lo, hi, func(f engine.Found) error {
			if err := x.ctx.Err(); err != nil {
				return err
			}
			return fn(f.TID, fromStorageRow(f.Row))
		})
		return engineError2(err)
	}
	return engineError2(x.tx.ScanContext(x.ctx, src.table.Name, func(tid page.TID, row []any) error {
		return fn(tid, fromStorageRow(row))
	}))
}

func engineError2(err error) error {
	if err == nil {
		return nil
	}
	return engineError(err)
}

// keyRange evaluates the index bounds into an inclusive range of key prefixes, as
// engine.Tx.IndexRange takes it: the equality values, then the range column's lower
// (upper) bound if any. A strict bound on an integer becomes the next integer; on text
// it stays inclusive and the WHERE drops the equal rows. Integers past the key column's
// type are the engine's to clamp (they order past every value it holds). empty: no row
// can match (a NULL bound, two different equalities, lower above upper).
func (src *source) keyRange(x *execCtx) (lo, hi []any, empty bool, err error) {
	eq := make([]any, src.eq)
	var lower, upper any
	for _, b := range src.bounds {
		v, err := b.e.eval(x.env(nil))
		if err != nil {
			return nil, nil, false, err
		}
		if v == nil {
			return nil, nil, true, nil
		}
		if b.pos < src.eq {
			if eq[b.pos] != nil && compareKey(eq[b.pos], v) != 0 {
				return nil, nil, true, nil
			}
			eq[b.pos] = v
			continue
		}
		if k, ok := v.(int64); ok {
			switch b.op {
			case ">":
				if k == math.MaxInt64 {
					return nil, nil, true, nil
				}
				v = k + 1
			case "<":
				if k == math.MinInt64 {
					return nil, nil, true, nil
				}
				v = k - 1
			}
		}
		switch b.op {
		case ">", ">=":
			if lower == nil || compareKey(v, lower) > 0 {
				lower = v
			}
		case "<", "<=":
			if upper == nil || compareKey(v, upper) < 0 {
				upper = v
			}
		}
	}
	if lower != nil && upper != nil && compareKey(lower, upper) > 0 {
		return nil, nil, true, nil
	}
	lo, hi = eq, slices.Clone(eq)
	if lower != nil {
		lo = append(lo, lower)
	}
	if upper != nil {
		hi = append(hi, upper)
	}
	return lo, hi, false, nil
}

// compareKey orders two bound values of one key column (both integers or both text), as
// the index does: numerically, or bytewise (the "C" collation).
func compareKey(a, b any) int {
	if x, ok := a.(int64); ok {
		y, _ := b.(int64)
		return cmp.Compare(x, y)
	}
	x, _ := a.(string)
	y, _ := b.(string)
	return strings.Compare(x, y)
}

// keyColumnType is the type a WHERE bound on a key column of type t must have for the
// index to be used (nil: the index is not used for this column). Integer and text keys
// (text, varchar) are looked up; char(n) (whose comparison ignores its padding), bool,
// bytea and timestamp keys are scanned.
func keyColumnType(t *types.T) *types.T {
	switch {
	case t.IsInt():
		return types.Int8
	case t == types.Text:
		return types.Text
	}
	return nil
}

// fromClause builds the source of a FROM list (empty: one row without columns).
func (s *Session) fromClause(from []*pg.Node, c *compiler) (*source, error) {
	switch len(from) {
	case 0:
		return &source{rowsFn: func(_ *execCtx, fn func([]any) error) error { return fn(nil) }}, nil
	case 1:
	default:
		return nil, pgerr.Unsupported("several tables in FROM (joins)")
	}
	switch x := from[0].Node.(type) {
	case *pg.Node_RangeVar:
		if v := s.systemView(x.RangeVar); v != nil {
			return v, nil
		}
		ti, err := s.tableRef(x.RangeVar)
		if err != nil {
			return nil, err
		}
		alias := ""
		if x.RangeVar.Alias != nil {
			alias = x.RangeVar.Alias.Aliasname
			if len(x.RangeVar.Alias.Colnames) > 0 {
				return nil, pgerr.Unsupported("column aliases in FROM")
			}
		}
		return &source{cols: tableColumns(ti, alias), table: &ti}, nil
	case *pg.Node_RangeFunction:
		return s.generateSeries(x.RangeFunction, c)
	case *pg.Node_JoinExpr:
		return nil, pgerr.Unsupported("JOIN")
	case *pg.Node_RangeSubselect:
		return nil, pgerr.Unsupported("subqueries in FROM")
	}
	return nil, pgerr.Unsupported("this FROM item (" + nodeName(from[0]) + ")")
}

func (s *Session) generateSeries(rf *pg.RangeFunction, c *compiler) (*source, error) {
	if len(rf.Functions) != 1 || rf.Lateral || rf.Ordinality || rf.IsRowsfrom {
		return nil, pgerr.Unsupported("this function in FROM")
	}
	list, ok := rf.Functions[0].Node.(*pg.Node_List)
	if !ok || len(list.List.Items) == 0 {
		return nil, pgerr.Unsupported("this function in FROM")
	}
	fc, ok := list.List.Items[0].Node.(*pg.Node_FuncCall)
	if !ok {
		return nil, pgerr.Unsupported("this function in FROM")
	}
	name, err := funcName(fc.FuncCall)
	if err != nil {
		return nil, err
	}
	if name == "pg_control_system" {
		return s.controlSystem(rf, fc.FuncCall)
	}
	if name != "generate_series" {
		return nil, pgerr.Unsupported("the function " + name + " in FROM (only generate_series and pg_control_system)")
	}
	args := fc.FuncCall.Args
	if len(args) != 2 && len(args) != 3 {
		return nil, pgerr.New(pgerr.UndefinedFunction, "function generate_series with %d arguments does not exist", len(args)).WithPosition(fc.FuncCall.Location + 1)
	}
	cc := &compiler{sess: s, params: c.params}
	t := types.Int4
	var es []*expr
	for _, a := range args {
		e, err := cc.compile(a, types.Int4)
		if err != nil {
			return nil, err
		}
		if err := cc.settle(e, types.Int4); err != nil {
			return nil, err
		}
		if !e.t.IsInt() {
			return nil, pgerr.Unsupported("generate_series of type " + e.t.Name)
		}
		if e.t == types.Int8 {
			t = types.Int8
		}
		es = append(es, e)
	}
	colName, alias := "generate_series", "generate_series"
	if rf.Alias != nil {
		alias = rf.Alias.Aliasname
		colName = alias
		if len(rf.Alias.Colnames) == 1 {
			colName = strVal(rf.Alias.Colnames[0])
		}
	}
	return &source{cols: []column{{table: alias, name: colName, t: t}}, rowsFn: func(x *execCtx, fn func([]any) error) error {
		vals := make([]int64, 3)
		vals[2] = 1
		for i, e := range es {
			v, err := e.eval(x.env(nil))
			if err != nil {
				return err
			}
			if v == nil {
				return nil
			}
			if vals[i], err = asInt(v); err != nil {
				return err
			}
		}
		start, stop, step := vals[0], vals[1], vals[2]
		if step == 0 {
			return pgerr.New(pgerr.InvalidParameterValue, "step size cannot equal zero")
		}
		for i := start; (step > 0 && i <= stop) || (step < 0 && i >= stop); {
			if err := x.ctx.Err(); err != nil {
				return err
			}
			if err := fn([]any{i}); err != nil {
				return err
			}
			next := i + step
			if (step > 0 && next < i) || (step < 0 && next > i) {
				break
			}
			i = next
		}
		return nil
	}}, nil
}

// findBounds looks for `key column op constant` conjuncts of where on src's table and
// picks the index they bound most: the most leading key columns bound by equality, then
// a range on the next one (ties: the first index). Without a bound on an index's first
// column it is not used.
func (s *Session) findBounds(src *source, where *pg.Node, c *compiler) {
	if src.table == nil || where == nil || len(src.table.Indexes) == 0 {
		return
	}
	var conj []*pg.Node
	var walk func(n *pg.Node)
	walk = func(n *pg.Node) {
		if b, ok := n.Node.(*pg.Node_BoolExpr); ok && b.BoolExpr.Boolop == pg.BoolExprType_AND_EXPR {
			for _, a := range b.BoolExpr.Args {
				walk(a)
			}
			return
		}
		conj = append(conj, n)
	}
	walk(where)
	// onColumn is the table column a bound applies to (-1: none), given the column
	// expression and the constant.
	onColumn := func(col, k *expr) int {
		if col.col < 0 || !k.constant {
			return -1
		}
		want := keyColumnType(col.t)
		if want == nil || keyColumnType(k.t) != want {
			return -1
		}
		return col.col
	}
	type colBound struct {
		op string
		e  *expr
	}
	byColumn := map[string][]colBound{}
	add := func(col int, op string, e *expr) {
		name := src.cols[col].name
		byColumn[name] = append(byColumn[name], colBound{op, e})
	}
	flip := map[string]string{"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
	for _, n := range conj {
		a, ok := n.Node.(*pg.Node_AExpr)
		if !ok {
			continue
		}
		op := opName(a.AExpr.Name)
		switch a.AExpr.Kind {
		case pg.A_Expr_Kind_AEXPR_OP:
			if _, ok := flip[op]; !ok || a.AExpr.Lexpr == nil {
				continue
			}
			le, re, err := c.pair(a.AExpr.Lexpr, a.AExpr.Rexpr, nil)
			if err != nil {
				continue
			}
			if col := onColumn(le, re); col >= 0 {
				add(col, op, re)
			} else if col := onColumn(re, le); col >= 0 {
				add(col, flip[op], le)
			}
		case pg.A_Expr_Kind_AEXPR_BETWEEN:
			list, ok := a.AExpr.Rexpr.Node.(*pg.Node_List)
			if !ok || len(list.List.Items) != 2 {
				continue
			}
			le, lo, err := c.pair(a.AExpr.Lexpr, list.List.Items[0], nil)
			if err != nil {
				continue
			}
			_, hi, err := c.pair(a.AExpr.Lexpr, list.List.Items[1], nil)
			if err != nil {
				continue
			}
			if col := onColumn(le, lo); col >= 0 && onColumn(le, hi) == col {
				add(col, ">=", lo)
				add(col, "<=", hi)
			}
		}
	}
	best := 0
	for _, ix := range src.table.Indexes {
		var bs []bound
		eq := 0
		for eq < len(ix.Columns) && slices.ContainsFunc(byColumn[ix.Columns[eq]], func(b colBound) bool { return b.op == "=" }) {
			for _, b := range byColumn[ix.Columns[eq]] {
				if b.op == "=" {
					bs = append(bs, bound{eq, "=", b.e})
				}
			}
			eq++
		}
		score := 2 * eq
		if eq < len(ix.Columns) {
			for _, b := range byColumn[ix.Columns[eq]] {
				bs = append(bs, bound{eq, b.op, b.e})
				score = 2*eq + 1
			}
		}
		if score > best {
			best = score
			src.index, src.eq, src.bounds = ix.Name, eq, bs
		}
	}
}

// query is a planned SELECT.
type query struct {
	cols    []Column
	src     *source
	where   *expr
	targets []*expr
	aggs    []*aggregate
	sorts   []sortKey
	limit   *expr
	offset  *expr
}

type sortKey struct {
	e          *expr // over input rows (non-aggregate queries) or output rows (output == true)
	output     int   // output column index, or -1
	desc       bool
	nullsFirst bool
}

// colName is the column name PostgreSQL gives an unnamed target (FigureColname).
func colName(n *pg.Node) string {
	switch x := n.Node.(type) {
	case *pg.Node_ColumnRef:
		f := x.ColumnRef.Fields
		if s, ok := f[len(f)-1].Node.(*pg.Node_String_); ok {
			return s.String_.Sval
		}
	case *pg.Node_FuncCall:
		if name, err := funcName(x.FuncCall); err == nil {
			return name
		}
	case *pg.Node_TypeCast:
		if name := colName(x.TypeCast.Arg); name != "?column?" {
			return name
		}
		if tn := x.TypeCast.TypeName; tn != nil && len(tn.Names) > 0 {
			if s, ok := tn.Names[len(tn.Names)-1].Node.(*pg.Node_String_); ok {
				return s.String_.Sval
			}
		}
	case *pg.Node_SqlvalueFunction:
		return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(x.SqlvalueFunction.Op.String(), "SVFOP_"), "_N"))
	case *pg.Node_CoalesceExpr:
		return "coalesce"
	case *pg.Node_CaseExpr:
		return "case"
	}
	return "?column?"
}

func (s *Session) planSelect(sel *pg.SelectStmt, ptypes *[]*types.T) (*query, error) {
	switch {
	case sel.Op != pg.SetOperation_SETOP_NONE && sel.Op != pg.SetOperation_SET_OPERATION_UNDEFINED:
		return nil, pgerr.Unsupported("UNION, INTERSECT and EXCEPT")
	case sel.WithClause != nil:
		return nil, pgerr.Unsupported("WITH")
	case len(sel.ValuesLists) > 0:
		return nil, pgerr.Unsupported("VALUES as a query")
	case len(sel.DistinctClause) > 0:
		return nil, pgerr.Unsupported("SELECT DISTINCT")
	case len(sel.GroupClause) > 0:
		return nil, pgerr.Unsupported("GROUP BY")
	case sel.HavingClause != nil:
		return nil, pgerr.Unsupported("HAVING")
	case len(sel.WindowClause) > 0:
		return nil, pgerr.Unsupported("WINDOW")
	case len(sel.LockingClause) > 0:
		return nil, pgerr.Unsupported("FOR UPDATE/FOR SHARE")
	case sel.IntoClause != nil:
		return nil, pgerr.Unsupported("SELECT INTO")
	}
	c := &compiler{sess: s, params: ptypes}
	src, err := s.fromClause(sel.FromClause, c)
	if err != nil {
		return nil, err
	}
	c.cols = src.cols
	q := &query{src: src}
	if sel.WhereClause != nil {
		w, err := c.compile(sel.WhereClause, types.Bool)
		if err != nil {
			return nil, err
		}
		if err := c.settle(w, types.Bool); err != nil {
			return nil, err
		}
		if w.t != types.Bool {
			return nil, pgerr.New(pgerr.DatatypeMismatch, "argument of WHERE must be type boolean, not type %s", w.t.Name)
		}
		q.where = w
		s.findBounds(src, sel.WhereClause, c)
	}
	var aggs []*aggregate
	c.aggs = &aggs
	targets, cols, err := s.targetList(sel.TargetList, c, src)
	if err != nil {
		return nil, err
	}
	q.targets, q.cols, q.aggs = targets, cols, aggs
	if len(aggs) > 0 && len(c.bare) > 0 {
		return nil, pgerr.New(pgerr.GroupingError, "column \"%s\" must appear in the GROUP BY clause or be used in an aggregate function", c.bare[0])
	}
	for _, sn := range sel.SortClause {
		sb, ok := sn.Node.(*pg.Node_SortBy)
		if !ok {
			return nil, pgerr.Unsupported("this ORDER BY item")
		}
		k, err := s.sortKey(sb.SortBy, c, q, sel.TargetList)
		if err != nil {
			return nil, err
		}
		q.sorts = append(q.sorts, k)
	}
	c.aggs = nil
	for _, lim := range []struct {
		n    *pg.Node
		dst  **expr
		what string
	}{{sel.LimitCount, &q.limit, "LIMIT"}, {sel.LimitOffset, &q.offset, "OFFSET"}} {
		if lim.n == nil {
			continue
		}
		if k, ok := lim.n.Node.(*pg.Node_AConst); ok && k.AConst.Isnull {
			continue // LIMIT NULL / LIMIT ALL
		}
		e, err := c.compile(lim.n, types.Int8)
		if err != nil {
			return nil, err
		}
		if err := c.settle(e, types.Int8); err != nil {
			return nil, err
		}
		if !e.t.IsInt() || !e.constant {
			return nil, pgerr.New(pgerr.DatatypeMismatch, "argument of %s must be an integer constant", lim.what)
		}
		*lim.dst = e
	}
	if sel.LimitOption == pg.LimitOption_LIMIT_OPTION_WITH_TIES {
		return nil, pgerr.Unsupported("FETCH ... WITH TIES")
	}
	return q, nil
}

func (s *Session) targetList(list []*pg.Node, c *compiler, src *source) ([]*expr, []Column, error) {
	var targets []*expr
	var cols []Column
	for _, n := range list {
		rt, ok := n.Node.(*pg.Node_ResTarget)
		if !ok {
			return nil, nil, pgerr.Unsupported("this target")
		}
		if cr, ok := rt.ResTarget.Val.Node.(*pg.Node_ColumnRef); ok {
			if _, star := cr.ColumnRef.Fields[len(cr.ColumnRef.Fields)-1].Node.(*pg.Node_AStar); star {
				table := ""
				if len(cr.ColumnRef.Fields) == 2 {
					table = strVal(cr.ColumnRef.Fields[0])
				}
				if len(src.cols) == 0 && src.table == nil && table == "" {
					return nil, nil, pgerr.New(pgerr.SyntaxError, "SELECT * with no tables specified is not valid").WithPosition(cr.ColumnRef.Location + 1)
				}
				matched := false
				for i, col := range src.cols {
					if table != "" && col.table != table {
						continue
					}
					matched = true
					if c.aggs != nil {
						c.bare = append(c.bare, col.name)
					}
					idx := i
					targets = append(targets, &expr{t: col.t, col: idx, eval: func(e *env) (any, error) { return e.row[idx], nil }})
					cols = append(cols, Column{Name: col.name, Type: col.t})
				}
				if !matched {
					return nil, nil, pgerr.New(pgerr.UndefinedTable, "missing FROM-clause entry for table \"%s\"", table)
				}
				continue
			}
		}
		e, err := c.compile(rt.ResTarget.Val, nil)
		if err != nil {
			return nil, nil, err
		}
		if err := c.settle(e, types.Text); err != nil {
			return nil, nil, err
		}
		if e.t == types.Unknown {
			e.t = types.Text
		}
		name := rt.ResTarget.Name
		if name == "" {
			name = colName(rt.ResTarget.Val)
		}
		targets = append(targets, e)
		cols = append(cols, Column{Name: name, Type: e.t})
	}
	return targets, cols, nil
}

func (s *Session) sortKey(sb *pg.SortBy, c *compiler, q *query, targetList []*pg.Node) (sortKey, error) {
	if sb.SortbyDir == pg.SortByDir_SORTBY_USING {
		return sortKey{}, pgerr.Unsupported("ORDER BY ... USING")
	}
	k := sortKey{output: -1, desc: sb.SortbyDir == pg.SortByDir_SORTBY_DESC}
	k.nullsFirst = k.desc
	switch sb.SortbyNulls {
	case pg.SortByNulls_SORTBY_NULLS_FIRST:
		k.nullsFirst = true
	case pg.SortByNulls_SORTBY_NULLS_LAST:
		k.nullsFirst = false
	}
	if ac, ok := sb.Node.Node.(*pg.Node_AConst); ok {
		if iv, ok := ac.AConst.Val.(*pg.A_Const_Ival); ok {
			n := int(iv.Ival.Ival)
			if n < 1 || n > len(q.cols) {
				return k, pgerr.New(pgerr.InvalidColumnReference, "ORDER BY position %d is not in select list", n).WithPosition(ac.AConst.Location + 1)
			}
			k.output = n - 1
			return k, nil
		}
	}
	if cr, ok := sb.Node.Node.(*pg.Node_ColumnRef); ok && len(cr.ColumnRef.Fields) == 1 {
		if sv, ok := cr.ColumnRef.Fields[0].Node.(*pg.Node_String_); ok {
			for i, col := range q.cols {
				if col.Name == sv.String_.Sval && !hasInputColumn(c.cols, sv.String_.Sval) {
					k.output = i
					return k, nil
				}
			}
		}
	}
	e, err := c.compile(sb.Node, nil)
	if err != nil {
		return k, err
	}
	if err := c.settle(e, types.Text); err != nil {
		return k, err
	}
	if len(q.aggs) > 0 && len(c.bare) > 0 {
		return k, pgerr.New(pgerr.GroupingError, "column \"%s\" must appear in the GROUP BY clause or be used in an aggregate function", c.bare[0])
	}
	k.e = e
	return k, nil
}

func hasInputColumn(cols []column, name string) bool {
	for _, c := range cols {
		if c.name == name {
			return true
		}
	}
	return false
}

// outRow is a result row with its sort keys.
type outRow struct {
	vals []any
	keys []any
}

func (q *query) rows(x *execCtx) ([][]any, error) {
	var out []outRow
	var states []aggState
	if len(q.aggs) > 0 {
		states = make([]aggState, len(q.aggs))
	}
	err := q.src.each(x, func(_ page.TID, row []any) error {
		e := x.env(row)
		if q.where != nil {
			ok, err := q.where.eval(e)
			if err != nil {
				return err
			}
			if ok != true {
				return nil
			}
		}
		if states != nil {
			for i, a := range q.aggs {
				if err := a.step(&states[i], e); err != nil {
					return err
				}
			}
			return nil
		}
		r, err := q.project(e)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if states != nil {
		e := x.env(nil)
		e.aggs = make([]any, len(q.aggs))
		for i, a := range q.aggs {
			e.aggs[i] = a.result(&states[i])
		}
		r, err := q.project(e)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(q.sorts) > 0 {
		sort.SliceStable(out, func(i, j int) bool { return q.less(out[i], out[j]) })
	}
	off, lim := int64(0), int64(-1)
	if q.offset != nil {
		v, err := q.offset.eval(x.env(nil))
		if err != nil {
			return nil, err
		}
		if v != nil {
			if off, err = asInt(v); err != nil {
				return nil, err
			}
			if off < 0 {
				return nil, pgerr.New("2201X", "OFFSET must not be negative")
			}
		}
	}
	if q.limit != nil {
		v, err := q.limit.eval(x.env(nil))
		if err != nil {
			return nil, err
		}
		if v != nil {
			if lim, err = asInt(v); err != nil {
				return nil, err
			}
			if lim < 0 {
				return nil, pgerr.New("2201W", "LIMIT must not be negative")
			}
		}
	}
	rows := make([][]any, 0, len(out))
	for i, r := range out {
		if int64(i) < off {
			continue
		}
		if lim >= 0 && int64(len(rows)) >= lim {
			break
		}
		rows = append(rows, r.vals)
	}
	return rows, nil
}

func (q *query) project(e *env) (outRow, error) {
	r := outRow{vals: make([]any, len(q.targets))}
	for i, t := range q.targets {
		v, err := t.eval(e)
		if err != nil {
			return r, err
		}
		r.vals[i] = v
	}
	if len(q.sorts) > 0 {
		r.keys = make([]any, len(q.sorts))
		for i, k := range q.sorts {
			if k.output >= 0 {
				r.keys[i] = r.vals[k.output]
				continue
			}
			v, err := k.e.eval(e)
			if err != nil {
				return r, err
			}
			r.keys[i] = v
		}
	}
	return r, nil
}

func (q *query) less(a, b outRow) bool {
	for i, k := range q.sorts {
		av, bv := a.keys[i], b.keys[i]
		var c int
		switch {
		case av == nil && bv == nil:
			continue
		case av == nil:
			if k.nullsFirst {
				return true
			}
			return false
		case bv == nil:
			return !k.nullsFirst
		default:
			c = compareValues(av, bv)
		}
		if c == 0 {
			continue
		}
		if k.desc {
			return c > 0
		}
		return c < 0
	}
	return false
}

// String is for debugging plans in test failures.
func (q *query) String() string {
	return fmt.Sprintf("query{index=%q bounds=%d cols=%d}", q.src.index, len(q.src.bounds), len(q.cols))
}
