package sql

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// pkeySuffix names a table's primary-key index, as PostgreSQL names it: <table>_pkey.
const pkeySuffix = "_pkey"

// primaryKey returns the primary-key index of a table and its column position (-1: none).
func primaryKey(ti engine.TableInfo) (string, int) {
	for _, ix := range ti.Indexes {
		if ix.Name == ti.Name+pkeySuffix {
			for i, c := range ti.Columns {
				if c.Name == ix.Column {
					return ix.Name, i
				}
			}
		}
	}
	return "", -1
}

// writer stores rows of one table: type coercion to storage, NULL refusal, primary-key check.
type writer struct {
	ti    engine.TableInfo
	cols  []column
	pkey  string
	pkCol int
}

func newWriter(ti engine.TableInfo) *writer {
	w := &writer{ti: ti, cols: tableColumns(ti, "")}
	w.pkey, w.pkCol = primaryKey(ti)
	return w
}

// storage converts a row of SQL values to the engine's values.
func (w *writer) storage(vals []any) ([]any, error) {
	out := make([]any, len(vals))
	for i, v := range vals {
		if v == nil {
			// The engine has no NULLs yet: every column is NOT NULL in effect.
			return nil, pgerr.New(pgerr.NotNullViolation, "null value in column \"%s\" of relation \"%s\" violates not-null constraint", w.ti.Columns[i].Name, w.ti.Name)
		}
		sv, err := types.ToStorage(w.cols[i].t, v)
		if err != nil {
			return nil, err
		}
		out[i] = sv
	}
	return out, nil
}

// checkKey refuses a primary-key value some row visible to tx already has (23505). Rows
// inserted by transactions still running, or committed after tx's snapshot, are not seen:
// the engine has no unique index yet, so concurrent duplicates are not caught.
func (w *writer) checkKey(x *execCtx, vals []any, self page.TID) error {
	if w.pkey == "" {
		return nil
	}
	key, err := asInt(vals[w.pkCol])
	if err != nil {
		return err
	}
	found, err := x.tx.IndexLookup(w.pkey, key)
	if err != nil {
		return engineError(err)
	}
	for _, f := range found {
		if f.TID != self {
			return &pgerr.Error{Severity: "ERROR", Code: pgerr.UniqueViolation,
				Message: fmt.Sprintf("duplicate key value violates unique constraint \"%s\"", w.pkey),
				Detail:  fmt.Sprintf("Key (%s)=(%d) already exists.", w.ti.Columns[w.pkCol].Name, key)}
		}
	}
	return nil
}

func (w *writer) insert(x *execCtx, vals []any) error {
	sv, err := w.storage(vals)
	if err != nil {
		return err
	}
	if err := w.checkKey(x, sv, page.TID{Block: ^uint32(0)}); err != nil {
		return err
	}
	if _, err := x.tx.Insert(w.ti.Name, sv); err != nil {
		return engineError(err)
	}
	return nil
}

// returning compiles a RETURNING list against the table's columns.
func (s *Session) returning(list []*pg.Node, ti engine.TableInfo, ptypes *[]*types.T) ([]*expr, []Column, error) {
	if len(list) == 0 {
		return nil, nil, nil
	}
	c := &compiler{sess: s, params: ptypes, cols: tableColumns(ti, "")}
	return s.targetList(list, c, &source{cols: c.cols, table: &ti})
}

func project(x *execCtx, targets []*expr, row []any) ([]any, error) {
	out := make([]any, len(targets))
	for i, t := range targets {
		v, err := t.eval(x.env(row))
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (s *Session) planInsert(ins *pg.InsertStmt, ptypes *[]*types.T) (*plan, error) {
	if ins.OnConflictClause != nil {
		return nil, pgerr.Unsupported("INSERT ... ON CONFLICT")
	}
	if ins.WithClause != nil {
		return nil, pgerr.Unsupported("WITH")
	}
	ti, err := s.tableRef(ins.Relation)
	if err != nil {
		return nil, err
	}
	w := newWriter(ti)
	// target[i] is the table column the i-th inserted value goes to.
	var target []int
	if len(ins.Cols) == 0 {
		for i := range ti.Columns {
			target = append(target, i)
		}
	} else {
		seen := map[int]bool{}
		for _, n := range ins.Cols {
			rt := n.GetResTarget()
			if rt == nil {
				return nil, pgerr.Unsupported("this INSERT target")
			}
			if len(rt.Indirection) > 0 {
				return nil, pgerr.Unsupported("INSERT into a subfield or array element")
			}
			i := indexOfColumn(ti, rt.Name)
			if i < 0 {
				return nil, pgerr.New(pgerr.UndefinedColumn, "column \"%s\" of relation \"%s\" does not exist", rt.Name, ti.Name).WithPosition(rt.Location + 1)
			}
			if seen[i] {
				return nil, pgerr.New(pgerr.DuplicateColumn, "column \"%s\" specified more than once", rt.Name).WithPosition(rt.Location + 1)
			}
			seen[i] = true
			target = append(target, i)
		}
	}
	rets, retCols, err := s.returning(ins.ReturningList, ti, ptypes)
	if err != nil {
		return nil, err
	}
	var rowsFn func(*execCtx) ([][]any, error)
	sel, _ := ins.SelectStmt.Node.(*pg.Node_SelectStmt)
	if sel == nil {
		return nil, pgerr.Unsupported("INSERT ... DEFAULT VALUES")
	}
	if lists := sel.SelectStmt.ValuesLists; len(lists) > 0 {
		c := &compiler{sess: s, params: ptypes}
		var rows [][]*expr
		for _, l := range lists {
			list := l.GetList()
			if list == nil {
				return nil, pgerr.Unsupported("this VALUES list")
			}
			items := list.Items
			if len(items) != len(target) {
				if len(items) > len(target) {
					return nil, pgerr.New(pgerr.SyntaxError, "INSERT has more expressions than target columns")
				}
				return nil, pgerr.New(pgerr.SyntaxError, "INSERT has more target columns than expressions")
			}
			var row []*expr
			for i, it := range items {
				if _, def := it.Node.(*pg.Node_SetToDefault); def {
					return nil, pgerr.Unsupported("DEFAULT in VALUES (the engine has no column defaults yet)")
				}
				ct := w.cols[target[i]].t
				e, err := c.compile(it, ct)
				if err != nil {
					return nil, err
				}
				if e, err = c.coerce(e, ct); err != nil {
					return nil, err
				}
				row = append(row, e)
			}
			rows = append(rows, row)
		}
		rowsFn = func(x *execCtx) ([][]any, error) {
			out := make([][]any, 0, len(rows))
			for _, r := range rows {
				vals := make([]any, len(r))
				for i, e := range r {
					v, err := e.eval(x.env(nil))
					if err != nil {
						return nil, err
					}
					vals[i] = v
				}
				out = append(out, vals)
			}
			return out, nil
		}
	} else {
		q, err := s.planSelect(sel.SelectStmt, ptypes)
		if err != nil {
			return nil, err
		}
		if len(q.cols) != len(target) {
			return nil, pgerr.New(pgerr.SyntaxError, "INSERT has more target columns than expressions")
		}
		conv := make([]func(any) (any, error), len(target))
		for i, col := range q.cols {
			from, to := col.Type, w.cols[target[i]].t
			if from != to && !(from.IsInt() && to.IsInt()) && !(from == types.Text && to != types.Text) {
				return nil, pgerr.New(pgerr.DatatypeMismatch, "column \"%s\" is of type %s but expression is of type %s", ti.Columns[target[i]].Name, to.Name, from.Name)
			}
			conv[i] = func(v any) (any, error) {
				if v == nil {
					return nil, nil
				}
				return castValue(from, to, v)
			}
		}
		rowsFn = func(x *execCtx) ([][]any, error) {
			rows, err := q.rows(x)
			if err != nil {
				return nil, err
			}
			for _, r := range rows {
				for i := range r {
					if r[i], err = conv[i](r[i]); err != nil {
						return nil, err
					}
				}
			}
			return rows, nil
		}
	}
	if len(target) < len(ti.Columns) {
		for i, col := range ti.Columns {
			if !contains(target, i) {
				return nil, pgerr.New(pgerr.NotNullViolation, "null value in column \"%s\" of relation \"%s\" violates not-null constraint (the engine stores no NULLs and no defaults yet)", col.Name, ti.Name)
			}
		}
	}
	return &plan{cols: retCols, run: func(x *execCtx) (*Result, error) {
		rows, err := rowsFn(x)
		if err != nil {
			return nil, err
		}
		res := &Result{Columns: retCols}
		for _, r := range rows {
			vals := make([]any, len(ti.Columns))
			for i, v := range r {
				vals[target[i]] = v
			}
			if err := w.insert(x, vals); err != nil {
				return nil, err
			}
			if rets != nil {
				out, err := project(x, rets, vals)
				if err != nil {
					return nil, err
				}
				res.Rows = append(res.Rows, out)
			}
		}
		res.Tag = "INSERT 0 " + strconv.Itoa(len(rows))
		return res, nil
	}}, nil
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func indexOfColumn(ti engine.TableInfo, name string) int {
	for i, c := range ti.Columns {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// matching plans the rows of a table an UPDATE or DELETE touches.
func (s *Session) matching(rv *pg.RangeVar, where *pg.Node, ptypes *[]*types.T) (*source, *compiler, *expr, error) {
	c := &compiler{sess: s, params: ptypes}
	src, err := s.fromClause([]*pg.Node{{Node: &pg.Node_RangeVar{RangeVar: rv}}}, c)
	if err != nil {
		return nil, nil, nil, err
	}
	c.cols = src.cols
	var w *expr
	if where != nil {
		if w, err = c.compile(where, types.Bool); err != nil {
			return nil, nil, nil, err
		}
		if err := c.settle(w, types.Bool); err != nil {
			return nil, nil, nil, err
		}
		if w.t != types.Bool {
			return nil, nil, nil, pgerr.New(pgerr.DatatypeMismatch, "argument of WHERE must be type boolean, not type %s", w.t.Name)
		}
		s.findBounds(src, where, c)
	}
	return src, c, w, nil
}

type touched struct {
	tid page.TID
	row []any
}

// collect returns the rows matching where, before any is changed (so an UPDATE never sees
// its own new versions).
func collect(x *execCtx, src *source, where *expr) ([]touched, error) {
	var out []touched
	err := src.each(x, func(tid page.TID, row []any) error {
		if where != nil {
			ok, err := where.eval(x.env(row))
			if err != nil {
				return err
			}
			if ok != true {
				return nil
			}
		}
		out = append(out, touched{tid, row})
		return nil
	})
	return out, err
}

func (s *Session) planUpdate(up *pg.UpdateStmt, ptypes *[]*types.T) (*plan, error) {
	if len(up.FromClause) > 0 {
		return nil, pgerr.Unsupported("UPDATE ... FROM")
	}
	if up.WithClause != nil {
		return nil, pgerr.Unsupported("WITH")
	}
	src, c, where, err := s.matching(up.Relation, up.WhereClause, ptypes)
	if err != nil {
		return nil, err
	}
	ti := *src.table
	w := newWriter(ti)
	type set struct {
		col int
		e   *expr
	}
	var sets []set
	for _, n := range up.TargetList {
		rt := n.GetResTarget()
		if rt == nil || rt.Val == nil {
			return nil, pgerr.Unsupported("this UPDATE target")
		}
		if len(rt.Indirection) > 0 {
			return nil, pgerr.Unsupported("UPDATE of a subfield or array element")
		}
		if _, ok := rt.Val.Node.(*pg.Node_MultiAssignRef); ok {
			return nil, pgerr.Unsupported("UPDATE ... SET (a, b) = (...)")
		}
		i := indexOfColumn(ti, rt.Name)
		if i < 0 {
			return nil, pgerr.New(pgerr.UndefinedColumn, "column \"%s\" of relation \"%s\" does not exist", rt.Name, ti.Name).WithPosition(rt.Location + 1)
		}
		if _, def := rt.Val.Node.(*pg.Node_SetToDefault); def {
			return nil, pgerr.Unsupported("SET column = DEFAULT (the engine has no column defaults yet)")
		}
		ct := w.cols[i].t
		e, err := c.compile(rt.Val, ct)
		if err != nil {
			return nil, err
		}
		if e, err = c.coerce(e, ct); err != nil {
			return nil, pgerr.New(pgerr.DatatypeMismatch, "column \"%s\" is of type %s but expression is of type %s", rt.Name, ct.Name, e2name(e))
		}
		sets = append(sets, set{i, e})
	}
	rets, retCols, err := s.returning(up.ReturningList, ti, ptypes)
	if err != nil {
		return nil, err
	}
	return &plan{cols: retCols, run: func(x *execCtx) (*Result, error) {
		rows, err := collect(x, src, where)
		if err != nil {
			return nil, err
		}
		res := &Result{Columns: retCols}
		for _, r := range rows {
			nv := append([]any(nil), r.row...)
			for _, st := range sets {
				v, err := st.e.eval(x.env(r.row))
				if err != nil {
					return nil, err
				}
				nv[st.col] = v
			}
			sv, err := w.storage(nv)
			if err != nil {
				return nil, err
			}
			if w.pkey != "" && compareValues(sv[w.pkCol], r.row[w.pkCol]) != 0 {
				if err := w.checkKey(x, sv, r.tid); err != nil {
					return nil, err
				}
			}
			if _, err := x.tx.Update(ti.Name, r.tid, sv); err != nil {
				return nil, writeError(err)
			}
			if rets != nil {
				out, err := project(x, rets, nv)
				if err != nil {
					return nil, err
				}
				res.Rows = append(res.Rows, out)
			}
		}
		res.Tag = "UPDATE " + strconv.Itoa(len(rows))
		return res, nil
	}}, nil
}

func e2name(e *expr) string {
	if e == nil || e.t == nil {
		return "unknown"
	}
	return e.t.Name
}

// writeError maps an Update/Delete failure: a row changed by a concurrent transaction is a
// serialization failure (the engine gives each transaction one snapshot).
func writeError(err error) error {
	if errors.Is(err, engine.ErrNotFound) {
		return pgerr.Wrap(err, pgerr.SerializationFailure, "could not serialize access due to concurrent update")
	}
	return engineError(err)
}

func (s *Session) planDelete(del *pg.DeleteStmt, ptypes *[]*types.T) (*plan, error) {
	if len(del.UsingClause) > 0 {
		return nil, pgerr.Unsupported("DELETE ... USING")
	}
	if del.WithClause != nil {
		return nil, pgerr.Unsupported("WITH")
	}
	src, _, where, err := s.matching(del.Relation, del.WhereClause, ptypes)
	if err != nil {
		return nil, err
	}
	ti := *src.table
	rets, retCols, err := s.returning(del.ReturningList, ti, ptypes)
	if err != nil {
		return nil, err
	}
	return &plan{cols: retCols, run: func(x *execCtx) (*Result, error) {
		rows, err := collect(x, src, where)
		if err != nil {
			return nil, err
		}
		res := &Result{Columns: retCols}
		for _, r := range rows {
			if err := x.tx.Delete(ti.Name, r.tid); err != nil {
				return nil, writeError(err)
			}
			if rets != nil {
				out, err := project(x, rets, r.row)
				if err != nil {
					return nil, err
				}
				res.Rows = append(res.Rows, out)
			}
		}
		res.Tag = "DELETE " + strconv.Itoa(len(rows))
		return res, nil
	}}, nil
}

// strVal is a String node's value ("" otherwise).
func strVal(n *pg.Node) string {
	if s, ok := n.Node.(*pg.Node_String_); ok {
		return s.String_.Sval
	}
	return ""
}

func (s *Session) planCreateTable(cs *pg.CreateStmt) (*plan, error) {
	rv := cs.Relation
	switch {
	case rv.Schemaname != "" && rv.Schemaname != "public":
		return nil, pgerr.New(pgerr.InvalidCatalogName, "schema \"%s\" does not exist", rv.Schemaname)
	case rv.Relpersistence == "t":
		return nil, pgerr.Unsupported("temporary tables")
	case len(cs.InhRelations) > 0:
		return nil, pgerr.Unsupported("INHERITS")
	case cs.Partspec != nil || cs.Partbound != nil:
		return nil, pgerr.Unsupported("partitioned tables")
	case cs.OfTypename != nil:
		return nil, pgerr.Unsupported("CREATE TABLE OF type")
	}
	for _, o := range cs.Options {
		d := o.GetDefElem()
		if d == nil {
			return nil, pgerr.Unsupported("this storage parameter")
		}
		if d.Defname == "fillfactor" {
			if v, ok := d.Arg.Node.(*pg.Node_Integer); ok && v.Integer.Ival == 100 {
				continue // the default: every page filled
			}
			return nil, pgerr.Unsupported("fillfactor other than 100 (the engine fills pages fully)")
		}
		return nil, pgerr.Unsupported("the storage parameter " + d.Defname)
	}
	var cols []engine.Column
	pk := ""
	setPK := func(name string) error {
		if pk != "" {
			return pgerr.New(pgerr.InvalidTableDefinition, "multiple primary keys for table \"%s\" are not allowed", rv.Relname)
		}
		pk = name
		return nil
	}
	constraint := func(con *pg.Constraint, col string) error {
		switch con.Contype {
		case pg.ConstrType_CONSTR_NOTNULL, pg.ConstrType_CONSTR_NULL:
			// Every column is NOT NULL in effect: the engine stores no NULLs yet.
			if con.Contype == pg.ConstrType_CONSTR_NULL {
				return nil
			}
			return nil
		case pg.ConstrType_CONSTR_PRIMARY:
			if col == "" {
				if len(con.Keys) != 1 {
					return pgerr.Unsupported("primary keys of several columns")
				}
				col = strVal(con.Keys[0])
			}
			if con.Conname != "" && con.Conname != rv.Relname+pkeySuffix {
				return pgerr.Unsupported("a primary key named other than <table>_pkey")
			}
			if len(con.Options) > 0 {
				return pgerr.Unsupported("index options on a primary key")
			}
			return setPK(col)
		case pg.ConstrType_CONSTR_UNIQUE:
			return pgerr.Unsupported("UNIQUE constraints (the engine has no unique index yet)")
		case pg.ConstrType_CONSTR_DEFAULT:
			return pgerr.Unsupported("DEFAULT (the engine has no column defaults yet)")
		case pg.ConstrType_CONSTR_CHECK:
			return pgerr.Unsupported("CHECK constraints")
		case pg.ConstrType_CONSTR_FOREIGN:
			return pgerr.Unsupported("FOREIGN KEY constraints")
		case pg.ConstrType_CONSTR_IDENTITY, pg.ConstrType_CONSTR_GENERATED:
			return pgerr.Unsupported("identity and generated columns")
		}
		return pgerr.Unsupported("this constraint (" + con.Contype.String() + ")")
	}
	for _, el := range cs.TableElts {
		switch x := el.Node.(type) {
		case *pg.Node_ColumnDef:
			cd := x.ColumnDef
			tn := cd.TypeName
			if tn != nil && len(tn.Names) > 0 {
				if n := strVal(tn.Names[len(tn.Names)-1]); strings.HasSuffix(n, "serial") || n == "serial4" || n == "serial8" || n == "serial2" {
					return nil, pgerr.Unsupported("serial columns (the engine has no sequences yet)")
				}
			}
			t, err := typeOf(tn)
			if err != nil {
				return nil, err
			}
			st, err := types.Storage(t)
			if err != nil {
				return nil, err
			}
			if cd.RawDefault != nil {
				return nil, pgerr.Unsupported("DEFAULT (the engine has no column defaults yet)")
			}
			if cd.CollClause != nil {
				return nil, pgerr.Unsupported("COLLATE")
			}
			for _, cn := range cd.Constraints {
				con := cn.GetConstraint()
				if con == nil {
					return nil, pgerr.Unsupported("this column constraint")
				}
				if err := constraint(con, cd.Colname); err != nil {
					return nil, err
				}
			}
			for _, c := range cols {
				if c.Name == cd.Colname {
					return nil, pgerr.New(pgerr.DuplicateColumn, "column \"%s\" specified more than once", cd.Colname)
				}
			}
			cols = append(cols, engine.Column{Name: cd.Colname, Type: st})
		case *pg.Node_Constraint:
			if err := constraint(x.Constraint, ""); err != nil {
				return nil, err
			}
		default:
			return nil, pgerr.Unsupported("this table element (" + nodeName(el) + ")")
		}
	}
	if len(cols) == 0 {
		return nil, pgerr.Unsupported("tables without columns")
	}
	if pk != "" {
		found := false
		for _, c := range cols {
			if c.Name == pk {
				found = true
				if types.FromStorage(c.Type) != types.Int8 {
					return nil, pgerr.Unsupported("primary keys on non-integer columns (the engine's B-tree keys are integers)")
				}
			}
		}
		if !found {
			return nil, pgerr.New(pgerr.UndefinedColumn, "column \"%s\" named in key does not exist", pk)
		}
	}
	name := rv.Relname
	return &plan{noTx: true, run: func(x *execCtx) (*Result, error) {
		res := &Result{Tag: "CREATE TABLE"}
		if err := s.db.CreateTable(name, cols); err != nil {
			if errors.Is(err, engine.ErrExists) {
				if cs.IfNotExists {
					res.Notices = append(res.Notices, notice(pgerr.DuplicateTable, "relation \"%s\" already exists, skipping", name))
					return res, nil
				}
				return nil, pgerr.New(pgerr.DuplicateTable, "relation \"%s\" already exists", name)
			}
			return nil, engineError(err)
		}
		if pk != "" {
			if err := s.db.CreateIndex(name+pkeySuffix, name, pk); err != nil {
				return nil, engineError(err)
			}
		}
		return res, nil
	}}, nil
}

func (s *Session) planCreateIndex(is *pg.IndexStmt) (*plan, error) {
	switch {
	case is.Unique || is.Primary:
		return nil, pgerr.Unsupported("CREATE UNIQUE INDEX (the engine has no unique index yet)")
	case is.AccessMethod != "" && is.AccessMethod != "btree":
		return nil, pgerr.Unsupported("index access method " + is.AccessMethod)
	case is.WhereClause != nil:
		return nil, pgerr.Unsupported("partial indexes")
	case len(is.IndexIncludingParams) > 0:
		return nil, pgerr.Unsupported("INCLUDE")
	case is.Concurrent:
		return nil, pgerr.Unsupported("CREATE INDEX CONCURRENTLY")
	case len(is.Options) > 0:
		return nil, pgerr.Unsupported("index storage parameters")
	case len(is.IndexParams) != 1:
		return nil, pgerr.Unsupported("indexes on several columns")
	}
	el := is.IndexParams[0].GetIndexElem()
	if el == nil || el.Expr != nil || el.Name == "" {
		return nil, pgerr.Unsupported("expression indexes")
	}
	if el.Ordering == pg.SortByDir_SORTBY_DESC || len(el.Opclass) > 0 || len(el.Collation) > 0 {
		return nil, pgerr.Unsupported("DESC, operator classes or collations in an index")
	}
	ti, err := s.tableRef(is.Relation)
	if err != nil {
		return nil, err
	}
	ci := indexOfColumn(ti, el.Name)
	if ci < 0 {
		return nil, pgerr.New(pgerr.UndefinedColumn, "column \"%s\" does not exist", el.Name)
	}
	if types.FromStorage(ti.Columns[ci].Type) != types.Int8 {
		return nil, pgerr.Unsupported("indexes on non-integer columns (the engine's B-tree keys are integers)")
	}
	name := is.Idxname
	if name == "" {
		name = ti.Name + "_" + el.Name + "_idx"
	}
	return &plan{noTx: true, run: func(x *execCtx) (*Result, error) {
		res := &Result{Tag: "CREATE INDEX"}
		if err := s.db.CreateIndex(name, ti.Name, el.Name); err != nil {
			if errors.Is(err, engine.ErrExists) {
				if is.IfNotExists {
					res.Notices = append(res.Notices, notice(pgerr.DuplicateTable, "relation \"%s\" already exists, skipping", name))
					return res, nil
				}
				return nil, pgerr.New(pgerr.DuplicateTable, "relation \"%s\" already exists", name)
			}
			return nil, engineError(err)
		}
		return res, nil
	}}, nil
}

// settingValue renders SET's arguments as PostgreSQL does (a list joined with ", ").
func settingValue(args []*pg.Node) (string, error) {
	var parts []string
	for _, a := range args {
		switch x := a.Node.(type) {
		case *pg.Node_AConst:
			switch v := x.AConst.Val.(type) {
			case *pg.A_Const_Sval:
				parts = append(parts, v.Sval.Sval)
			case *pg.A_Const_Ival:
				parts = append(parts, strconv.Itoa(int(v.Ival.Ival)))
			case *pg.A_Const_Fval:
				parts = append(parts, v.Fval.Fval)
			case *pg.A_Const_Boolval:
				parts = append(parts, map[bool]string{true: "on", false: "off"}[v.Boolval.Boolval])
			}
		case *pg.Node_TypeCast:
			if k, ok := x.TypeCast.Arg.Node.(*pg.Node_AConst); ok {
				if sv, ok := k.AConst.Val.(*pg.A_Const_Sval); ok {
					parts = append(parts, sv.Sval.Sval)
					continue
				}
			}
			return "", pgerr.Unsupported("this SET value")
		default:
			return "", pgerr.Unsupported("this SET value")
		}
	}
	return strings.Join(parts, ", "), nil
}

func (s *Session) planSet(vs *pg.VariableSetStmt) (*plan, error) {
	name := vs.Name
	if name == "timezone" {
		name = "TimeZone"
	}
	switch vs.Kind {
	case pg.VariableSetKind_VAR_SET_VALUE:
		v, err := settingValue(vs.Args)
		if err != nil {
			return nil, err
		}
		return &plan{noTx: true, run: func(*execCtx) (*Result, error) {
			return &Result{Tag: "SET"}, s.settings.set(name, v, false)
		}}, nil
	case pg.VariableSetKind_VAR_SET_DEFAULT, pg.VariableSetKind_VAR_RESET:
		tag := "RESET"
		if vs.Kind == pg.VariableSetKind_VAR_SET_DEFAULT {
			tag = "SET"
		}
		return &plan{noTx: true, run: func(*execCtx) (*Result, error) {
			return &Result{Tag: tag}, s.settings.set(name, "", true)
		}}, nil
	case pg.VariableSetKind_VAR_RESET_ALL:
		return &plan{noTx: true, run: func(*execCtx) (*Result, error) {
			s.settings.resetAll()
			return &Result{Tag: "RESET"}, nil
		}}, nil
	case pg.VariableSetKind_VAR_SET_MULTI:
		if name == "TRANSACTION" || name == "SESSION CHARACTERISTICS" {
			// Isolation levels and access modes: the engine gives every transaction one
			// snapshot (repeatable read) and has no read-only mode to enforce.
			return nil, pgerr.Unsupported("SET TRANSACTION (every transaction is repeatable read)")
		}
	}
	return nil, pgerr.Unsupported("SET " + name)
}

func (s *Session) planShow(vs *pg.VariableShowStmt) (*plan, error) {
	if strings.EqualFold(vs.Name, "all") {
		return nil, pgerr.Unsupported("SHOW ALL")
	}
	name := vs.Name
	if name == "timezone" {
		name = "TimeZone"
	}
	cols := []Column{{Name: canonicalName(name), Type: types.Text}}
	return &plan{noTx: true, cols: cols, run: func(*execCtx) (*Result, error) {
		v, ok := s.settings.get(name)
		if !ok {
			return nil, pgerr.New(pgerr.UndefinedParameter, "unrecognized configuration parameter \"%s\"", vs.Name)
		}
		return &Result{Columns: cols, Rows: [][]any{{v}}, Tag: "SHOW"}, nil
	}}, nil
}
