package sql

import (
	"fmt"
	"math"
	"math/big"
	"runtime"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// funcName is a function call's name without a pg_catalog qualifier.
func funcName(f *pg.FuncCall) (string, error) {
	var parts []string
	for _, n := range f.Funcname {
		if s, ok := n.Node.(*pg.Node_String_); ok {
			parts = append(parts, s.String_.Sval)
		}
	}
	switch {
	case len(parts) == 1:
		return parts[0], nil
	case len(parts) == 2 && parts[0] == "pg_catalog":
		return parts[1], nil
	}
	return "", pgerr.New(pgerr.UndefinedFunction, "function %s does not exist", strings.Join(parts, "."))
}

// aggregate is one aggregate call of a query: its function, argument and running state.
type aggregate struct {
	name string
	star bool
	arg  *expr
	t    *types.T
}

// state is an aggregate's running value over one group.
type aggState struct {
	count int64
	v     any
}

func (a *aggregate) step(st *aggState, e *env) error {
	if a.star {
		st.count++
		return nil
	}
	v, err := a.arg.eval(e)
	if err != nil || v == nil {
		return err
	}
	st.count++
	switch a.name {
	case "count":
	case "sum":
		if a.t == types.Numeric {
			sum, _ := st.v.(*big.Int)
			if sum == nil {
				sum = new(big.Int)
			}
			b, err := asBig(v)
			if err != nil {
				return err
			}
			st.v = sum.Add(sum, b)
			return nil
		}
		sum, _ := st.v.(int64)
		i, err := asInt(v)
		if err != nil {
			return err
		}
		r, err := arith("+", types.Int8, sum, i)
		if err != nil {
			return err
		}
		st.v = r
	case "min":
		if st.v == nil || compareValues(v, st.v) < 0 {
			st.v = v
		}
	case "max":
		if st.v == nil || compareValues(v, st.v) > 0 {
			st.v = v
		}
	}
	return nil
}

func (a *aggregate) result(st *aggState) any {
	if a.name == "count" {
		return st.count
	}
	return st.v
}

func (c *compiler) aggregateCall(name string, f *pg.FuncCall) (*expr, error) {
	if c.aggs == nil {
		return nil, c.errAt(pgerr.New(pgerr.GroupingError, "aggregate functions are not allowed here"), f.Location)
	}
	if c.inAgg {
		return nil, c.errAt(pgerr.New(pgerr.GroupingError, "aggregate function calls cannot be nested"), f.Location)
	}
	if f.AggDistinct || f.AggFilter != nil || len(f.AggOrder) > 0 || f.Over != nil {
		return nil, c.errAt(pgerr.Unsupported("DISTINCT, FILTER, ORDER BY or OVER in an aggregate"), f.Location)
	}
	a := &aggregate{name: name, star: f.AggStar}
	if !f.AggStar {
		if len(f.Args) != 1 {
			return nil, c.errAt(pgerr.New(pgerr.UndefinedFunction, "function %s with %d arguments does not exist", name, len(f.Args)), f.Location)
		}
		c.inAgg = true
		arg, err := c.compile(f.Args[0], nil)
		c.inAgg = false
		if err != nil {
			return nil, err
		}
		if err := c.settle(arg, types.Text); err != nil {
			return nil, err
		}
		a.arg = arg
	} else if name != "count" {
		return nil, c.errAt(pgerr.New(pgerr.SyntaxError, "%s(*) is not an aggregate of PostgreSQL", name), f.Location)
	}
	switch name {
	case "count":
		a.t = types.Int8
	case "sum":
		switch a.arg.t {
		case types.Int2, types.Int4:
			a.t = types.Int8
		case types.Int8, types.Numeric:
			a.t = types.Numeric
		default:
			return nil, c.errAt(pgerr.New(pgerr.UndefinedFunction, "function sum(%s) does not exist", a.arg.t.Name), f.Location)
		}
	case "min", "max":
		a.t = a.arg.t
		if a.t == types.Bool || a.t == types.Bytea {
			return nil, c.errAt(pgerr.New(pgerr.UndefinedFunction, "function %s(%s) does not exist", name, a.t.Name), f.Location)
		}
	}
	i := len(*c.aggs)
	*c.aggs = append(*c.aggs, a)
	return &expr{t: a.t, col: -1, eval: func(e *env) (any, error) { return e.aggs[i], nil }}, nil
}

func (c *compiler) funcCall(f *pg.FuncCall, hint *types.T) (*expr, error) {
	name, err := funcName(f)
	if err != nil {
		return nil, c.errAt(pgerr.As(err), f.Location)
	}
	switch name {
	case "count", "sum", "min", "max":
		return c.aggregateCall(name, f)
	case "avg", "string_agg", "array_agg", "bool_and", "bool_or", "every", "stddev", "variance":
		return nil, c.errAt(pgerr.Unsupported("the aggregate "+name), f.Location)
	}
	if f.AggStar || f.Over != nil {
		return nil, c.errAt(pgerr.Unsupported(name+"(*) or OVER"), f.Location)
	}
	args := make([]*expr, len(f.Args))
	for i, a := range f.Args {
		e, err := c.compile(a, nil)
		if err != nil {
			return nil, err
		}
		args[i] = e
	}
	argc := func(n int) error {
		if len(args) != n {
			return c.errAt(pgerr.New(pgerr.UndefinedFunction, "function %s with %d arguments does not exist", name, len(args)), f.Location)
		}
		return nil
	}
	typed := func(i int, t *types.T) error {
		e, err := c.coerce(args[i], t)
		if err != nil {
			return c.errAt(pgerr.New(pgerr.UndefinedFunction, "function %s(%s) does not exist", name, args[i].t.Name), f.Location)
		}
		args[i] = e
		return nil
	}
	// pidCall is a boolean function of one backend pid (pg_cancel_backend, vacuum_pause, ...):
	// NULL gives NULL, any other pid act's answer (validPID says whether a backend can have it).
	pidCall := func(act func(e *env, pid int64) bool) (*expr, error) {
		if err := argc(1); err != nil {
			return nil, err
		}
		if err := typed(0, types.Int4); err != nil {
			return nil, err
		}
		return &expr{t: types.Bool, col: -1, eval: func(e *env) (any, error) {
			v, err := args[0].eval(e)
			if err != nil || v == nil {
				return nil, err
			}
			pid, err := asInt(v)
			if err != nil {
				return nil, err
			}
			return act(e, pid), nil
		}}, nil
	}
	switch name {
	case "version":
		if err := argc(0); err != nil {
			return nil, err
		}
		return constExpr(types.Text, Version), nil
	case "pg_is_in_recovery":
		if err := argc(0); err != nil {
			return nil, err
		}
		return constExpr(types.Bool, c.sess.db.InRecovery()), nil
	case "pg_current_wal_lsn":
		// PostgreSQL's pg_lsn is text here (as in pg_stat_replication); a standby has no
		// WAL of its own to write, so it refuses as PostgreSQL does.
		if err := argc(0); err != nil {
			return nil, err
		}
		if c.sess.db.InRecovery() {
			return nil, pgerr.New(pgerr.ObjectNotInPrerequisiteState, "recovery is in progress")
		}
		db := c.sess.db
		return &expr{t: types.Text, col: -1, eval: func(*env) (any, error) { return lsnText(uint64(db.CurrentLSN())), nil }}, nil
	case "pg_last_wal_receive_lsn", "pg_last_wal_replay_lsn":
		// A standby's received and replayed ends; NULL on a primary, which was started
		// without recovery (as PostgreSQL's).
		if err := argc(0); err != nil {
			return nil, err
		}
		db, replay := c.sess.db, name == "pg_last_wal_replay_lsn"
		return &expr{t: types.Text, col: -1, eval: func(*env) (any, error) {
			if !db.InRecovery() {
				return nil, nil
			}
			if replay {
				return lsnText(uint64(db.ReplayedLSN())), nil
			}
			return lsnText(uint64(db.ReceivedLSN())), nil
		}}, nil
	case "pg_backend_pid":
		if err := argc(0); err != nil {
			return nil, err
		}
		pid := int64(c.sess.pid)
		return constExpr(types.Int4, pid), nil
	case "now", "transaction_timestamp", "statement_timestamp":
		if err := argc(0); err != nil {
			return nil, err
		}
		return c.now(), nil
	case "clock_timestamp":
		if err := argc(0); err != nil {
			return nil, err
		}
		return &expr{t: types.Timestamptz, col: -1, eval: func(*env) (any, error) { return time.Now().UTC(), nil }}, nil
	case "current_setting":
		if len(args) != 1 && len(args) != 2 {
			return nil, argc(1)
		}
		if err := typed(0, types.Text); err != nil {
			return nil, err
		}
		missingOK := false
		if len(args) == 2 {
			if err := typed(1, types.Bool); err != nil {
				return nil, err
			}
		}
		return &expr{t: types.Text, col: -1, eval: func(e *env) (any, error) {
			v, err := args[0].eval(e)
			if err != nil || v == nil {
				return nil, err
			}
			if len(args) == 2 {
				m, err := args[1].eval(e)
				if err != nil {
					return nil, err
				}
				missingOK = m == true
			}
			name, err := asString(v)
			if err != nil {
				return nil, err
			}
			s, ok := e.sess.settings.get(name)
			if !ok {
				if missingOK {
					return nil, nil
				}
				return nil, pgerr.New(pgerr.UndefinedParameter, "unrecognized configuration parameter \"%s\"", name)
			}
			return s, nil
		}}, nil
	case "pg_sleep":
		if err := argc(1); err != nil {
			return nil, err
		}
		if err := typed(0, types.Int8); err != nil {
			return nil, err
		}
		return &expr{t: types.VoidT, col: -1, eval: func(e *env) (any, error) {
			v, err := args[0].eval(e)
			if err != nil || v == nil {
				return types.Void{}, err
			}
			secs, err := asInt(v)
			if err != nil {
				return nil, err
			}
			t := time.NewTimer(time.Duration(secs) * time.Second)
			defer t.Stop()
			select {
			case <-e.ctx.Done():
				return nil, e.ctx.Err()
			case <-t.C:
			}
			return types.Void{}, nil
		}}, nil
	case "length", "char_length", "upper", "lower":
		if err := argc(1); err != nil {
			return nil, err
		}
		if err := typed(0, types.Text); err != nil {
			return nil, err
		}
		rt := types.Text
		if name == "length" || name == "char_length" {
			rt = types.Int4
		}
		return &expr{t: rt, col: -1, constant: args[0].constant, eval: func(e *env) (any, error) {
			v, err := args[0].eval(e)
			if err != nil || v == nil {
				return nil, err
			}
			s, err := asString(v)
			if err != nil {
				return nil, err
			}
			switch name {
			case "upper":
				return strings.ToUpper(s), nil
			case "lower":
				return strings.ToLower(s), nil
			}
			return int64(len([]rune(s))), nil
		}}, nil
	case "abs":
		if err := argc(1); err != nil {
			return nil, err
		}
		if err := c.settle(args[0], types.Int4); err != nil {
			return nil, err
		}
		a := args[0]
		if !a.t.IsInt() {
			return nil, c.errAt(pgerr.New(pgerr.UndefinedFunction, "function abs(%s) does not exist", a.t.Name), f.Location)
		}
		return &expr{t: a.t, col: -1, constant: a.constant, eval: func(e *env) (any, error) {
			v, err := a.eval(e)
			if err != nil || v == nil {
				return nil, err
			}
			i, err := asInt(v)
			if err != nil {
				return nil, err
			}
			if i < 0 {
				return arith("-", a.t, 0, i)
			}
			return v, nil
		}}, nil
	case "generate_series":
		return nil, c.errAt(pgerr.Unsupported("generate_series outside FROM"), f.Location)
	case "pg_control_system":
		return nil, c.errAt(pgerr.Unsupported("pg_control_system() outside FROM (SELECT system_identifier FROM pg_control_system())"), f.Location)
	case "pg_cancel_backend", "pg_terminate_backend":
		if len(args) == 2 && name == "pg_terminate_backend" {
			args = args[:1] // the timeout: the session is told to end, not waited for
		}
		terminate := name == "pg_terminate_backend"
		return pidCall(func(e *env, pid int64) bool {
			if !validPID(pid) || e.sess.signal == nil || !e.sess.signal(uint32(pid), terminate) {
				w := warning(pgerr.WarningCode, fmt.Sprintf("PID %d is not a PostgreSQL backend process", pid))
				e.sess.pending = append(e.sess.pending, w)
				return false
			}
			return true
		})
	case "vacuum_set_throttle":
		if err := argc(3); err != nil {
			return nil, err
		}
		if err := typed(0, types.Int4); err != nil {
			return nil, err
		}
		for i := 1; i < 3; i++ {
			if err := typed(i, types.Text); err != nil {
				return nil, err
			}
		}
		return &expr{t: types.Bool, col: -1, eval: func(e *env) (any, error) {
			vals := make([]any, 3)
			for i, a := range args {
				v, err := a.eval(e)
				if err != nil || v == nil {
					return nil, err
				}
				vals[i] = v
			}
			pid, _ := asInt(vals[0])
			setting, _ := asString(vals[1])
			value, _ := asString(vals[2])
			if !validPID(pid) {
				return false, nil
			}
			return e.sess.vacuums.setThrottle(uint32(pid), strings.ToLower(setting), value)
		}}, nil
	case "vacuum_pause", "vacuum_resume":
		pause := name == "vacuum_pause"
		return pidCall(func(e *env, pid int64) bool { return validPID(pid) && e.sess.vacuums.setPaused(uint32(pid), pause) })
	case "set_config":
		if err := argc(3); err != nil {
			return nil, err
		}
		for i, t := range []*types.T{types.Text, types.Text, types.Bool} {
			if err := typed(i, t); err != nil {
				return nil, err
			}
		}
		return &expr{t: types.Text, col: -1, eval: func(e *env) (any, error) {
			vals := make([]any, 3)
			for i, a := range args {
				v, err := a.eval(e)
				if err != nil {
					return nil, err
				}
				vals[i] = v
			}
			if vals[0] == nil {
				return nil, pgerr.New(pgerr.NullValueNotAllowed, "SET requires parameter name")
			}
			if vals[2] == true {
				return nil, pgerr.Unsupported("set_config(..., is_local => true) (SET LOCAL)")
			}
			name, _ := asString(vals[0])
			value := ""
			if vals[1] != nil {
				value, _ = asString(vals[1])
			}
			if err := e.sess.settings.set(name, value, vals[1] == nil); err != nil {
				return nil, err
			}
			v, _ := e.sess.settings.get(name)
			return v, nil
		}}, nil
	case "to_regclass":
		if err := argc(1); err != nil {
			return nil, err
		}
		if err := typed(0, types.Text); err != nil {
			return nil, err
		}
		return &expr{t: types.Oid, col: -1, eval: func(e *env) (any, error) {
			v, err := args[0].eval(e)
			if err != nil || v == nil {
				return nil, err
			}
			name, _ := asString(v)
			return e.sess.regclass(name)
		}}, nil
	case "pg_relation_size":
		if err := argc(1); err != nil {
			return nil, err
		}
		if err := typed(0, types.Oid); err != nil {
			return nil, err
		}
		return &expr{t: types.Int8, col: -1, eval: func(e *env) (any, error) {
			v, err := args[0].eval(e)
			if err != nil || v == nil {
				return nil, err
			}
			oid, err := asInt(v)
			if err != nil {
				return nil, err
			}
			return e.sess.relationSize(uint32(oid))
		}}, nil
	}
	return nil, c.errAt(pgerr.New(pgerr.UndefinedFunction, "function %s does not exist", name), f.Location)
}

// Version is what version() returns. It starts with "vacuumops engine-server", which the
// runner's online driver detects the server by; server_version (15.0) is what PostgreSQL
// clients parse.
const Version = "vacuumops engine-server (PostgreSQL 15.0 protocol) on " + runtime.GOARCH + "-" + runtime.GOOS + ", compiled by Go"

// validPID reports whether a backend can have pid (a positive 32-bit number).
func validPID(pid int64) bool { return pid > 0 && pid <= math.MaxUint32 }

// lsnText writes a WAL position as PostgreSQL's pg_lsn prints it (16/B374D848).
func lsnText(l uint64) string { return fmt.Sprintf("%X/%X", l>>32, uint32(l)) }
