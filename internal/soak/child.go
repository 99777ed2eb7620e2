package soak

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs/faultfs"
)

// Child exit codes.
const (
	// ExitPoweredOff: the simulated power loss happened (expected).
	ExitPoweredOff = 3
	// ExitFailed: the child failed by itself (a bug, reported).
	ExitFailed = 2
)

// The table the soak writes, and its two indexes (a unique-by-workload id
// and a low-cardinality group, so the second index holds many duplicates).
const (
	Table    = "soak"
	IDIndex  = "soak_id"
	GrpIndex = "soak_grp"
	numGrps  = 17
)

// Columns of Table.
var Columns = []engine.Column{{Name: "id", Type: engine.Int8}, {Name: "grp", Type: engine.Int8},
	{Name: "val", Type: engine.Bytea}, {Name: "n", Type: engine.Int8}}

// EngineOptions are shared by the children and the verifier: a small pool
// (dirty pages are evicted mid-transaction), small relation and WAL
// segments (several files per fork, segment switches) and frequent
// automatic checkpoints, so crashes land in every phase.
func EngineOptions() engine.Options {
	return engine.Options{
		BufferPoolBytes:    96 * page.Size,
		SegmentSize:        32 * page.Size,
		WALSegmentSize:     1 << 20,
		CheckpointWALBytes: 384 << 10,
		LockTimeout:        10 * time.Second,
	}
}

// ChildArgs configure one child.
type ChildArgs struct {
	Data, Ledger string
	Name         string // unique among children: prefixes transaction names
	Seed         uint64
	Rows         int // table size the writer steers towards
	// PowerLossAfter > 0 cuts the power at that mutating file operation.
	PowerLossAfter int
	// RecoveryOnly opens the directory and writes nothing.
	RecoveryOnly bool
}

// Args renders a as command-line arguments for ChildMain.
func (a ChildArgs) Args() []string {
	out := []string{"--data", a.Data, "--ledger", a.Ledger, "--name", a.Name,
		"--seed", fmt.Sprint(a.Seed), "--rows", fmt.Sprint(a.Rows),
		"--powerloss-after", fmt.Sprint(a.PowerLossAfter)}
	if a.RecoveryOnly {
		out = append(out, "--recovery-only")
	}
	return out
}

// ChildMain runs a child with args (as rendered by ChildArgs.Args) and
// returns its exit code when it stops by itself: ExitPoweredOff after the
// simulated power loss, ExitFailed on any other failure (written to
// stderr). Normally it runs until killed.
func ChildMain(args []string, stdout, stderr io.Writer) int {
	var a ChildArgs
	fl := flag.NewFlagSet("soak child", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&a.Data, "data", "", "data directory")
	fl.StringVar(&a.Ledger, "ledger", "", "ledger file")
	fl.StringVar(&a.Name, "name", "c", "child name")
	fl.Uint64Var(&a.Seed, "seed", 1, "random seed")
	fl.IntVar(&a.Rows, "rows", 1000, "table size to steer towards")
	fl.IntVar(&a.PowerLossAfter, "powerloss-after", 0, "cut the power at this mutating file operation (0 = never)")
	fl.BoolVar(&a.RecoveryOnly, "recovery-only", false, "open the directory and write nothing")
	if err := fl.Parse(args); err != nil {
		return ExitFailed
	}
	c := &child{args: a, rng: rand.New(rand.NewPCG(a.Seed, 0x50a4))}
	err := c.run(stdout)
	if c.ffs != nil && c.ffs.PoweredOff() {
		if c.ledger != nil {
			_ = c.ledger.Event(a.Name, "powerloss")
		}
		return ExitPoweredOff
	}
	_, _ = fmt.Fprintf(stderr, "soak child %s: %v\n", a.Name, err)
	return ExitFailed
}

type child struct {
	args   ChildArgs
	rng    *rand.Rand
	ffs    *faultfs.FS
	db     *engine.DB
	ledger *Writer
	// full is held shared by each writer transaction and exclusively by
	// VACUUM FULL, which moves every row (the writer's TIDs go stale).
	full sync.RWMutex
	ids  map[int64]bool // ids with a committed row
	next int64          // next id to insert
	txn  int
}

// run returns only on failure (including the power loss).
func (c *child) run(stdout io.Writer) error {
	var err error
	if c.ledger, err = OpenWriter(c.args.Ledger); err != nil {
		return err
	}
	opts := EngineOptions()
	if c.args.PowerLossAfter > 0 {
		c.ffs = faultfs.New(vfs.OS())
		c.ffs.CrashAfter(c.args.PowerLossAfter, faultfs.PowerLossOptions{TearProb: 0.5, Seed: c.args.Seed})
		opts.FS = c.ffs
	}
	if err := c.ledger.Event(c.args.Name, "open"); err != nil {
		return err
	}
	if c.db, err = engine.Open(c.args.Data, opts); err != nil {
		return err
	}
	if err := c.ledger.Event(c.args.Name, "ready"); err != nil {
		return err
	}
	if _, err := io.WriteString(stdout, "ready\n"); err != nil {
		return err
	}
	if c.args.RecoveryOnly {
		select {} // wait for the kill
	}
	if err := c.loadIDs(); err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() { errc <- c.writer() }()
	go func() { errc <- c.maintenance(rand.New(rand.NewPCG(c.args.Seed, 0x3a1))) }()
	return <-errc
}

// loadIDs reads the ids of the visible rows.
func (c *child) loadIDs() error {
	c.ids = map[int64]bool{}
	tx, err := c.db.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	return tx.Scan(Table, func(_ page.TID, r []any) error {
		id, _ := r[0].(int64)
		c.ids[id] = true
		c.next = max(c.next, id+1)
		return nil
	})
}

func (c *child) writer() error {
	for {
		if err := c.step(); err != nil {
			return err
		}
	}
}

// randomID picks an id with a committed row.
func (c *child) randomID() (int64, bool) {
	if len(c.ids) == 0 {
		return 0, false
	}
	for range 20 {
		if id := c.rng.Int64N(c.next); c.ids[id] {
			return id, true
		}
	}
	for id := range c.ids {
		return id, true
	}
	return 0, false
}

// step runs one transaction: 1-4 operations, sometimes a bulk one of up
// to 200; one in ten is rolled back.
func (c *child) step() error {
	c.full.RLock()
	defer c.full.RUnlock()
	c.txn++
	name := fmt.Sprintf("%s.%d", c.args.Name, c.txn)
	tx, err := c.db.Begin()
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	tids := map[int64]page.TID{} // rows this transaction wrote
	gone := map[int64]bool{}     // rows this transaction deleted
	live := func(id int64) bool { return !gone[id] && (c.ids[id] || tids[id] != page.TID{}) }
	nops := 1 + c.rng.IntN(4)
	if c.rng.IntN(20) == 0 {
		nops = 20 + c.rng.IntN(180)
	}
	// Out of 10: inserts below ins, updates below upd, deletes above; the
	// table grows to about Rows and then stays there.
	ins, upd := 6, 8
	if len(c.ids) > c.args.Rows {
		ins, upd = 2, 6
	}
	var ops []Op
	for i := range nops {
		r := Row{Grp: c.rng.Int64N(numGrps), N: c.rng.Int64N(1 << 40),
			Val: fmt.Sprintf("%s-%d-%s", name, i, strings.Repeat("v", c.rng.IntN(300)))}
		id, ok := c.randomID()
		ok = ok && live(id)
		switch k := c.rng.IntN(10); {
		case k < ins || !ok:
			id = c.next
			c.next++
			tid, err := tx.Insert(Table, []any{id, r.Grp, r.Val, r.N})
			if err != nil {
				return fmt.Errorf("insert %d: %w", id, err)
			}
			tids[id], gone[id] = tid, false
			ops = append(ops, Op{Kind: 'I', ID: id, Row: r})
		case k < upd:
			old, err := c.tidOf(tx, tids, id)
			if err != nil {
				return err
			}
			tid, err := tx.Update(Table, old, []any{id, r.Grp, r.Val, r.N})
			if err != nil {
				return fmt.Errorf("update %d at %v: %w", id, old, err)
			}
			tids[id] = tid
			ops = append(ops, Op{Kind: 'U', ID: id, Row: r})
		default:
			old, err := c.tidOf(tx, tids, id)
			if err != nil {
				return err
			}
			if err := tx.Delete(Table, old); err != nil {
				return fmt.Errorf("delete %d at %v: %w", id, old, err)
			}
			delete(tids, id)
			gone[id] = true
			ops = append(ops, Op{Kind: 'D', ID: id})
		}
	}
	if c.rng.IntN(10) == 0 {
		return tx.Rollback()
	}
	if err := c.ledger.Pending(name, ops); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %s: %w", name, err)
	}
	if err := c.ledger.Committed(name); err != nil {
		return err
	}
	for _, o := range ops {
		if o.Kind == 'D' {
			delete(c.ids, o.ID)
		} else {
			c.ids[o.ID] = true
		}
	}
	return nil
}

// tidOf finds the TID of id's current version: written by tx itself, or
// through the id index.
func (c *child) tidOf(tx *engine.Tx, tids map[int64]page.TID, id int64) (page.TID, error) {
	if t, ok := tids[id]; ok {
		return t, nil
	}
	found, err := tx.IndexLookup(IDIndex, id)
	if err != nil {
		return page.TID{}, fmt.Errorf("look up %d: %w", id, err)
	}
	if len(found) != 1 {
		return page.TID{}, fmt.Errorf("look up %d: %d rows, want 1", id, len(found))
	}
	return found[0].TID, nil
}

// maintenance runs checkpoints, lazy vacuums and VACUUM FULL at random
// moments, concurrently with the writer, logging each one's begin and end.
func (c *child) maintenance(rng *rand.Rand) error {
	opts := vacuum.DefaultOptions()
	opts.Throttle = &throttle.Settings{}
	opts.MaintenanceWorkMem = vacuum.MinMaintenanceWorkMem
	for {
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		var kind string
		var run func() error
		switch k := rng.IntN(10); {
		case k < 4:
			kind, run = "checkpoint", c.db.Checkpoint
		case k < 8:
			kind = "lazy"
			run = func() error { _, err := c.db.Vacuum(context.Background(), Table, opts); return err }
		default:
			kind = "full"
			run = func() error {
				c.full.Lock()
				defer c.full.Unlock()
				_, err := c.db.VacuumFull(context.Background(), Table, opts)
				return err
			}
		}
		if err := c.ledger.Event(c.args.Name, "begin "+kind); err != nil {
			return err
		}
		if err := run(); err != nil {
			if errors.Is(err, vacuum.ErrNoSpace) {
				continue // a full test volume: not a soak failure
			}
			return fmt.Errorf("%s: %w", kind, err)
		}
		if err := c.ledger.Event(c.args.Name, "end "+kind); err != nil {
			return err
		}
	}
}
