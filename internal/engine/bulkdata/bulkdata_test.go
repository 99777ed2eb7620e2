package bulkdata_test

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // the twin of PostgreSQL's md5()
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/bulkdata"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
)

// The Go rows must be the SQL twin's: payload = decode(repeat(md5(id::text), 7), 'hex') cut to 100 bytes.
func TestPayloadIsTheSQLExpression(t *testing.T) {
	for _, id := range []int64{1, 42, 1999999} {
		sum := md5.Sum([]byte(fmt.Sprint(id))) //nolint:gosec // see import
		want, err := hex.DecodeString(strings.Repeat(hex.EncodeToString(sum[:]), 7))
		if err != nil {
			t.Fatal(err)
		}
		if got := bulkdata.Payload(id); !bytes.Equal(got, want[:bulkdata.PayloadBytes]) {
			t.Errorf("Payload(%d) = %x, want %x", id, got, want[:bulkdata.PayloadBytes])
		}
	}
	if !strings.Contains(bulkdata.SQL(10), "generate_series(1::bigint, 10)") {
		t.Errorf("SQL does not generate 10 bigint ids:\n%s", bulkdata.SQL(10))
	}
}

// Both states hold the same logical table: the same rows, indexes and
// deleted ids, whether built by a bulk load and a DELETE by a scan
// (hinted) or by row inserts and deletes by TID (unhinted).
func TestBuildLoadsIndexesAndDeletesTheDefinedRows(t *testing.T) {
	for _, state := range []bulkdata.State{bulkdata.Hinted, bulkdata.Unhinted} {
		t.Run(string(state), func(t *testing.T) { testBuiltTable(t, state) })
	}
}

func testBuiltTable(t *testing.T, state bulkdata.State) {
	const rows = 5000
	cache := t.TempDir()
	src, err := bulkdata.CachedState(context.Background(), cache, rows, state, engine.Options{BufferPoolBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	again, err := bulkdata.CachedState(context.Background(), cache, rows, state, engine.Options{})
	if err != nil || again != src {
		t.Fatalf("second CachedState = %q, %v; want the cached %q", again, err, src)
	}
	dir := filepath.Join(t.TempDir(), "copy")
	if err := engine.CopyDataDir(src, dir); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wantLive := map[int64]bool{}
	for id := int64(1); id <= rows; id++ {
		if !bulkdata.Deleted(id) {
			wantLive[id] = true
		}
	}
	if d := rows - len(wantLive); d < rows*18/100 || d > rows*22/100 {
		t.Errorf("%d of %d rows deleted, want about 20 %%", d, rows)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	seen := 0
	err = tx.Scan(bulkdata.Table, func(_ page.TID, r []any) error {
		id, _ := r[0].(int64)
		k1, _ := r[1].(int64)
		pay, _ := r[2].([]byte)
		if !wantLive[id] || k1 != bulkdata.K1(id) || !bytes.Equal(pay, bulkdata.Payload(id)) {
			return fmt.Errorf("unexpected row %v", r)
		}
		seen++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(wantLive) {
		t.Errorf("%d rows visible, want %d", seen, len(wantLive))
	}
	for _, id := range []int64{1, 2, 2500, rows} {
		found, err := tx.IndexLookup("t_k1_idx", bulkdata.K1(id))
		if err != nil {
			t.Fatal(err)
		}
		if live := wantLive[id]; (len(found) == 1) != live {
			t.Errorf("k1 lookup of row %d found %d rows (live %v)", id, len(found), live)
		}
	}
	st, err := db.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st[0].DeadTuples != int64(rows-len(wantLive)) || len(st[0].Indexes) != 2 {
		t.Errorf("stats: %d dead tuples, %d indexes; want %d and 2", st[0].DeadTuples, len(st[0].Indexes), rows-len(wantLive))
	}
}
