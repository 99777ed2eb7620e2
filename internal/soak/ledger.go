package soak

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Row is the committed content of one id (the table's other columns).
type Row struct {
	Grp int64
	N   int64
	Val string
}

// Op is one row operation of a transaction.
type Op struct {
	Kind byte // 'I' insert, 'U' update, 'D' delete
	ID   int64
	Row  Row // not for 'D'
}

func (o Op) String() string {
	if o.Kind == 'D' {
		return fmt.Sprintf("D %d", o.ID)
	}
	return fmt.Sprintf("%c %d %d %d %s", o.Kind, o.ID, o.Row.Grp, o.Row.N, o.Row.Val)
}

// parseOp parses the fields of an op (after "P <tx>").
func parseOp(f []string) (Op, error) {
	if len(f) < 2 || len(f[0]) != 1 {
		return Op{}, fmt.Errorf("bad op %q", strings.Join(f, " "))
	}
	o := Op{Kind: f[0][0]}
	var err error
	if o.ID, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return o, fmt.Errorf("bad id in op %q: %w", strings.Join(f, " "), err)
	}
	switch o.Kind {
	case 'D':
		if len(f) != 2 {
			return o, fmt.Errorf("bad delete %q", strings.Join(f, " "))
		}
		return o, nil
	case 'I', 'U':
	default:
		return o, fmt.Errorf("bad op kind %q", f[0])
	}
	if len(f) != 5 {
		return o, fmt.Errorf("bad op %q", strings.Join(f, " "))
	}
	if o.Row.Grp, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return o, fmt.Errorf("bad grp in op %q: %w", strings.Join(f, " "), err)
	}
	if o.Row.N, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return o, fmt.Errorf("bad n in op %q: %w", strings.Join(f, " "), err)
	}
	o.Row.Val = f[4]
	return o, nil
}

// State is the committed content of the table by id.
type State map[int64]Row

// Apply applies ops in order.
func (s State) Apply(ops []Op) {
	for _, o := range ops {
		if o.Kind == 'D' {
			delete(s, o.ID)
		} else {
			s[o.ID] = o.Row
		}
	}
}

// Clone returns an independent copy.
func (s State) Clone() State {
	c := make(State, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

// Pending is the transaction in flight at a crash: P lines without C.
type Pending struct {
	Tx  string
	Ops []Op
}

// Ledger is the driver's view of the ledger file: the committed state
// after every complete line read so far.
type Ledger struct {
	path      string
	off       int64 // bytes consumed (complete lines)
	State     State
	pending   map[string][]Op // transactions with P lines and no C or R yet
	Commits   int64           // C lines read
	Ops       int64           // operations of committed transactions
	Resolved  [2]int64        // R lines: [0] not committed, [1] committed
	Events    []string        // E lines read by the last Read (without "E ")
	TornTails int             // torn last lines dropped (DropTornTail)
}

// OpenLedger reads the whole ledger at path (creating an empty one).
func OpenLedger(path string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	l := &Ledger{path: path, State: State{}, pending: map[string][]Op{}}
	if _, err := l.Read(); err != nil {
		return nil, err
	}
	if err := l.DropTornTail(); err != nil {
		return nil, err
	}
	return l, nil
}

// Read consumes the complete lines appended since the last Read and
// returns the transactions now in flight (P lines without C or R). The
// events read are in l.Events.
func (l *Ledger) Read() ([]Pending, error) {
	b, err := os.ReadFile(l.path)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	if int64(len(b)) < l.off {
		return nil, fmt.Errorf("ledger %s shrank from %d to %d bytes", l.path, l.off, len(b))
	}
	b = b[l.off:]
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil // only a torn line: never confirmed
	}
	l.Events = l.Events[:0]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		line := string(b[:i])
		b = b[i+1:]
		if err := l.apply(line); err != nil {
			return nil, fmt.Errorf("ledger %s at byte %d: %w", l.path, l.off, err)
		}
		l.off += int64(i + 1)
	}
	var out []Pending
	for tx, ops := range l.pending {
		out = append(out, Pending{Tx: tx, Ops: ops})
	}
	return out, nil
}

func (l *Ledger) apply(line string) error {
	f := strings.Fields(line)
	if len(f) < 2 {
		return fmt.Errorf("bad line %q", line)
	}
	switch f[0] {
	case "P":
		op, err := parseOp(f[2:])
		if err != nil {
			return err
		}
		l.pending[f[1]] = append(l.pending[f[1]], op)
	case "C":
		ops, ok := l.pending[f[1]]
		if !ok {
			return fmt.Errorf("commit of unknown transaction %s", f[1])
		}
		l.commit(f[1], ops)
	case "R":
		ops, ok := l.pending[f[1]]
		if !ok || len(f) != 3 {
			return fmt.Errorf("bad resolution %q", line)
		}
		if f[2] == "1" {
			l.commit(f[1], ops)
			l.Resolved[1]++
		} else {
			delete(l.pending, f[1])
			l.Resolved[0]++
		}
	case "E":
		l.Events = append(l.Events, strings.Join(f[1:], " "))
	default:
		return fmt.Errorf("bad line %q", line)
	}
	return nil
}

func (l *Ledger) commit(tx string, ops []Op) {
	l.State.Apply(ops)
	l.Commits++
	l.Ops += int64(len(ops))
	delete(l.pending, tx)
}

// DropTornTail truncates the ledger to its last complete line. A child
// killed inside a large write(2) leaves part of a line (SIGKILL may cut a
// write between pages); that record was never confirmed, and whatever is
// appended next must start on a line of its own. Call it only while no
// child is running.
func (l *Ledger) DropTornTail() error {
	st, err := os.Stat(l.path)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if st.Size() == l.off {
		return nil
	}
	l.TornTails++
	if err := os.Truncate(l.path, l.off); err != nil {
		return fmt.Errorf("ledger: drop torn tail: %w", err)
	}
	return nil
}

// Append appends lines (each ending in '\n') and fsyncs the file.
func (l *Ledger) Append(lines string) error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	_, err = f.WriteString(lines)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append to ledger %s: %w", l.path, err)
	}
	return nil
}

// Resolve records that in-flight tx p was found committed or not, and
// applies it to the state.
func (l *Ledger) Resolve(p Pending, committed bool) error {
	v := "0"
	if committed {
		v = "1"
	}
	if err := l.Append(fmt.Sprintf("R %s %s\n", p.Tx, v)); err != nil {
		return err
	}
	_, err := l.Read()
	return err
}

// Writer is the child's side of the ledger: it appends records, fsyncing
// the ones that must be durable before the child goes on. Safe for
// concurrent use.
type Writer struct {
	mu sync.Mutex
	f  *os.File
}

// OpenWriter opens the ledger for appending.
func OpenWriter(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &Writer{f: f}, nil
}

// write appends s, fsyncing it if sync.
func (w *Writer) write(s string, sync bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.WriteString(s); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	if sync {
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
	}
	return nil
}

// Pending durably records the ops of tx before its Commit.
func (w *Writer) Pending(tx string, ops []Op) error {
	var b strings.Builder
	for _, o := range ops {
		fmt.Fprintf(&b, "P %s %s\n", tx, o)
	}
	return w.write(b.String(), true)
}

// Committed durably records that tx's Commit returned nil.
func (w *Writer) Committed(tx string) error { return w.write("C "+tx+"\n", true) }

// Event appends an event line (not fsynced: the kernel keeps it across a
// SIGKILL, and the ledger is outside the simulated power loss).
func (w *Writer) Event(child, ev string) error { return w.write("E "+child+" "+ev+"\n", false) }

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }
