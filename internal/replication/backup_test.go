package replication_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/replication"
)

// rows returns table's rows by id (pad's first bytes as a number), via a scan.
func rows(t *testing.T, db *engine.DB, table string) map[int64]int {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	out := map[int64]int{}
	if err := tx.ScanContext(context.Background(), table, func(_ page.TID, r []any) error {
		out[r[0].(int64)] = len(r[1].([]byte))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBaseBackupWhileWritingOpensAsAConsistentCopy takes a base backup while a writer
// commits batches into the primary, then opens the copy with the engine (which replays
// the WAL from the backup's redo point): the copy is clean by Check, holds every row
// committed before the backup began, and a whole-batch prefix of the rows committed
// during it, each equal to the primary's.
func TestBaseBackupWhileWritingOpensAsAConsistentCopy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pr := startPrimary(t, replication.PrimaryConfig{MaxSlotWALKeepSize: -1})
	write(t, pr.db, "before", 3000, 300)
	if err := pr.db.CreateTable("during", []engine.Column{{Name: "id", Type: engine.Int8}, {Name: "pad", Type: engine.Bytea}}); err != nil {
		t.Fatal(err)
	}
	var committed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pad := make([]byte, 500)
		for i := int64(0); ; {
			select {
			case <-stop:
				return
			default:
			}
			tx, err := pr.db.Begin()
			if err != nil {
				t.Error(err)
				return
			}
			for j := 0; j < 50; j++ {
				if _, err := tx.Insert("during", []any{i, pad}); err != nil {
					t.Error(err)
					return
				}
				i++
			}
			if err := tx.Commit(); err != nil {
				t.Error(err)
				return
			}
			committed.Store(i)
		}
	}()
	for committed.Load() < 2000 {
		time.Sleep(5 * time.Millisecond)
	}
	host, port := pr.hostPort()
	conn, err := replication.ConnConfig{Host: host, Port: port, User: "repl", Password: "secret"}.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	dst := t.TempDir() + "/copy"
	atStart := committed.Load()
	res, err := replication.BaseBackup(ctx, conn, dst)
	atEnd := committed.Load()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("base backup: %+v; rows committed %d at its start, %d at its end", res, atStart, atEnd)
	if res.SystemID != pr.db.SystemID() || res.End <= res.Redo || res.WALSegment < 1 {
		t.Fatalf("backup result %+v", res)
	}
	copyDB, err := engine.Open(dst, engine.Options{BufferPoolBytes: 8 << 20, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = copyDB.Close() }()
	if rep, err := copyDB.Check(ctx); err != nil || !rep.OK() {
		t.Fatalf("check of the copy: %+v, %v", rep, err)
	}
	if got := rows(t, copyDB, "before"); len(got) != 3000 {
		t.Fatalf("copy has %d rows of the table written before, want 3000", len(got))
	}
	got, want := rows(t, copyDB, "during"), rows(t, pr.db, "during")
	n := int64(len(got))
	if n < atStart || n > atEnd || n%50 != 0 {
		t.Fatalf("copy has %d rows written during the backup, want a whole batch count in [%d, %d]", n, atStart, atEnd)
	}
	for id := range n {
		if got[id] != 500 || want[id] != 500 {
			t.Fatalf("row %d: copy %d bytes, primary %d; want 500", id, got[id], want[id])
		}
	}
}
