package sql

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/row"
	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// pkeySuffix names a table's primary-key index, as PostgreSQL names it: <table>_pkey.
const pkeySuffix = "_pkey"

// writer stores rows of one table: SQL values converted to the engine's, the engine's
// refusals (NOT NULL, lengths, unique keys) mapped to PostgreSQL's SQLSTATEs and messages.
type writer struct {
	ti   engine.TableInfo
	cols []column
	ring *engine.CopyRing // COPY's heap ring (nil: the shared pool, as INSERT)
}

func newWriter(ti engine.TableInfo) *writer {
	return &writer{ti: ti, cols: tableColumns(ti, "")}
}

// storage converts a row of SQL values to the engine's values (NULL stays nil: the engine
// refuses it in a NOT NULL column).
func (w *writer) storage(vals []any) ([]any, error) {
	out := make([]any, len(vals))
	for i, v := range vals {
		if v == nil {
			continue
		}
		sv, err := types.ToStorage(w.cols[i].t, v)
		if err != nil {
			return nil, err
		}
		out[i] = sv
	}
	return out, nil
}

// writeError maps an engine write failure on table ti to PostgreSQL's error.
func (w *writer) writeError(err error, vals []any) error {
	var uv *engine.UniqueViolationError
	var ve *row.ValueError
	switch {
	case errors.As(err, &uv):
		return &pgerr.Error{Severity: "ERROR", Code: pgerr.UniqueViolation,
			Message: fmt.Sprintf("duplicate key value violates unique constraint \"%s\"", uv.Index),
			Detail:  fmt.Sprintf("Key (%s)=(%s) already exists.", strings.Join(uv.Columns, ", "), row.FormatValues(uv.Key))}
	case errors.As(err, &ve) && errors.Is(err, row.ErrNotNull):
		e := pgerr.New(pgerr.NotNullViolation, "null value in column \"%s\" of relation \"%s\" violates not-null constraint", ve.Column, w.ti.Name)
		e.Detail = "Failing row contains " + failingRow(w.cols, vals) + "."
		return e
	case errors.As(err, &ve) && errors.Is(err, row.ErrTooLong):
		return pgerr.New(pgerr.StringDataRightTruncation, "value too long for type %s", sqlTypeName(ve.Type))
	case errors.As(err, &ve) && errors.Is(err, row.ErrOutOfRange):
		return pgerr.New(pgerr.NumericValueOutOfRange, "%s out of range", sqlTypeName(ve.Type))
	case errors.As(err, &ve) && errors.Is(err, row.ErrInvalidText):
		return pgerr.New("22021", "invalid byte sequence for encoding \"UTF8\"")
	case errors.Is(err, engine.ErrDeadlock):
		return deadlockDetected(err)
	}
	return engineError(err)
}

// sqlTypeName is an engine column type as PostgreSQL's messages name it:
// character varying(10), character(3), integer.
func sqlTypeName(engineName string) string {
	name, arg, _ := strings.Cut(engineName, "(")
	if arg != "" {
		arg = "(" + arg
	}
	switch name {
	case "varchar":
		return "character varying" + arg
	case "bpchar":
		return "character" + arg
	case "int2":
		return "smallint"
	case "int4":
		return "integer"
	case "int8":
		return "bigint"
	}
	return engineName
}

// failingRow renders a row as PostgreSQL's "Failing row contains (...)" detail does.
func failingRow(cols []column, vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		if v == nil {
			parts[i] = "null"
			continue
		}
		b, err := types.FormatText(cols[i].t, types.FromStorageValue(v))
		if err != nil {
			parts[i] = "?"
			continue
		}
		parts[i] = string(b)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func (w *writer) insert(x *execCtx, vals []any) error {
	sv, err := w.storage(vals)
	if err != nil {
		return err
	}
	if _, err := x.tx.InsertThrough(w.ring, w.ti.Name, sv); err != nil {
		return w.writeError(err, sv)
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

// addReturned appends the RETURNING list's values for a row written (none without one).
func (res *Result) addReturned(x *execCtx, rets []*expr, row []any) error {
	if rets == nil {
		return nil
	}
	out, err := project(x, rets, row)
	if err != nil {
		return err
	}
	res.Rows = append(res.Rows, out)
	return nil
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
			if err := res.addReturned(x, rets, vals); err != nil {
				return nil, err
			}
		}
		res.Tag = "INSERT 0 " + strconv.Itoa(len(rows))
		return res, nil
	}}, nil
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
		n := 0
		for _, r := range rows {
			var nv, sv []any
			// The row as this statement saw it, or a newer committed version after a wait:
			// WHERE is checked again and SET computed from it (READ COMMITTED's re-check).
			_, ok, err := x.tx.UpdateRow(ti.Name, r.tid, func(cur []any) ([]any, bool, error) {
				cur = fromStorageRow(cur)
				if where != nil {
					ok, err := where.eval(x.env(cur))
					if err != nil || ok != true {
						return nil, false, err
					}
				}
				nv = append(nv[:0], cur...)
				for _, st := range sets {
					v, err := st.e.eval(x.env(cur))
					if err != nil {
						return nil, false, err
					}
					nv[st.col] = v
				}
				var err error
				sv, err = w.storage(nv)
				return sv, err == nil, err
			})
			if err != nil {
				return nil, w.writeError(err, sv)
			}
			if !ok {
				continue
			}
			n++
			if err := res.addReturned(x, rets, nv); err != nil {
				return nil, err
			}
		}
		res.Tag = "UPDATE " + strconv.Itoa(n)
		return res, nil
	}}, nil
}

// fromStorageRow converts a row the engine returned to SQL values, in place.
func fromStorageRow(r []any) []any {
	for i, v := range r {
		r[i] = types.FromStorageValue(v)
	}
	return r
}

func e2name(e *expr) string {
	if e == nil || e.t == nil {
		return "unknown"
	}
	return e.t.Name
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
	w := newWriter(ti)
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
		n := 0
		for _, r := range rows {
			var got []any
			ok, err := x.tx.DeleteRow(ti.Name, r.tid, func(cur []any) ([]any, bool, error) {
				got = fromStorageRow(cur)
				if where == nil {
					return nil, true, nil
				}
				ok, err := where.eval(x.env(got))
				return nil, ok == true, err
			})
			if err != nil {
				return nil, w.writeError(err, nil)
			}
			if !ok {
				continue
			}
			n++
			if err := res.addReturned(x, rets, got); err != nil {
				return nil, err
			}
		}
		res.Tag = "DELETE " + strconv.Itoa(n)
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
			v, ok := d.Arg.Node.(*pg.Node_Integer)
			if !ok || v.Integer.Ival < 10 || v.Integer.Ival > 100 {
				return nil, pgerr.New(pgerr.InvalidParameterValue, "value %s out of bounds for option \"fillfactor\"", defString(d.Arg))
			}
			if v.Integer.Ival == 100 {
				continue // the default: every page filled
			}
			return nil, pgerr.Unsupported("fillfactor other than 100 (the engine fills pages fully)")
		}
		return nil, pgerr.Unsupported("the storage parameter " + d.Defname)
	}
	name := rv.Relname
	var cols []engine.Column
	var keys []tableKey
	constraint := func(con *pg.Constraint, col string) error {
		switch con.Contype {
		case pg.ConstrType_CONSTR_NOTNULL:
			for i := range cols {
				if cols[i].Name == col {
					cols[i].NotNull = true
				}
			}
			return nil
		case pg.ConstrType_CONSTR_NULL:
			return nil
		case pg.ConstrType_CONSTR_PRIMARY, pg.ConstrType_CONSTR_UNIQUE:
			k, err := keyOf(name, con, col)
			if err != nil {
				return err
			}
			if k.primary {
				for _, o := range keys {
					if o.primary {
						return pgerr.New(pgerr.InvalidTableDefinition, "multiple primary keys for table \"%s\" are not allowed", name)
					}
				}
			}
			keys = append(keys, k)
			return nil
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
			col, err := columnOf(cd)
			if err != nil {
				return nil, err
			}
			for _, c := range cols {
				if c.Name == cd.Colname {
					return nil, pgerr.New(pgerr.DuplicateColumn, "column \"%s\" specified more than once", cd.Colname)
				}
			}
			cols = append(cols, col)
			for _, cn := range cd.Constraints {
				con := cn.GetConstraint()
				if con == nil {
					return nil, pgerr.Unsupported("this column constraint")
				}
				if err := constraint(con, cd.Colname); err != nil {
					return nil, err
				}
			}
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
	ti := engine.TableInfo{Name: name, Columns: cols}
	for _, k := range keys {
		if err := k.check(ti); err != nil {
			return nil, err
		}
		if k.primary {
			for i := range cols {
				if slices.Contains(k.columns, cols[i].Name) {
					cols[i].NotNull = true
				}
			}
		}
	}
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
		for _, k := range keys {
			if err := k.create(s.db, name); err != nil {
				return nil, err
			}
		}
		return res, nil
	}}, nil
}

// columnOf is a column definition as the engine stores it.
func columnOf(cd *pg.ColumnDef) (engine.Column, error) {
	tn := cd.TypeName
	if tn != nil && len(tn.Names) > 0 {
		if n := strVal(tn.Names[len(tn.Names)-1]); strings.HasSuffix(n, "serial") || n == "serial4" || n == "serial8" || n == "serial2" {
			return engine.Column{}, pgerr.Unsupported("serial columns (the engine has no sequences yet)")
		}
	}
	if cd.RawDefault != nil {
		return engine.Column{}, pgerr.Unsupported("DEFAULT (the engine has no column defaults yet)")
	}
	if cd.CollClause != nil {
		return engine.Column{}, pgerr.Unsupported("COLLATE")
	}
	t, length, err := columnType(tn)
	if err != nil {
		return engine.Column{}, err
	}
	return types.Storage(t, cd.Colname, length)
}

// columnType resolves a column's declared type and its length (varchar(n), char(n)).
func columnType(tn *pg.TypeName) (*types.T, int, error) {
	if tn == nil || len(tn.Names) == 0 {
		return nil, 0, pgerr.New(pgerr.SyntaxError, "missing type name")
	}
	if len(tn.ArrayBounds) > 0 {
		return nil, 0, pgerr.Unsupported("array types")
	}
	name := strVal(tn.Names[len(tn.Names)-1])
	t, ok := types.ByName(name)
	if !ok || t == types.Numeric || t == types.Oid {
		if isKnownPGType(name) || ok {
			return nil, 0, pgerr.Unsupported("columns of type " + name)
		}
		return nil, 0, pgerr.New(pgerr.UndefinedObject, "type \"%s\" does not exist", name).WithPosition(tn.Location + 1)
	}
	length := 0
	switch len(tn.Typmods) {
	case 0:
	case 1:
		if t != types.Varchar && t != types.Bpchar {
			if t == types.Timestamp || t == types.Timestamptz {
				return nil, 0, pgerr.Unsupported("timestamp precision")
			}
			return nil, 0, pgerr.New(pgerr.SyntaxError, "type modifier is not allowed for type \"%s\"", name)
		}
		k, ok := tn.Typmods[0].Node.(*pg.Node_AConst)
		iv, ok2 := k.AConst.GetVal().(*pg.A_Const_Ival)
		if !ok || !ok2 || iv.Ival.Ival < 1 {
			return nil, 0, pgerr.New(pgerr.SyntaxError, "length for type %s must be at least 1", name)
		}
		length = int(iv.Ival.Ival)
	default:
		return nil, 0, pgerr.Unsupported("several type modifiers")
	}
	return t, length, nil
}

// tableKey is a PRIMARY KEY or UNIQUE constraint of one or several columns.
type tableKey struct {
	primary bool
	columns []string // in key order
	name    string   // the index's name: <table>_pkey or <table>_<col>[_<col>...]_key, as PostgreSQL names them
}

func keyOf(table string, con *pg.Constraint, col string) (tableKey, error) {
	k := tableKey{primary: con.Contype == pg.ConstrType_CONSTR_PRIMARY}
	if col != "" {
		k.columns = []string{col}
	} else {
		for _, n := range con.Keys {
			k.columns = append(k.columns, strVal(n))
		}
		if len(k.columns) == 0 {
			return k, pgerr.New(pgerr.SyntaxError, "a key needs at least one column")
		}
	}
	if len(con.Options) > 0 || len(con.Including) > 0 || con.Indexspace != "" {
		return k, pgerr.Unsupported("index options of a key")
	}
	if con.NullsNotDistinct {
		return k, pgerr.Unsupported("UNIQUE NULLS NOT DISTINCT")
	}
	k.name = table + "_" + strings.Join(k.columns, "_") + "_key"
	if k.primary {
		k.name = table + pkeySuffix
	}
	if con.Conname != "" && con.Conname != k.name {
		return k, pgerr.Unsupported("a key named other than " + k.name)
	}
	return k, nil
}

// check refuses a key the engine cannot index: its columns must exist, each once.
func (k tableKey) check(ti engine.TableInfo) error {
	return checkKeyColumns(ti, k.columns, map[bool]string{true: "primary key", false: "unique"}[k.primary])
}

// checkKeyColumns checks an index's or key's columns: each exists (42703) and appears
// once (42701 in a key, 0A000 in an index); what names the key in PostgreSQL's message ("primary key", "unique",
// "" for CREATE INDEX).
func checkKeyColumns(ti engine.TableInfo, columns []string, what string) error {
	for i, c := range columns {
		if indexOfColumn(ti, c) < 0 {
			if what == "" {
				return pgerr.New(pgerr.UndefinedColumn, "column \"%s\" does not exist", c)
			}
			return pgerr.New(pgerr.UndefinedColumn, "column \"%s\" named in key does not exist", c)
		}
		if slices.Contains(columns[:i], c) {
			if what == "" {
				// PostgreSQL allows it; the engine's catalog keys a column once.
				return pgerr.Unsupported("an index naming the column \"" + c + "\" twice")
			}
			return pgerr.New(pgerr.DuplicateColumn, "column \"%s\" appears twice in %s constraint", c, what)
		}
	}
	return nil
}

// create builds the key's unique index (and, for a primary key, makes its columns NOT NULL).
func (k tableKey) create(db *engine.DB, table string) error {
	var err error
	if k.primary {
		err = db.AddPrimaryKey(table, k.columns...)
	} else {
		err = db.CreateUniqueIndex(k.name, table, k.columns...)
	}
	return ddlError(err, k.name)
}

// ddlError maps an engine DDL failure (index name for messages).
func ddlError(err error, name string) error {
	var uv *engine.UniqueViolationError
	var ve *row.ValueError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &uv):
		e := pgerr.New(pgerr.UniqueViolation, "could not create unique index \"%s\"", uv.Index)
		e.Detail = fmt.Sprintf("Key (%s)=(%s) is duplicated.", strings.Join(uv.Columns, ", "), row.FormatValues(uv.Key))
		return e
	case errors.As(err, &ve) && errors.Is(err, row.ErrNotNull):
		return pgerr.New(pgerr.NotNullViolation, "column \"%s\" of relation contains null values", ve.Column)
	case errors.Is(err, engine.ErrExists):
		return pgerr.New(pgerr.DuplicateTable, "relation \"%s\" already exists", name)
	case errors.Is(err, engine.ErrBadDefinition) && strings.Contains(err.Error(), "primary key"):
		return pgerr.Wrap(err, pgerr.InvalidTableDefinition, "multiple primary keys for table are not allowed")
	}
	return engineError(err)
}

func (s *Session) planCreateIndex(is *pg.IndexStmt) (*plan, error) {
	switch {
	case is.Primary:
		return nil, pgerr.Unsupported("CREATE INDEX ... PRIMARY")
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
	case len(is.IndexParams) == 0:
		return nil, pgerr.New(pgerr.SyntaxError, "an index needs at least one column")
	case is.NullsNotDistinct:
		return nil, pgerr.Unsupported("UNIQUE NULLS NOT DISTINCT")
	}
	var columns []string
	for _, p := range is.IndexParams {
		el := p.GetIndexElem()
		if el == nil || el.Expr != nil || el.Name == "" {
			return nil, pgerr.Unsupported("expression indexes")
		}
		if el.Ordering == pg.SortByDir_SORTBY_DESC || el.NullsOrdering == pg.SortByNulls_SORTBY_NULLS_FIRST || len(el.Opclass) > 0 || len(el.Collation) > 0 {
			return nil, pgerr.Unsupported("DESC, NULLS FIRST, operator classes or collations in an index")
		}
		columns = append(columns, el.Name)
	}
	ti, err := s.tableRef(is.Relation)
	if err != nil {
		return nil, err
	}
	if err := checkKeyColumns(ti, columns, ""); err != nil {
		return nil, err
	}
	name := is.Idxname
	if name == "" {
		// PostgreSQL's ChooseIndexName: _idx for CREATE [UNIQUE] INDEX, _key for constraints.
		name = ti.Name + "_" + strings.Join(columns, "_") + "_idx"
	}
	return &plan{noTx: true, run: func(x *execCtx) (*Result, error) {
		res := &Result{Tag: "CREATE INDEX"}
		var err error
		if is.Unique {
			err = s.db.CreateUniqueIndex(name, ti.Name, columns...)
		} else {
			err = s.db.CreateIndex(name, ti.Name, columns...)
		}
		if errors.Is(err, engine.ErrExists) && is.IfNotExists {
			res.Notices = append(res.Notices, notice(pgerr.DuplicateTable, "relation \"%s\" already exists, skipping", name))
			return res, nil
		}
		if err != nil {
			return nil, ddlError(err, name)
		}
		return res, nil
	}}, nil
}

// planAlterTable plans ALTER TABLE t ADD PRIMARY KEY (col, ...) and ADD UNIQUE (col, ...).
func (s *Session) planAlterTable(at *pg.AlterTableStmt) (*plan, error) {
	if at.Objtype != pg.ObjectType_OBJECT_TABLE {
		return nil, pgerr.Unsupported("ALTER " + strings.TrimPrefix(at.Objtype.String(), "OBJECT_"))
	}
	var keys []tableKey
	for _, c := range at.Cmds {
		cmd := c.GetAlterTableCmd()
		con := cmd.GetDef().GetConstraint()
		if cmd.Subtype != pg.AlterTableType_AT_AddConstraint || con == nil ||
			(con.Contype != pg.ConstrType_CONSTR_PRIMARY && con.Contype != pg.ConstrType_CONSTR_UNIQUE) {
			return nil, pgerr.Unsupported("ALTER TABLE other than ADD PRIMARY KEY and ADD UNIQUE")
		}
		k, err := keyOf(at.Relation.Relname, con, "")
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	ti, err := s.tableRef(at.Relation)
	if err != nil {
		if at.MissingOk && pgerr.As(err).Code == pgerr.UndefinedTable {
			return &plan{noTx: true, run: func(*execCtx) (*Result, error) {
				return &Result{Tag: "ALTER TABLE", Notices: []*pgerr.Error{notice(pgerr.UndefinedTable, "relation \"%s\" does not exist, skipping", at.Relation.Relname)}}, nil
			}}, nil
		}
		return nil, err
	}
	for _, k := range keys {
		if err := k.check(ti); err != nil {
			return nil, err
		}
	}
	return &plan{noTx: true, run: func(*execCtx) (*Result, error) {
		for _, k := range keys {
			if err := k.create(s.db, ti.Name); err != nil {
				return nil, err
			}
		}
		return &Result{Tag: "ALTER TABLE"}, nil
	}}, nil
}

// planDrop plans DROP TABLE [IF EXISTS] t, ... (every name is checked first, as PostgreSQL
// does: one missing name without IF EXISTS drops nothing).
func (s *Session) planDrop(ds *pg.DropStmt) (*plan, error) {
	if ds.RemoveType != pg.ObjectType_OBJECT_TABLE {
		return nil, pgerr.Unsupported("DROP " + strings.TrimPrefix(ds.RemoveType.String(), "OBJECT_"))
	}
	if ds.Behavior == pg.DropBehavior_DROP_CASCADE {
		return nil, pgerr.Unsupported("DROP ... CASCADE")
	}
	if ds.Concurrent {
		return nil, pgerr.Unsupported("DROP ... CONCURRENTLY")
	}
	var names []string
	var notices []*pgerr.Error
	for _, o := range ds.Objects {
		list := o.GetList()
		if list == nil || len(list.Items) == 0 {
			return nil, pgerr.Unsupported("this DROP target")
		}
		parts := make([]string, len(list.Items))
		for i, it := range list.Items {
			parts[i] = strVal(it)
		}
		rv := &pg.RangeVar{Relname: parts[len(parts)-1], Location: -1}
		if len(parts) > 1 {
			rv.Schemaname = parts[len(parts)-2]
		}
		ti, err := s.tableRef(rv)
		if err != nil {
			if ds.MissingOk && pgerr.As(err).Code == pgerr.UndefinedTable {
				notices = append(notices, notice(pgerr.SuccessfulCompletion, "table \"%s\" does not exist, skipping", rv.Relname))
				continue
			}
			return nil, pgerr.New(pgerr.UndefinedTable, "table \"%s\" does not exist", rv.Relname)
		}
		names = append(names, ti.Name)
	}
	return &plan{noTx: true, run: func(x *execCtx) (*Result, error) {
		if s.tx != nil && s.state != txIdle {
			return nil, pgerr.Unsupported("DROP TABLE inside a transaction block (the engine's DROP is not transactional)")
		}
		for _, n := range names {
			if s.usedByOpenTx(n) {
				return nil, pgerr.Unsupported("DROP TABLE of a table this transaction already used (the engine's DROP waits for the transactions that used the table)")
			}
		}
		for _, n := range names {
			if err := s.db.DropTable(x.ctx, n); err != nil {
				if errors.Is(err, engine.ErrNoSuchTable) && ds.MissingOk {
					continue
				}
				return nil, engineError(err)
			}
		}
		return &Result{Tag: "DROP TABLE", Notices: notices}, nil
	}}, nil
}

// planTruncate plans TRUNCATE [TABLE] t, ...: in the statement's transaction (a block's or
// the implicit one), as PostgreSQL's, so ROLLBACK keeps the rows. The engine switches each
// table to new, empty files and holds it (other transactions wait before they use it)
// until the transaction ends; like PostgreSQL's, it is not MVCC-safe.
func (s *Session) planTruncate(ts *pg.TruncateStmt) (*plan, error) {
	if ts.RestartSeqs {
		return nil, pgerr.Unsupported("TRUNCATE ... RESTART IDENTITY")
	}
	if ts.Behavior == pg.DropBehavior_DROP_CASCADE {
		return nil, pgerr.Unsupported("TRUNCATE ... CASCADE")
	}
	var names []string
	for _, r := range ts.Relations {
		rv := r.GetRangeVar()
		if rv == nil {
			return nil, pgerr.Unsupported("this TRUNCATE target")
		}
		ti, err := s.tableRef(rv)
		if err != nil {
			return nil, err
		}
		names = append(names, ti.Name)
	}
	return &plan{run: func(x *execCtx) (*Result, error) {
		for _, n := range names {
			if err := s.tx.Truncate(x.ctx, n); err != nil {
				return nil, engineError(err)
			}
		}
		return &Result{Tag: "TRUNCATE TABLE"}, nil
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
			return nil, pgerr.Unsupported("SET TRANSACTION (every transaction is read committed)")
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
