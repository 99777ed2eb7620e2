package sql

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/vacuumops/vacuum-operator/internal/server/pgerr"
	"github.com/vacuumops/vacuum-operator/internal/server/types"
)

// CopySource is the client side of COPY FROM STDIN, which the wire layer provides: Start
// answers CopyInResponse for ncols text columns, Next returns the next CopyData payload (io.EOF
// at CopyDone, an error for CopyFail or a broken connection), and Drain discards the rest of
// the stream after a failure, so the connection is back in step.
type CopySource interface {
	Start(ncols int) error
	Next() ([]byte, error)
	Drain() error
}

// SetCopySource gives the session its connection's COPY stream.
func (s *Session) SetCopySource(c CopySource) { s.copy = c }

// maxCopyLine bounds one line of COPY data (a longer one cannot be a row of this engine).
const maxCopyLine = 64 << 20

func (s *Session) planCopy(cs *pg.CopyStmt) (*plan, error) {
	switch {
	case !cs.IsFrom:
		return nil, pgerr.Unsupported("COPY TO")
	case cs.Query != nil:
		return nil, pgerr.Unsupported("COPY (query)")
	case cs.Filename != "" || cs.IsProgram:
		return nil, pgerr.Unsupported("COPY FROM a file or program (only FROM STDIN)")
	case cs.WhereClause != nil:
		return nil, pgerr.Unsupported("COPY ... WHERE")
	}
	for _, o := range cs.Options {
		d := o.GetDefElem()
		if d == nil {
			return nil, pgerr.Unsupported("this COPY option")
		}
		switch d.Defname {
		case "format":
			if v := strVal(d.Arg); v != "text" {
				return nil, pgerr.Unsupported("COPY with FORMAT " + v + " (only text)")
			}
		case "freeze":
			// Accepted: FREEZE is an optimization hint; rows are stored as any insert.
			if d.Arg != nil && !defBool(d.Arg) {
				continue
			}
		default:
			return nil, pgerr.Unsupported("the COPY option " + strings.ToUpper(d.Defname))
		}
	}
	ti, err := s.tableRef(cs.Relation)
	if err != nil {
		return nil, err
	}
	w := newWriter(ti)
	target := make([]int, 0, len(ti.Columns))
	if len(cs.Attlist) == 0 {
		for i := range ti.Columns {
			target = append(target, i)
		}
	} else {
		for _, n := range cs.Attlist {
			name := strVal(n)
			i := indexOfColumn(ti, name)
			if i < 0 {
				return nil, pgerr.New(pgerr.UndefinedColumn, "column \"%s\" of relation \"%s\" does not exist", name, ti.Name)
			}
			target = append(target, i)
		}
	}
	return &plan{run: func(x *execCtx) (*Result, error) {
		if s.copy == nil {
			return nil, pgerr.Unsupported("COPY FROM STDIN on this connection")
		}
		if err := s.copy.Start(len(target)); err != nil {
			return nil, err
		}
		// As PostgreSQL's COPY: the rows fill heap pages through a BulkWrite ring, so a
		// load does not take over the pool (engine.CopyRing).
		w.ring = x.tx.NewCopyRing()
		n, ended, err := copyRows(x, s.copy, func(fields []*string, line int) error {
			if len(fields) != len(target) {
				if len(fields) > len(target) {
					return pgerr.New("22P04", "extra data after last expected column (line %d)", line)
				}
				return pgerr.New("22P04", "missing data for column \"%s\" (line %d)", ti.Columns[target[len(fields)]].Name, line)
			}
			vals := make([]any, len(ti.Columns))
			for i, f := range fields {
				if f == nil {
					continue
				}
				v, err := types.ParseText(w.cols[target[i]].t, *f)
				if err != nil {
					return err
				}
				vals[target[i]] = v
			}
			return w.insert(x, vals)
		})
		if err != nil {
			if ended {
				return nil, err
			}
			if derr := s.copy.Drain(); derr != nil {
				return nil, errors.Join(err, derr)
			}
			return nil, err
		}
		return &Result{Tag: "COPY " + strconv.Itoa(n)}, nil
	}}, nil
}

func defBool(n *pg.Node) bool {
	switch v := n.Node.(type) {
	case *pg.Node_Boolean:
		return v.Boolean.Boolval
	case *pg.Node_Integer:
		return v.Integer.Ival != 0
	case *pg.Node_String_:
		b, err := types.ParseText(types.Bool, v.String_.Sval)
		return err == nil && b == true
	}
	return true
}

// copyRows reads the COPY text stream line by line and calls row with each line's fields
// (nil for \N), returning the number of rows and whether the stream ended (CopyDone,
// CopyFail or a broken connection: nothing is left to drain).
func copyRows(x *execCtx, src CopySource, row func([]*string, int) error) (int, bool, error) {
	var buf []byte
	n, line := 0, 0
	done := false
	handle := func(l []byte) error {
		line++
		if string(l) == `\.` {
			done = true
			return nil
		}
		if err := x.ctx.Err(); err != nil {
			return err
		}
		fields, err := splitCopyLine(l)
		if err != nil {
			return err
		}
		n++
		return row(fields, line)
	}
	for {
		data, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, true, err
		}
		if done {
			continue
		}
		buf = append(buf, data...)
		for !done {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			l := buf[:i]
			if len(l) > 0 && l[len(l)-1] == '\r' {
				l = l[:len(l)-1]
			}
			if err := handle(l); err != nil {
				return n, false, err
			}
			buf = buf[i+1:]
		}
		if len(buf) > maxCopyLine {
			return n, false, pgerr.New(pgerr.ProgramLimitExceeded, "COPY line %d is longer than %d bytes", line+1, maxCopyLine)
		}
	}
	if len(buf) > 0 && !done {
		if err := handle(buf); err != nil {
			return n, true, err
		}
	}
	return n, true, nil
}

// splitCopyLine splits a COPY text line at tabs and undoes its backslash escapes.
func splitCopyLine(l []byte) ([]*string, error) {
	var fields []*string
	var cur []byte
	null := false
	raw := 0 // bytes of the field as written, to tell \N from a field containing it
	flush := func() {
		if null && raw == 2 {
			fields = append(fields, nil)
		} else {
			s := string(cur)
			fields = append(fields, &s)
		}
		cur, null, raw = cur[:0], false, 0
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c == '\t' {
			flush()
			continue
		}
		raw++
		if c != '\\' || i+1 == len(l) {
			cur = append(cur, c)
			continue
		}
		i++
		raw++
		switch e := l[i]; e {
		case 'N':
			null = true
		case 't':
			cur = append(cur, '\t')
		case 'n':
			cur = append(cur, '\n')
		case 'r':
			cur = append(cur, '\r')
		case 'b':
			cur = append(cur, '\b')
		case 'f':
			cur = append(cur, '\f')
		case 'v':
			cur = append(cur, '\v')
		case 'x':
			v, k := 0, 0
			for k < 2 && i+1 < len(l) && isHex(l[i+1]) {
				i++
				v = v*16 + hexVal(l[i])
				k++
				raw++
			}
			if k == 0 {
				cur = append(cur, 'x')
			} else {
				cur = append(cur, byte(v))
			}
		default:
			if e >= '0' && e <= '7' {
				v := int(e - '0')
				for k := 0; k < 2 && i+1 < len(l) && l[i+1] >= '0' && l[i+1] <= '7'; k++ {
					i++
					v = v*8 + int(l[i]-'0')
					raw++
				}
				cur = append(cur, byte(v))
			} else {
				cur = append(cur, e)
			}
		}
	}
	flush()
	return fields, nil
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) int {
	switch {
	case c >= 'a':
		return int(c-'a') + 10
	case c >= 'A':
		return int(c-'A') + 10
	}
	return int(c - '0')
}
