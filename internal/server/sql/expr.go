package sql

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// env is what an expression is evaluated against: the current input row, the bound
// parameters, the aggregates' results (after accumulation) and the session.
type env struct {
	ctx    context.Context
	sess   *Session
	row    []any
	params []any
	aggs   []any
}

// expr is a compiled expression: its static type and its evaluation.
type expr struct {
	t    *types.T
	eval func(*env) (any, error)
	// lit is set for a quoted literal whose type is still unknown: context gives it one
	// (coerce parses it then).
	lit *string
	// param is the parameter number of a bare $n, 0 otherwise.
	param int
	// col is the input column of a bare column reference, -1 otherwise.
	col int
	// constant is true when the value depends on neither the row nor aggregates.
	constant bool
}

func constExpr(t *types.T, v any) *expr {
	return &expr{t: t, col: -1, constant: true, eval: func(*env) (any, error) { return v, nil }}
}

// column is one column visible to an expression.
type column struct {
	table string // the table's name or alias in FROM
	name  string
	t     *types.T
}

// compiler turns parse-tree expressions into exprs against a list of input columns.
type compiler struct {
	sess   *Session
	params *[]*types.T // parameter types, inferred as they are met (nil = not yet known)
	cols   []column
	// aggs collects the aggregates met when aggregation is allowed (nil = not allowed).
	aggs *[]*aggregate
	// inAgg is true while compiling an aggregate's argument (no nested aggregates).
	inAgg bool
	// bare lists the columns used outside aggregates while aggregation is allowed: with an
	// aggregate in the query (and no GROUP BY) that is an error.
	bare []string
}

func (c *compiler) errAt(e *pgerr.Error, loc int32) *pgerr.Error {
	if loc >= 0 {
		return e.WithPosition(loc + 1)
	}
	return e
}

// compile compiles n; hint is the type its context expects (nil = none), used to infer a
// parameter's type.
func (c *compiler) compile(n *pg.Node, hint *types.T) (*expr, error) {
	switch x := n.Node.(type) {
	case *pg.Node_AConst:
		return c.constant(x.AConst)
	case *pg.Node_ColumnRef:
		return c.columnRef(x.ColumnRef)
	case *pg.Node_ParamRef:
		return c.paramRef(x.ParamRef, hint)
	case *pg.Node_AExpr:
		return c.aExpr(x.AExpr, hint)
	case *pg.Node_BoolExpr:
		return c.boolExpr(x.BoolExpr)
	case *pg.Node_NullTest:
		arg, err := c.compile(x.NullTest.Arg, nil)
		if err != nil {
			return nil, err
		}
		if err := c.settle(arg, types.Text); err != nil {
			return nil, err
		}
		not := x.NullTest.Nulltesttype == pg.NullTestType_IS_NOT_NULL
		return &expr{t: types.Bool, col: -1, constant: arg.constant, eval: func(e *env) (any, error) {
			v, err := arg.eval(e)
			if err != nil {
				return nil, err
			}
			return (v == nil) != not, nil
		}}, nil
	case *pg.Node_TypeCast:
		return c.typeCast(x.TypeCast)
	case *pg.Node_FuncCall:
		return c.funcCall(x.FuncCall, hint)
	case *pg.Node_SqlvalueFunction:
		switch x.SqlvalueFunction.Op {
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP, pg.SQLValueFunctionOp_SVFOP_CURRENT_TIMESTAMP_N:
			return c.now(), nil
		case pg.SQLValueFunctionOp_SVFOP_CURRENT_USER, pg.SQLValueFunctionOp_SVFOP_SESSION_USER, pg.SQLValueFunctionOp_SVFOP_USER:
			user := c.sess.user
			return constExpr(types.Text, user), nil
		}
		return nil, c.errAt(pgerr.Unsupported("the SQL value function "+strings.ToLower(strings.TrimPrefix(x.SqlvalueFunction.Op.String(), "SVFOP_"))), x.SqlvalueFunction.Location)
	case *pg.Node_CoalesceExpr:
		return c.coalesce(x.CoalesceExpr.Args, hint)
	case *pg.Node_AStar:
		return nil, pgerr.New(pgerr.SyntaxError, "* is not allowed here")
	}
	return nil, pgerr.Unsupported("the expression " + nodeName(n))
}

// nodeName names a parse-tree node kind for 0A000 messages ("SubLink", "CaseExpr", ...).
func nodeName(n *pg.Node) string {
	if n == nil || n.Node == nil {
		return "(empty)"
	}
	name := strings.TrimPrefix(strings.TrimPrefix(typeName(n.Node), "*pg_query.Node_"), "*pg_query.")
	return name
}

func (c *compiler) constant(k *pg.A_Const) (*expr, error) {
	if k.Isnull {
		return &expr{t: types.Unknown, col: -1, constant: true, eval: func(*env) (any, error) { return nil, nil }, lit: nil}, nil
	}
	switch v := k.Val.(type) {
	case *pg.A_Const_Ival:
		return constExpr(types.Int4, int64(v.Ival.Ival)), nil
	case *pg.A_Const_Fval:
		// An integer too large for int4 is a Float node: int8 if it fits, else numeric.
		s := v.Fval.Fval
		if b, ok := new(big.Int).SetString(s, 10); ok {
			if b.IsInt64() {
				if v := b.Int64(); v >= math.MinInt32 && v <= math.MaxInt32 {
					return constExpr(types.Int4, v), nil // -2147483648 arrives here, as in PostgreSQL
				}
				return constExpr(types.Int8, b.Int64()), nil
			}
			return constExpr(types.Numeric, b), nil
		}
		return nil, c.errAt(pgerr.Unsupported("the numeric literal "+s+" (numbers with a fraction)"), k.Location)
	case *pg.A_Const_Boolval:
		return constExpr(types.Bool, v.Boolval.Boolval), nil
	case *pg.A_Const_Sval:
		s := v.Sval.Sval
		e := constExpr(types.Unknown, s)
		e.lit = &s
		return e, nil
	}
	return nil, c.errAt(pgerr.Unsupported("bit-string literals"), k.Location)
}

func (c *compiler) columnRef(r *pg.ColumnRef) (*expr, error) {
	var names []string
	for _, f := range r.Fields {
		s, ok := f.Node.(*pg.Node_String_)
		if !ok {
			return nil, pgerr.New(pgerr.SyntaxError, "* is not allowed here").WithPosition(r.Location + 1)
		}
		names = append(names, s.String_.Sval)
	}
	var table, name string
	switch len(names) {
	case 1:
		name = names[0]
	case 2:
		table, name = names[0], names[1]
	default:
		return nil, c.errAt(pgerr.Unsupported("column references with a schema"), r.Location)
	}
	found := -1
	for i, col := range c.cols {
		if col.name == name && (table == "" || col.table == table) {
			if found >= 0 {
				return nil, c.errAt(pgerr.New(pgerr.AmbiguousColumn, "column reference \"%s\" is ambiguous", name), r.Location)
			}
			found = i
		}
	}
	if found < 0 {
		if table != "" && !c.hasTable(table) {
			return nil, c.errAt(pgerr.New(pgerr.UndefinedTable, "missing FROM-clause entry for table \"%s\"", table), r.Location)
		}
		if table != "" {
			return nil, c.errAt(pgerr.New(pgerr.UndefinedColumn, "column %s.%s does not exist", table, name), r.Location)
		}
		return nil, c.errAt(pgerr.New(pgerr.UndefinedColumn, "column \"%s\" does not exist", name), r.Location)
	}
	i := found
	if c.aggs != nil && !c.inAgg {
		c.bare = append(c.bare, name)
	}
	return &expr{t: c.cols[i].t, col: i, eval: func(e *env) (any, error) { return e.row[i], nil }}, nil
}

func (c *compiler) hasTable(t string) bool {
	for _, col := range c.cols {
		if col.table == t {
			return true
		}
	}
	return false
}

func (c *compiler) paramRef(p *pg.ParamRef, hint *types.T) (*expr, error) {
	n := int(p.Number)
	if n < 1 || n > 65535 {
		return nil, c.errAt(pgerr.New(pgerr.UndefinedParameter, "there is no parameter $%d", n), p.Location)
	}
	for len(*c.params) < n {
		*c.params = append(*c.params, nil)
	}
	if (*c.params)[n-1] == nil && hint != nil && hint != types.Unknown {
		(*c.params)[n-1] = hint
	}
	idx := n - 1
	e := &expr{t: (*c.params)[idx], param: n, col: -1, constant: true, eval: func(e *env) (any, error) {
		if idx >= len(e.params) {
			return nil, pgerr.New(pgerr.ProtocolViolation, "no value bound for parameter $%d", idx+1)
		}
		return e.params[idx], nil
	}}
	if e.t == nil {
		e.t = types.Unknown
	}
	return e, nil
}

// settle gives an expression of still unknown type (a quoted literal or an untyped
// parameter) the type t: a literal is parsed now, a parameter's type is fixed.
func (c *compiler) settle(e *expr, t *types.T) error {
	if e.t != types.Unknown || t == nil || t == types.Unknown {
		return nil
	}
	if e.param > 0 {
		(*c.params)[e.param-1] = t
		e.t = t
		return nil
	}
	if e.lit != nil {
		v, err := types.ParseText(t, *e.lit)
		if err != nil {
			return err
		}
		e.t, e.lit = t, nil
		e.eval = func(*env) (any, error) { return v, nil }
		return nil
	}
	// NULL literal.
	e.t = t
	return nil
}

// coerce returns e converted to type t for an assignment (INSERT, UPDATE) or a function
// argument: unknown-typed values take t, integers are range-checked into t.
func (c *compiler) coerce(e *expr, t *types.T) (*expr, error) {
	if err := c.settle(e, t); err != nil {
		return nil, err
	}
	if e.t == t {
		return e, nil
	}
	if e.t.IsInt() && t.IsInt() {
		return c.castExpr(e, t), nil
	}
	if e.t.IsInt() && t == types.Numeric {
		return c.castExpr(e, t), nil
	}
	if t == types.Text && (e.t == types.Text || e.t == types.Unknown) {
		return e, nil
	}
	if (t == types.Text && e.t == types.Bpchar) || (t == types.Bpchar && e.t == types.Text) {
		return c.castExpr(e, t), nil
	}
	if (e.t == types.Timestamptz && t == types.Timestamp) || (e.t == types.Timestamp && t == types.Timestamptz) {
		return c.castExpr(e, t), nil // assignment casts, as PostgreSQL's
	}
	return nil, pgerr.New(pgerr.DatatypeMismatch, "column is of type %s but expression is of type %s", t.Name, e.t.Name)
}

func (c *compiler) castExpr(e *expr, t *types.T) *expr {
	from := e.t
	return &expr{t: t, col: -1, constant: e.constant, eval: func(en *env) (any, error) {
		v, err := e.eval(en)
		if err != nil || v == nil {
			return nil, err
		}
		return castValue(from, t, v)
	}}
}

func (c *compiler) typeCast(tc *pg.TypeCast) (*expr, error) {
	t, err := typeOf(tc.TypeName)
	if err != nil {
		return nil, c.errAt(pgerr.As(err), tc.Location)
	}
	arg, err := c.compile(tc.Arg, t)
	if err != nil {
		return nil, err
	}
	if err := c.settle(arg, t); err != nil {
		return nil, c.errAt(pgerr.As(err), tc.Location)
	}
	if arg.t == t {
		return arg, nil
	}
	if !castable(arg.t, t) {
		return nil, c.errAt(pgerr.New(pgerr.CannotCoerce, "cannot cast type %s to %s", arg.t.Name, t.Name), tc.Location)
	}
	return c.castExpr(arg, t), nil
}

// typeOf resolves a TypeName (the last name part: pg_catalog.int4 is int4).
func typeOf(tn *pg.TypeName) (*types.T, error) {
	if tn == nil || len(tn.Names) == 0 {
		return nil, pgerr.New(pgerr.SyntaxError, "missing type name")
	}
	if len(tn.ArrayBounds) > 0 {
		return nil, pgerr.Unsupported("array types")
	}
	last, _ := tn.Names[len(tn.Names)-1].Node.(*pg.Node_String_)
	if last == nil {
		return nil, pgerr.New(pgerr.SyntaxError, "bad type name")
	}
	name := last.String_.Sval
	if t, ok := types.ByName(name); ok {
		if t == types.Varchar || t == types.Bpchar {
			// In expressions varchar and character are text (their lengths apply to columns).
			return types.Text, nil
		}
		return t, nil
	}
	if isKnownPGType(name) {
		return nil, pgerr.Unsupported("the type " + name)
	}
	return nil, pgerr.New(pgerr.UndefinedObject, "type \"%s\" does not exist", name)
}

// isKnownPGType is true for PostgreSQL built-in type names this server does not support, so
// that they give 0A000 rather than "does not exist".
func isKnownPGType(name string) bool {
	switch name {
	case "float4", "float8", "real", "double precision", "date", "time", "timetz", "interval",
		"json", "jsonb", "uuid", "inet", "cidr", "money", "xml", "oid", "char", "point", "serial", "bigserial",
		"smallserial", "serial8", "serial2":
		return true
	}
	return false
}

func castable(from, to *types.T) bool {
	switch {
	case from == to, to == types.Text, from == types.Text || from == types.Unknown:
		return true
	case from.IsInt() && (to.IsInt() || to == types.Numeric || to == types.Bool):
		return true
	case from == types.Numeric && to.IsInt():
		return true
	case from == types.Bool && to == types.Int4:
		return true
	case from == types.Oid && (to == types.Int8 || to.IsInt()), from.IsInt() && to == types.Oid:
		return true
	case (from == types.Timestamp && to == types.Timestamptz) || (from == types.Timestamptz && to == types.Timestamp):
		return true
	}
	return false
}

// castValue converts non-NULL v of type from to type to, as PostgreSQL's casts do.
func castValue(from, to *types.T, v any) (any, error) {
	if from == to {
		return v, nil
	}
	switch {
	case to == types.Text && from == types.Bpchar:
		s, err := asString(v)
		return strings.TrimRight(s, " "), err // character(n) to text drops the padding
	case to == types.Bpchar && (from == types.Text || from == types.Unknown):
		return asString(v)
	case to == types.Text:
		b, err := types.FormatText(from, v)
		return string(b), err
	case from == types.Text || from == types.Unknown:
		s, err := asString(v)
		if err != nil {
			return nil, err
		}
		return types.ParseText(to, s)
	case (from == types.Timestamp && to == types.Timestamptz) || (from == types.Timestamptz && to == types.Timestamp):
		return v, nil // TimeZone is UTC: the same instant, printed with or without +00
	case from.IsInt() && to == types.Oid:
		i, err := asInt(v)
		if err != nil {
			return nil, err
		}
		if i < 0 || i > math.MaxUint32 {
			return nil, pgerr.New(pgerr.NumericValueOutOfRange, "OID out of range")
		}
		return i, nil
	case from == types.Oid && to.IsInt(), from.IsInt() && to.IsInt():
		i, err := asInt(v)
		if err != nil {
			return nil, err
		}
		if err := types.Range(to, i); err != nil {
			return nil, err
		}
		return i, nil
	case from.IsInt() && to == types.Numeric:
		return asBig(v)
	case from.IsInt() && to == types.Bool:
		i, err := asInt(v)
		return i != 0, err
	case from == types.Bool && to == types.Int4:
		if v == true {
			return int64(1), nil
		}
		return int64(0), nil
	case from == types.Numeric && to.IsInt():
		b, err := asBig(v)
		if err != nil {
			return nil, err
		}
		if !b.IsInt64() || types.Range(to, b.Int64()) != nil {
			return nil, types.Range(to, math.MaxInt64)
		}
		return b.Int64(), nil
	}
	return nil, pgerr.New(pgerr.CannotCoerce, "cannot cast type %s to %s", from.Name, to.Name)
}

func (c *compiler) now() *expr {
	return &expr{t: types.Timestamptz, col: -1, constant: true, eval: func(e *env) (any, error) {
		return e.sess.txStart(), nil
	}}
}

func (c *compiler) coalesce(args []*pg.Node, hint *types.T) (*expr, error) {
	var es []*expr
	t := hint
	for _, a := range args {
		e, err := c.compile(a, t)
		if err != nil {
			return nil, err
		}
		if e.t != types.Unknown && (t == nil || t == types.Unknown) {
			t = e.t
		}
		es = append(es, e)
	}
	if t == nil {
		t = types.Text
	}
	for i, e := range es {
		ce, err := c.coerce(e, t)
		if err != nil {
			return nil, err
		}
		es[i] = ce
	}
	return &expr{t: t, col: -1, eval: func(en *env) (any, error) {
		for _, e := range es {
			v, err := e.eval(en)
			if err != nil || v != nil {
				return v, err
			}
		}
		return nil, nil
	}}, nil
}

func (c *compiler) boolExpr(b *pg.BoolExpr) (*expr, error) {
	var args []*expr
	constant := true
	for _, a := range b.Args {
		e, err := c.compile(a, types.Bool)
		if err != nil {
			return nil, err
		}
		if err := c.settle(e, types.Bool); err != nil {
			return nil, err
		}
		if e.t != types.Bool {
			return nil, c.errAt(pgerr.New(pgerr.DatatypeMismatch, "argument of %s must be type boolean, not type %s", boolOpName(b.Boolop), e.t.Name), b.Location)
		}
		constant = constant && e.constant
		args = append(args, e)
	}
	out := &expr{t: types.Bool, col: -1, constant: constant}
	switch b.Boolop {
	case pg.BoolExprType_NOT_EXPR:
		out.eval = func(e *env) (any, error) {
			v, err := args[0].eval(e)
			if err != nil || v == nil {
				return nil, err
			}
			return v != true, nil
		}
	case pg.BoolExprType_AND_EXPR, pg.BoolExprType_OR_EXPR:
		and := b.Boolop == pg.BoolExprType_AND_EXPR
		out.eval = func(e *env) (any, error) {
			sawNull := false
			for _, a := range args {
				v, err := a.eval(e)
				if err != nil {
					return nil, err
				}
				if v == nil {
					sawNull = true
					continue
				}
				if (v == true) != and {
					return !and, nil
				}
			}
			if sawNull {
				return nil, nil
			}
			return and, nil
		}
	default:
		return nil, pgerr.Unsupported("boolean operator " + b.Boolop.String())
	}
	return out, nil
}

func boolOpName(op pg.BoolExprType) string {
	switch op {
	case pg.BoolExprType_AND_EXPR:
		return "AND"
	case pg.BoolExprType_OR_EXPR:
		return "OR"
	}
	return "NOT"
}

func opName(names []*pg.Node) string {
	if len(names) == 0 {
		return ""
	}
	s, _ := names[len(names)-1].Node.(*pg.Node_String_)
	if s == nil {
		return ""
	}
	return s.String_.Sval
}

// pair compiles a binary operator's operands, inferring an untyped side from the other.
func (c *compiler) pair(l, r *pg.Node, hint *types.T) (*expr, *expr, error) {
	le, err := c.compile(l, nil)
	if err != nil {
		return nil, nil, err
	}
	rh := le.t
	if rh == types.Unknown {
		rh = hint
	}
	re, err := c.compile(r, rh)
	if err != nil {
		return nil, nil, err
	}
	if le.t == types.Unknown && re.t != types.Unknown {
		if err := c.settle(le, re.t); err != nil {
			return nil, nil, err
		}
	}
	if re.t == types.Unknown && le.t != types.Unknown {
		if err := c.settle(re, le.t); err != nil {
			return nil, nil, err
		}
	}
	if le.t == types.Unknown && re.t == types.Unknown {
		t := hint
		if t == nil || t == types.Unknown {
			t = types.Text
		}
		if err := c.settle(le, t); err != nil {
			return nil, nil, err
		}
		if err := c.settle(re, t); err != nil {
			return nil, nil, err
		}
	}
	return le, re, nil
}

func (c *compiler) aExpr(a *pg.A_Expr, hint *types.T) (*expr, error) {
	op := opName(a.Name)
	switch a.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
		if a.Lexpr == nil {
			return c.unary(op, a, hint)
		}
		le, re, err := c.pair(a.Lexpr, a.Rexpr, hint)
		if err != nil {
			return nil, c.errAt(pgerr.As(err), a.Location)
		}
		return c.binary(op, le, re, a.Location)
	case pg.A_Expr_Kind_AEXPR_IN:
		return c.in(a, op == "<>")
	case pg.A_Expr_Kind_AEXPR_OP_ANY:
		return c.anyArray(op, a)
	case pg.A_Expr_Kind_AEXPR_LIKE, pg.A_Expr_Kind_AEXPR_ILIKE:
		return c.like(a, op)
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN:
		list, ok := a.Rexpr.Node.(*pg.Node_List)
		if !ok || len(list.List.Items) != 2 {
			return nil, pgerr.New(pgerr.SyntaxError, "bad BETWEEN")
		}
		lo, err := c.compileCmp(">=", a.Lexpr, list.List.Items[0], a.Location)
		if err != nil {
			return nil, err
		}
		hi, err := c.compileCmp("<=", a.Lexpr, list.List.Items[1], a.Location)
		if err != nil {
			return nil, err
		}
		not := a.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN
		return &expr{t: types.Bool, col: -1, constant: lo.constant && hi.constant, eval: func(e *env) (any, error) {
			v, err := and3(e, lo, hi)
			if err != nil || v == nil {
				return nil, err
			}
			return (v == true) != not, nil
		}}, nil
	case pg.A_Expr_Kind_AEXPR_DISTINCT, pg.A_Expr_Kind_AEXPR_NOT_DISTINCT:
		le, re, err := c.pair(a.Lexpr, a.Rexpr, hint)
		if err != nil {
			return nil, err
		}
		eq, err := c.binary("=", le, re, a.Location)
		if err != nil {
			return nil, err
		}
		distinct := a.Kind == pg.A_Expr_Kind_AEXPR_DISTINCT
		return &expr{t: types.Bool, col: -1, eval: func(e *env) (any, error) {
			lv, err := le.eval(e)
			if err != nil {
				return nil, err
			}
			rv, err := re.eval(e)
			if err != nil {
				return nil, err
			}
			if lv == nil || rv == nil {
				return (lv == nil) != (rv == nil) == distinct, nil
			}
			v, err := eq.eval(e)
			if err != nil {
				return nil, err
			}
			return (v == true) != distinct, nil
		}}, nil
	}
	return nil, c.errAt(pgerr.Unsupported("the operator kind "+strings.TrimPrefix(a.Kind.String(), "AEXPR_")), a.Location)
}

func and3(e *env, a, b *expr) (any, error) {
	av, err := a.eval(e)
	if err != nil {
		return nil, err
	}
	bv, err := b.eval(e)
	if err != nil {
		return nil, err
	}
	if av == false || bv == false {
		return false, nil
	}
	if av == nil || bv == nil {
		return nil, nil
	}
	return true, nil
}

func (c *compiler) compileCmp(op string, l, r *pg.Node, loc int32) (*expr, error) {
	le, re, err := c.pair(l, r, nil)
	if err != nil {
		return nil, err
	}
	return c.binary(op, le, re, loc)
}

func (c *compiler) in(a *pg.A_Expr, not bool) (*expr, error) {
	list, ok := a.Rexpr.Node.(*pg.Node_List)
	if !ok {
		return nil, c.errAt(pgerr.Unsupported("IN with a subquery"), a.Location)
	}
	var eqs []*expr
	for _, item := range list.List.Items {
		eq, err := c.compileCmp("=", a.Lexpr, item, a.Location)
		if err != nil {
			return nil, err
		}
		eqs = append(eqs, eq)
	}
	return &expr{t: types.Bool, col: -1, eval: func(e *env) (any, error) {
		sawNull := false
		for _, eq := range eqs {
			v, err := eq.eval(e)
			if err != nil {
				return nil, err
			}
			if v == nil {
				sawNull = true
				continue
			}
			if v == true {
				return !not, nil
			}
		}
		if sawNull {
			return nil, nil
		}
		return not, nil
	}}, nil
}

func (c *compiler) unary(op string, a *pg.A_Expr, hint *types.T) (*expr, error) {
	arg, err := c.compile(a.Rexpr, hint)
	if err != nil {
		return nil, err
	}
	if err := c.settle(arg, types.Int4); err != nil {
		return nil, err
	}
	switch {
	case op == "-" && arg.t.IsInt():
		t := arg.t
		return &expr{t: t, col: -1, constant: arg.constant, eval: func(e *env) (any, error) {
			v, err := arg.eval(e)
			if err != nil || v == nil {
				return nil, err
			}
			i, err := asInt(v)
			if err != nil {
				return nil, err
			}
			if i == math.MinInt64 {
				return nil, types.Range(types.Int4, i) // "bigint out of range" below
			}
			if err := types.Range(t, -i); err != nil {
				return nil, err
			}
			return -i, nil
		}}, nil
	case op == "-" && arg.t == types.Numeric:
		return &expr{t: types.Numeric, col: -1, constant: arg.constant, eval: func(e *env) (any, error) {
			v, err := arg.eval(e)
			if err != nil || v == nil {
				return nil, err
			}
			b, err := asBig(v)
			if err != nil {
				return nil, err
			}
			return new(big.Int).Neg(b), nil
		}}, nil
	case op == "+" && (arg.t.IsInt() || arg.t == types.Numeric):
		return arg, nil
	}
	return nil, c.errAt(pgerr.New(pgerr.UndefinedFunction, "operator does not exist: %s %s", op, arg.t.Name), a.Location)
}

// wider is the result type of integer arithmetic on a and b, as PostgreSQL's operators give.
func wider(a, b *types.T) *types.T {
	if a == types.Int8 || b == types.Int8 {
		return types.Int8
	}
	if a == types.Int4 || b == types.Int4 {
		return types.Int4
	}
	return types.Int2
}

func outOfRange(t *types.T) error {
	switch t {
	case types.Int2:
		return pgerr.New(pgerr.NumericValueOutOfRange, "smallint out of range")
	case types.Int4:
		return pgerr.New(pgerr.NumericValueOutOfRange, "integer out of range")
	}
	return pgerr.New(pgerr.NumericValueOutOfRange, "bigint out of range")
}

// arith applies op to integers of result type t with PostgreSQL's overflow (22003) and
// division-by-zero (22012) errors.
func arith(op string, t *types.T, a, b int64) (int64, error) {
	var r int64
	switch op {
	case "+":
		r = a + b
		if (a > 0 && b > 0 && r < 0) || (a < 0 && b < 0 && r >= 0) {
			return 0, outOfRange(t)
		}
	case "-":
		r = a - b
		if (a >= 0 && b < 0 && r < 0) || (a < 0 && b > 0 && r >= 0) {
			return 0, outOfRange(t)
		}
	case "*":
		if a != 0 && b != 0 {
			hi, lo := mul128(a, b)
			if !(hi == 0 && lo >= 0) && !(hi == -1 && lo < 0) {
				return 0, outOfRange(t)
			}
			r = lo
		}
	case "/":
		if b == 0 {
			return 0, pgerr.New(pgerr.DivisionByZero, "division by zero")
		}
		if a == math.MinInt64 && b == -1 {
			return 0, outOfRange(t)
		}
		r = a / b
	case "%":
		if b == 0 {
			return 0, pgerr.New(pgerr.DivisionByZero, "division by zero")
		}
		if b == -1 {
			return 0, nil
		}
		r = a % b
	}
	if types.Range(t, r) != nil {
		return 0, outOfRange(t)
	}
	return r, nil
}

// mul128 is the signed 128-bit product of a and b as (high, low) words.
func mul128(a, b int64) (int64, int64) {
	p := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	if p.IsInt64() {
		v := p.Int64()
		if v < 0 {
			return -1, v
		}
		return 0, v
	}
	return 1, -1 // does not fit: a pattern the caller rejects
}

func (c *compiler) binary(op string, le, re *expr, loc int32) (*expr, error) {
	constant := le.constant && re.constant
	mk := func(t *types.T, f func(l, r any) (any, error)) *expr {
		return &expr{t: t, col: -1, constant: constant, eval: func(e *env) (any, error) {
			l, err := le.eval(e)
			if err != nil {
				return nil, err
			}
			r, err := re.eval(e)
			if err != nil {
				return nil, err
			}
			if l == nil || r == nil {
				return nil, nil
			}
			return f(l, r)
		}}
	}
	lt, rt := le.t, re.t
	switch op {
	case "+", "-", "*", "/", "%":
		if lt.IsInt() && rt.IsInt() {
			t := wider(lt, rt)
			return mk(t, func(l, r any) (any, error) {
				a, err := asInt(l)
				if err != nil {
					return nil, err
				}
				b, err := asInt(r)
				if err != nil {
					return nil, err
				}
				return arith(op, t, a, b)
			}), nil
		}
		if isNumericish(lt) && isNumericish(rt) && (op == "+" || op == "-" || op == "*") {
			return mk(types.Numeric, func(l, r any) (any, error) {
				a, err := asBig(l)
				if err != nil {
					return nil, err
				}
				b, err := asBig(r)
				if err != nil {
					return nil, err
				}
				switch op {
				case "+":
					return new(big.Int).Add(a, b), nil
				case "-":
					return new(big.Int).Sub(a, b), nil
				}
				return new(big.Int).Mul(a, b), nil
			}), nil
		}
	case "||":
		if lt == types.Text || rt == types.Text || lt == types.Bpchar || rt == types.Bpchar {
			return mk(types.Text, func(l, r any) (any, error) {
				ls, err := castValue(lt, types.Text, l)
				if err != nil {
					return nil, err
				}
				rs, err := castValue(rt, types.Text, r)
				if err != nil {
					return nil, err
				}
				a, err := asString(ls)
				if err != nil {
					return nil, err
				}
				b, err := asString(rs)
				if err != nil {
					return nil, err
				}
				return a + b, nil
			}), nil
		}
	case "=", "<>", "!=", "<", "<=", ">", ">=":
		if lt == types.Bpchar || rt == types.Bpchar {
			// character(n) compares without its trailing spaces, as in PostgreSQL.
			if (lt == types.Bpchar || lt == types.Text) && (rt == types.Bpchar || rt == types.Text) {
				return mk(types.Bool, func(l, r any) (any, error) {
					a, _ := l.(string)
					b, _ := r.(string)
					return cmpResult(op, strings.Compare(strings.TrimRight(a, " "), strings.TrimRight(b, " "))), nil
				}), nil
			}
		}
		if comparableTypes(lt, rt) {
			return mk(types.Bool, func(l, r any) (any, error) {
				return cmpResult(op, compareValues(l, r)), nil
			}), nil
		}
	default:
		return nil, c.errAt(pgerr.Unsupported("the operator "+op), loc)
	}
	return nil, c.errAt(pgerr.New(pgerr.UndefinedFunction, "operator does not exist: %s %s %s", lt.Name, op, rt.Name), loc)
}

func isNumericish(t *types.T) bool { return t.IsInt() || t == types.Numeric || t == types.Oid }

func typeBug(v any, want string) error {
	return pgerr.New(pgerr.InternalError, "internal error: value of Go type %T where %s was planned", v, want)
}

func asInt(v any) (int64, error) {
	if i, ok := v.(int64); ok {
		return i, nil
	}
	return 0, typeBug(v, "an integer")
}

func asString(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	return "", typeBug(v, "text")
}

// asBig returns an integer or numeric value as a *big.Int.
func asBig(v any) (*big.Int, error) {
	switch x := v.(type) {
	case int64:
		return big.NewInt(x), nil
	case *big.Int:
		return x, nil
	}
	return nil, typeBug(v, "a number")
}

func comparableTypes(a, b *types.T) bool {
	if isNumericish(a) && isNumericish(b) {
		return true
	}
	if (a == types.Timestamp || a == types.Timestamptz) && (b == types.Timestamp || b == types.Timestamptz) {
		return true
	}
	return a == b
}

func cmpResult(op string, c int) bool {
	switch op {
	case "=":
		return c == 0
	case "<>", "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

// compareValues orders two non-NULL values of comparable types (values of types that do not
// compare, which planning rules out, order by their Go type's name).
func compareValues(a, b any) int {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmp.Compare(x, y)
		case *big.Int:
			return big.NewInt(x).Cmp(y)
		}
	case *big.Int:
		if y, err := asBig(b); err == nil {
			return x.Cmp(y)
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y)
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return bytes.Compare(x, y)
		}
	case bool:
		if y, ok := b.(bool); ok {
			switch {
			case x == y:
				return 0
			case !x:
				return -1
			}
			return 1
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y)
		}
	}
	return strings.Compare(fmt.Sprintf("%T", a), fmt.Sprintf("%T", b))
}

// anyArray is `x = ANY(array)` for an integer x and an integer array (a parameter, as
// drivers send a list): true if an element equals x, NULL if x is NULL.
func (c *compiler) anyArray(op string, a *pg.A_Expr) (*expr, error) {
	if op != "=" {
		return nil, c.errAt(pgerr.Unsupported("the operator "+op+" with ANY (only =)"), a.Location)
	}
	le, err := c.compile(a.Lexpr, nil)
	if err != nil {
		return nil, err
	}
	if err := c.settle(le, types.Int4); err != nil {
		return nil, err
	}
	at := types.Int4Array
	switch {
	case le.t == types.Int8 || le.t == types.Oid:
		at = types.Int8Array
	case !le.t.IsInt():
		return nil, c.errAt(pgerr.Unsupported("ANY over values of type "+le.t.Name+" (only integers)"), a.Location)
	}
	re, err := c.compile(a.Rexpr, at)
	if err != nil {
		return nil, err
	}
	if err := c.settle(re, at); err != nil {
		return nil, err
	}
	if !re.t.IsArray() {
		return nil, c.errAt(pgerr.New(pgerr.DatatypeMismatch, "op ANY/ALL (array) requires array on right side"), a.Location)
	}
	return &expr{t: types.Bool, col: -1, constant: le.constant && re.constant, eval: func(e *env) (any, error) {
		lv, err := le.eval(e)
		if err != nil || lv == nil {
			return nil, err
		}
		rv, err := re.eval(e)
		if err != nil || rv == nil {
			return nil, err
		}
		x, err := asInt(lv)
		if err != nil {
			return nil, err
		}
		elems, ok := rv.([]int64)
		if !ok {
			return nil, typeBug(rv, "an integer array")
		}
		for _, el := range elems {
			if el == x {
				return true, nil
			}
		}
		return false, nil
	}}, nil
}

// like is LIKE and ILIKE (op "~~", "~~*", negated "!~~", "!~~*") on text: % matches any
// run of characters, _ one character, \ escapes the next.
func (c *compiler) like(a *pg.A_Expr, op string) (*expr, error) {
	le, re, err := c.pair(a.Lexpr, a.Rexpr, types.Text)
	if err != nil {
		return nil, err
	}
	for _, e := range []*expr{le, re} {
		if err := c.settle(e, types.Text); err != nil {
			return nil, err
		}
		if e.t != types.Text {
			return nil, c.errAt(pgerr.New(pgerr.UndefinedFunction, "operator does not exist: %s %s %s", le.t.Name, op, re.t.Name), a.Location)
		}
	}
	fold := strings.HasSuffix(op, "*")
	not := strings.HasPrefix(op, "!")
	return &expr{t: types.Bool, col: -1, constant: le.constant && re.constant, eval: func(e *env) (any, error) {
		lv, err := le.eval(e)
		if err != nil || lv == nil {
			return nil, err
		}
		rv, err := re.eval(e)
		if err != nil || rv == nil {
			return nil, err
		}
		s, p := lv.(string), rv.(string)
		if fold {
			s, p = strings.ToLower(s), strings.ToLower(p)
		}
		return likeMatch([]rune(s), []rune(p)) != not, nil
	}}, nil
}

func likeMatch(s, p []rune) bool {
	for len(p) > 0 {
		switch p[0] {
		case '%':
			for len(p) > 0 && p[0] == '%' {
				p = p[1:]
			}
			if len(p) == 0 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if likeMatch(s[i:], p) {
					return true
				}
			}
			return false
		case '_':
			if len(s) == 0 {
				return false
			}
			s, p = s[1:], p[1:]
		default:
			if p[0] == '\\' && len(p) > 1 {
				p = p[1:]
			}
			if len(s) == 0 || s[0] != p[0] {
				return false
			}
			s, p = s[1:], p[1:]
		}
	}
	return len(s) == 0
}
