package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// BloatOutput is what `bloat --json` prints: what it did and how long it took.
type BloatOutput struct {
	Table         string  `json:"table"`
	RowsInserted  int64   `json:"rowsInserted"`
	FirstID       int64   `json:"firstId"`
	RowsDeleted   int64   `json:"rowsDeleted"`
	RowsUpdated   int64   `json:"rowsUpdated"`
	DeadTuples    int64   `json:"deadTuples"`
	LoadSeconds   float64 `json:"loadSeconds"`
	RowsPerSecond float64 `json:"rowsPerSecond"`
	TotalSeconds  float64 `json:"totalSeconds"`
}

// bloatParams are bloat's flags.
type bloatParams struct {
	data, table                  string
	rows                         int64
	deadFraction, updateFraction float64
	indexes, payloadBytes        int
	seed                         uint64
	batch                        int
	bufferPool                   quantityValue
	lockTimeout                  time.Duration
	allowRecovery                bool
	json                         bool
}

// bloatCheckpointWAL is the WAL volume between bloat's automatic checkpoints.
const bloatCheckpointWAL = 1 << 30

// maxBloatIndexes bounds --indexes (each is a B-tree maintained on every insert).
const maxBloatIndexes = 32

func parseBloatFlags(args []string) (bloatParams, error) {
	var p bloatParams
	fs := newFlagSet("bloat")
	fs.StringVar(&p.data, "data", "", "data directory")
	fs.StringVar(&p.table, "table", "", "table to create (if needed) and fill")
	fs.Int64Var(&p.rows, "rows", 100000, "rows to insert")
	fs.Float64Var(&p.deadFraction, "dead-fraction", 0.2, "fraction of the inserted rows to delete")
	fs.Float64Var(&p.updateFraction, "update-fraction", 0, "fraction of the rows not deleted to update once")
	fs.IntVar(&p.indexes, "indexes", 1, "B-tree indexes: id, then k1..kN-1")
	fs.IntVar(&p.payloadBytes, "payload-bytes", 100, "bytes of payload per row")
	fs.Uint64Var(&p.seed, "seed", 1, "seed of the pseudo-random keys, payloads and choices")
	fs.IntVar(&p.batch, "batch", 10000, "rows per transaction")
	p.bufferPool.q = mustQuantity("256Mi")
	fs.Var(&p.bufferPool, "buffer-pool", "buffer pool size")
	fs.DurationVar(&p.lockTimeout, "lock-timeout", 0, "how long to wait for a busy data directory")
	fs.BoolVar(&p.allowRecovery, "allow-crash-recovery", false,
		"replay the WAL of a data directory that was not shut down cleanly (else exit 7)")
	fs.BoolVar(&p.json, "json", false, "print what was done as JSON")
	if err := parseFlags(fs, args); err != nil {
		return p, err
	}
	switch {
	case p.data == "":
		return p, usagef("--data is required")
	case p.table == "":
		return p, usagef("--table is required")
	case p.rows < 0:
		return p, usagef("--rows must be at least 0, got %d", p.rows)
	case p.deadFraction < 0 || p.deadFraction > 1:
		return p, usagef("--dead-fraction must be between 0 and 1, got %v", p.deadFraction)
	case p.updateFraction < 0 || p.updateFraction > 1:
		return p, usagef("--update-fraction must be between 0 and 1, got %v", p.updateFraction)
	case p.indexes < 1 || p.indexes > maxBloatIndexes:
		return p, usagef("--indexes must be between 1 and %d, got %d", maxBloatIndexes, p.indexes)
	case p.payloadBytes < 0 || p.payloadBytes > page.Size/2:
		return p, usagef("--payload-bytes must be between 0 and %d, got %d", page.Size/2, p.payloadBytes)
	case p.batch < 1:
		return p, usagef("--batch must be at least 1, got %d", p.batch)
	}
	if v, ok := p.bufferPool.q.AsInt64(); !ok || v < 1<<20 {
		return p, usagef("--buffer-pool must be at least 1Mi, got %s", p.bufferPool.q.String())
	}
	return p, nil
}

func cmdBloat(ctx context.Context, args []string, env Env) (err error) {
	p, err := parseBloatFlags(args)
	if err != nil {
		return err
	}
	pool, _ := p.bufferPool.q.AsInt64()
	// A bulk load checkpoints rarely: every checkpoint would write the hot pages again and
	// make the next change of each page log a full-page image.
	opts := recoveryGate(engine.Options{BufferPoolBytes: pool, CheckpointWALBytes: bloatCheckpointWAL, Logf: engineLog(env.Stderr)},
		"", p.allowRecovery)
	db, err := openDB(ctx, p.data, opts, p.lockTimeout)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	out, err := bloat(ctx, db, p)
	if err != nil {
		return err
	}
	if p.json {
		return writeJSON(env.Stdout, out)
	}
	_, err = fmt.Fprintf(env.Stdout, "bloat %s: inserted %d rows (id %d..%d) in %.2fs (%.0f rows/s); deleted %d, updated %d; "+
		"%d dead tuples for vacuum; %.2fs in all\n", out.Table, out.RowsInserted, out.FirstID,
		out.FirstID+out.RowsInserted-1, out.LoadSeconds, out.RowsPerSecond, out.RowsDeleted, out.RowsUpdated,
		out.DeadTuples, out.TotalSeconds)
	return err
}

// bloatColumns is the schema bloat creates: id, k1..k(indexes-1), payload.
func bloatColumns(indexes int) []engine.Column {
	cols := []engine.Column{{Name: "id", Type: engine.Int8}}
	for i := 1; i < indexes; i++ {
		cols = append(cols, engine.Column{Name: fmt.Sprintf("k%d", i), Type: engine.Int8})
	}
	return append(cols, engine.Column{Name: "payload", Type: engine.Bytea})
}

// ensureBloatTable creates the table and its indexes, or checks that an existing table has
// the schema bloat would have given it. It returns the first id to insert.
func ensureBloatTable(ctx context.Context, db *engine.DB, p bloatParams) (int64, error) {
	cols := bloatColumns(p.indexes)
	info, err := db.Table(p.table)
	if errors.Is(err, engine.ErrNoSuchTable) {
		if err := db.CreateTable(p.table, cols); err != nil {
			return 0, fmt.Errorf("create table %q: %w", p.table, err)
		}
		for _, c := range cols[:len(cols)-1] {
			name := p.table + "_" + c.Name + "_idx"
			if c.Name == "id" {
				name = p.table + "_pkey"
			}
			if err := db.CreateIndex(name, p.table, c.Name); err != nil {
				return 0, fmt.Errorf("create index %q: %w", name, err)
			}
		}
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	if !slices.Equal(info.Columns, cols) {
		return 0, usagef("table %q exists with columns %v, not the %d-index bloat schema %v",
			p.table, info.Columns, p.indexes, cols)
	}
	// Continue after the highest id already there.
	tx, err := db.Begin()
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }() // read only: nothing to undo
	var maxID int64
	err = tx.ScanContext(ctx, p.table, func(_ page.TID, row []any) error {
		if id, _ := row[0].(int64); id > maxID {
			maxID = id
		}
		return nil
	})
	return maxID + 1, err
}

// bloat loads p.rows rows, then deletes and updates deterministic, disjoint random subsets.
func bloat(ctx context.Context, db *engine.DB, p bloatParams) (BloatOutput, error) {
	start := time.Now()
	out := BloatOutput{Table: p.table}
	first, err := ensureBloatTable(ctx, db, p)
	if err != nil {
		return out, err
	}
	out.FirstID = first
	rng := rand.New(rand.NewPCG(p.seed, 0x9e3779b97f4a7c15))
	nk := p.indexes - 1
	row := func(id int64, vals []any) []any {
		vals = append(vals[:0], id)
		for range nk {
			vals = append(vals, int64(rng.Uint64()>>1))
		}
		return append(vals, payload(rng, p.payloadBytes))
	}
	tids := make([]page.TID, 0, p.rows)
	vals := make([]any, 0, p.indexes+1)
	err = inBatches(ctx, db, int(p.rows), p.batch, func(tx *engine.Tx, i int) error {
		tid, err := tx.Insert(p.table, row(first+int64(i), vals))
		tids = append(tids, tid)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("bloat %q: load: %w", p.table, err)
	}
	out.RowsInserted = p.rows
	out.LoadSeconds = time.Since(start).Seconds()
	out.RowsPerSecond = float64(p.rows) / max(out.LoadSeconds, 1e-9)

	nDel := int(float64(len(tids))*p.deadFraction + 0.5)
	nUpd := int(float64(len(tids)-nDel)*p.updateFraction + 0.5)
	perm := rng.Perm(len(tids))
	del, upd := pick(tids, perm[:nDel]), pick(tids, perm[nDel:nDel+nUpd])
	err = inBatches(ctx, db, len(del), p.batch, func(tx *engine.Tx, i int) error {
		return tx.Delete(p.table, del[i])
	})
	if err != nil {
		return out, fmt.Errorf("bloat %q: delete: %w", p.table, err)
	}
	out.RowsDeleted = int64(nDel)
	err = inBatches(ctx, db, len(upd), p.batch, func(tx *engine.Tx, i int) error {
		old, ok, err := tx.Get(p.table, upd[i])
		if err != nil || !ok {
			return errors.Join(err, fmt.Errorf("row at %v vanished", upd[i]))
		}
		old[len(old)-1] = payload(rng, p.payloadBytes)
		_, err = tx.Update(p.table, upd[i], old)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("bloat %q: update: %w", p.table, err)
	}
	out.RowsUpdated = int64(nUpd)
	out.DeadTuples = out.RowsDeleted + out.RowsUpdated
	out.TotalSeconds = time.Since(start).Seconds()
	return out, nil
}

// pick returns tids at the given positions, in physical order (for locality).
func pick(tids []page.TID, idx []int) []page.TID {
	out := make([]page.TID, len(idx))
	for i, j := range idx {
		out[i] = tids[j]
	}
	slices.SortFunc(out, func(a, b page.TID) int {
		if a.Block != b.Block {
			return int(int64(a.Block) - int64(b.Block))
		}
		return int(a.Off) - int(b.Off)
	})
	return out
}

// payload returns n pseudo-random bytes.
func payload(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := rng.Uint64()
		for j := i; j < min(i+8, n); j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
	return b
}

// inBatches calls fn for 0..n-1, committing every batch operations.
func inBatches(ctx context.Context, db *engine.DB, n, batch int, fn func(*engine.Tx, int) error) error {
	for lo := 0; lo < n; lo += batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		for i := lo; i < min(lo+batch, n); i++ {
			if err := fn(tx, i); err != nil {
				if rerr := tx.Rollback(); rerr != nil {
					err = errors.Join(err, fmt.Errorf("roll back: %w", rerr))
				}
				if errors.Is(err, engine.ErrTupleTooLarge) {
					return &UsageError{Msg: err.Error() + " (lower --payload-bytes)"}
				}
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}
