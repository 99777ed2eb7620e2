// Package bulkdata builds the synthetic table of the VACUUM speed
// benchmarks and of the PostgreSQL comparison (hack/pgcompare): the same
// logical rows on both sides, defined once here, as Go functions and as
// the SQL that generates them.
//
// Row id (1..Rows): columns id int64, k1 int64, payload bytes (PayloadBytes
// long); B-trees on id (physically correlated) and k1 (random order). A
// row is deleted when Deleted(id): 20 % of the rows, spread evenly over
// the table. The load is a bulk load (engine.Tx.BulkInsert, one WAL
// record per page), the indexes are built afterwards, the deletes run in
// physical order in one transaction, and the directory is closed
// (shutdown checkpoint), leaving every heap page with dead tuples whose
// deleter is committed but not yet hinted, as after a DELETE in
// PostgreSQL.
package bulkdata

import (
	"context"
	"crypto/md5" //nolint:gosec // not security: the same bytes PostgreSQL's md5() gives, for the SQL twin
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// Table is the name of the table Build creates.
const Table = "t"

// PayloadBytes is the length of each row's payload.
const PayloadBytes = 100

// version is bumped whenever the data Build produces changes, so cached
// directories of an older layout are not reused. The cache's names also
// carry engine.DataVersion: a directory of an older on-disk format is
// rebuilt, not refused by Open.
const version = 1

// Columns is the table's schema.
var Columns = []engine.Column{{Name: "id", Type: engine.Int8}, {Name: "k1", Type: engine.Int8}, {Name: "payload", Type: engine.Bytea}}

// Indexes are the table's two B-trees, named like PostgreSQL would (the
// SQL twin creates the same).
var Indexes = []struct{ Name, Column string }{{"t_id_idx", "id"}, {"t_k1_idx", "k1"}}

// K1 is the second indexed key of row id: a linear congruential scramble,
// computed the same way in SQL without overflowing bigint.
func K1(id int64) int64 { return (id*1103515245 + 12345) % (1 << 31) }

// Deleted reports whether row id is one of the deleted 20 %.
func Deleted(id int64) bool { return (id*2654435761)%1000003%5 == 0 }

// Payload returns the payload of row id: md5(id as text) in hex, repeated,
// decoded to bytes and cut to PayloadBytes (the SQL twin's expression).
func Payload(id int64) []byte {
	sum := md5.Sum([]byte(strconv.FormatInt(id, 10))) //nolint:gosec // see import
	out := make([]byte, 0, PayloadBytes+16)
	for len(out) < PayloadBytes {
		out = append(out, sum[:]...)
	}
	return out[:PayloadBytes]
}

// SQL returns the statements that build the same table in PostgreSQL
// (rows rows; run in one psql session).
func SQL(rows int64) string {
	return fmt.Sprintf(`CREATE TABLE t (id bigint NOT NULL, k1 bigint NOT NULL, payload bytea NOT NULL) WITH (autovacuum_enabled = off);
INSERT INTO t SELECT id, (id * 1103515245 + 12345) %% 2147483648, substring(decode(repeat(md5(id::text), 7), 'hex') from 1 for %d) FROM generate_series(1::bigint, %d) AS id;
CREATE INDEX t_id_idx ON t (id);
CREATE INDEX t_k1_idx ON t (k1);
DELETE FROM t WHERE (id * 2654435761) %% 1000003 %% 5 = 0;
CHECKPOINT;
`, PayloadBytes, rows)
}

// Stats describes a built table.
type Stats struct {
	Rows, Deleted int64
	HeapPages     int64
	LoadSeconds   float64
}

// Build creates Table in db with rows rows, its two indexes, and deletes
// the 20 % Deleted names.
func Build(ctx context.Context, db *engine.DB, rows int64) (Stats, error) {
	start := time.Now()
	st := Stats{Rows: rows}
	if err := db.CreateTable(Table, Columns); err != nil {
		return st, fmt.Errorf("bulkdata: %w", err)
	}
	tx, err := db.Begin()
	if err != nil {
		return st, fmt.Errorf("bulkdata: %w", err)
	}
	id := int64(0)
	vals := make([]any, 3)
	_, err = tx.BulkInsert(ctx, Table, func() ([]any, bool, error) {
		if id >= rows {
			return nil, false, nil
		}
		id++
		vals[0], vals[1], vals[2] = id, K1(id), Payload(id)
		return vals, true, nil
	})
	if err != nil {
		return st, errors.Join(fmt.Errorf("bulkdata: load: %w", err), tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return st, fmt.Errorf("bulkdata: load: %w", err)
	}
	for _, ix := range Indexes {
		if err := db.CreateIndex(ix.Name, Table, ix.Column); err != nil {
			return st, fmt.Errorf("bulkdata: %w", err)
		}
	}
	tx, err = db.Begin()
	if err != nil {
		return st, fmt.Errorf("bulkdata: %w", err)
	}
	err = tx.ScanContext(ctx, Table, func(tid page.TID, r []any) error {
		id, _ := r[0].(int64)
		if !Deleted(id) {
			return nil
		}
		st.Deleted++
		return tx.Delete(Table, tid)
	})
	if err != nil {
		return st, errors.Join(fmt.Errorf("bulkdata: delete: %w", err), tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return st, fmt.Errorf("bulkdata: delete: %w", err)
	}
	if st.HeapPages, err = HeapPages(db); err != nil {
		return st, err
	}
	st.LoadSeconds = time.Since(start).Seconds()
	return st, nil
}

// State is the hint-bit state a table is built in.
type State string

const (
	// Hinted is Build's table: every inserter's hint set (by the DELETE's
	// scan), no deleter's; the state PostgreSQL's SQL twin is in.
	Hinted State = "hinted"
	// Unhinted is BuildUnhinted's table: the same rows, no hint bits at all.
	Unhinted State = "unhinted"
)

// BuildState builds the table of rows rows in state st into db.
func BuildState(ctx context.Context, db *engine.DB, rows int64, st State) (Stats, error) {
	switch st {
	case Hinted:
		return Build(ctx, db, rows)
	case Unhinted:
		return BuildUnhinted(ctx, db, rows)
	}
	return Stats{}, fmt.Errorf("bulkdata: unknown state %q", st)
}

// BuildUnhinted makes Build's logical table (the same rows, indexes and
// deleted ids) without any scan: rows inserted one by one with the
// indexes in place, then the deleted ones removed by TID, as
// `vacuum-runner bloat` does. No tuple carries a hint bit afterwards,
// neither its inserter's nor its deleter's.
func BuildUnhinted(ctx context.Context, db *engine.DB, rows int64) (Stats, error) {
	start := time.Now()
	st := Stats{Rows: rows}
	if err := db.CreateTable(Table, Columns); err != nil {
		return st, fmt.Errorf("bulkdata: %w", err)
	}
	for _, ix := range Indexes {
		if err := db.CreateIndex(ix.Name, Table, ix.Column); err != nil {
			return st, fmt.Errorf("bulkdata: %w", err)
		}
	}
	const batch = 10_000
	var dead []page.TID
	for lo := int64(1); lo <= rows; lo += batch {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		tx, err := db.Begin()
		if err != nil {
			return st, fmt.Errorf("bulkdata: %w", err)
		}
		for id := lo; id < lo+batch && id <= rows; id++ {
			tid, err := tx.Insert(Table, []any{id, K1(id), Payload(id)})
			if err != nil {
				return st, errors.Join(fmt.Errorf("bulkdata: insert %d: %w", id, err), tx.Rollback())
			}
			if Deleted(id) {
				dead = append(dead, tid)
			}
		}
		if err := tx.Commit(); err != nil {
			return st, fmt.Errorf("bulkdata: load: %w", err)
		}
	}
	for lo := 0; lo < len(dead); lo += batch {
		tx, err := db.Begin()
		if err != nil {
			return st, fmt.Errorf("bulkdata: %w", err)
		}
		for _, tid := range dead[lo:min(lo+batch, len(dead))] {
			if err := tx.Delete(Table, tid); err != nil {
				return st, errors.Join(fmt.Errorf("bulkdata: delete %v: %w", tid, err), tx.Rollback())
			}
		}
		if err := tx.Commit(); err != nil {
			return st, fmt.Errorf("bulkdata: delete: %w", err)
		}
	}
	st.Deleted = int64(len(dead))
	var err error
	if st.HeapPages, err = HeapPages(db); err != nil {
		return st, err
	}
	st.LoadSeconds = time.Since(start).Seconds()
	return st, nil
}

// Cached returns a data directory holding the built table of rows rows,
// building it (with opts) under cacheDir the first time; later calls with
// the same rows and layout version reuse it. Callers must not open the
// returned directory for writing: copy it (engine.CopyDataDir) first.
func Cached(ctx context.Context, cacheDir string, rows int64, opts engine.Options) (string, error) {
	return CachedState(ctx, cacheDir, rows, Hinted, opts)
}

// CachedState is Cached for the table in state st.
func CachedState(ctx context.Context, cacheDir string, rows int64, st State, opts engine.Options) (string, error) {
	name := fmt.Sprintf("bulkdata-v%d-d%d-rows%d", version, engine.DataVersion, rows)
	if st != Hinted {
		name = fmt.Sprintf("bulkdata-%s-v%d-d%d-rows%d", st, version, engine.DataVersion, rows)
	}
	dir := filepath.Join(cacheDir, name)
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return filepath.Join(dir, "data"), nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("bulkdata: %w", err)
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("bulkdata: %w", err)
	}
	if err := engine.Init(data, opts); err != nil {
		return "", fmt.Errorf("bulkdata: %w", err)
	}
	db, err := engine.Open(data, opts)
	if err != nil {
		return "", fmt.Errorf("bulkdata: %w", err)
	}
	if _, err := BuildState(ctx, db, rows, st); err != nil {
		return "", errors.Join(err, db.Close())
	}
	if err := db.Close(); err != nil {
		return "", fmt.Errorf("bulkdata: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600); err != nil {
		return "", fmt.Errorf("bulkdata: %w", err)
	}
	return data, nil
}

// HeapPages is the number of heap blocks of Table in db.
func HeapPages(db *engine.DB) (int64, error) {
	n, err := db.TablePages(Table)
	if err != nil {
		return 0, fmt.Errorf("bulkdata: %w", err)
	}
	return n, nil
}

// ErrCannotDropCaches is returned by DropCaches when the process may not
// drop the OS page cache (not root, or no /proc/sys/vm/drop_caches).
var ErrCannotDropCaches = errors.New("cannot drop the OS page cache")

// DropCaches writes dirty pages back (sync) and drops the OS page cache,
// so the next reads come from the device ("cold"). It needs root.
func DropCaches() error {
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		return fmt.Errorf("%w: %w", ErrCannotDropCaches, err)
	}
	return nil
}
