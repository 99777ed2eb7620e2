package engine

import (
	"bytes"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/buffer"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// heapResidency is, per block of table's heap, whether it is in the pool and its usage count.
func heapResidency(t *testing.T, db *DB, table string) (usageOf []int, resident []bool) {
	t.Helper()
	h, err := db.handle(table)
	if err != nil {
		t.Fatal(err)
	}
	n, err := h.Heap.NBlocks()
	if err != nil {
		t.Fatal(err)
	}
	usageOf, resident = make([]int, n), make([]bool, n)
	for b := range n {
		usageOf[b], _, resident[b] = db.pool.Resident(buffer.Tag{Rel: h.Rel, Fork: storage.MainFork, Block: storage.BlockNumber(b)})
	}
	return usageOf, resident
}

// copyRows inserts ids [from, to) into accounts, through a COPY ring when ring is set.
func copyRows(t *testing.T, db *DB, from, to int64, ring bool) {
	t.Helper()
	tx := mustTx(t, db)
	var r *CopyRing
	if ring {
		r = tx.NewCopyRing()
	}
	owner := bytes.Repeat([]byte("o"), 200)
	for id := from; id < to; id++ {
		if _, err := tx.InsertThrough(r, "accounts", []any{id, owner, int64(0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// A COPY bigger than the pool's BulkWrite ring keeps to the ring, as PostgreSQL's COPY does:
// the load leaves at most the ring's pages of the table in the pool, where row-by-row
// inserts leave every page it filled.
func TestCopyRingKeepsALoadToTheRing(t *testing.T) {
	opts := testOpts()
	opts.BufferPoolBytes = 1024 * page.Size // ring: 128 frames (an eighth)
	db, _ := newDB(t, opts)
	for _, name := range []string{"accounts", "plain"} {
		if err := db.CreateTable(name, accountCols); err != nil {
			t.Fatal(err)
		}
	}
	copyRows(t, db, 0, 10000, true)
	_, res := heapResidency(t, db, "accounts")
	in := 0
	for _, r := range res {
		if r {
			in++
		}
	}
	ring := buffer.BulkWriteRingBytes / page.Size
	ring = min(ring, 1024/8)
	if len(res) < 2*ring || in > ring+1 {
		t.Fatalf("COPY of %d pages through the ring left %d resident: want at most the ring's %d", len(res), in, ring)
	}

	// The same rows inserted one by one (INSERT) stay resident: the ring is what keeps them out.
	tx := mustTx(t, db)
	owner := bytes.Repeat([]byte("o"), 200)
	for id := range int64(len(res) * 30) {
		if _, err := tx.Insert("plain", []any{id, owner, int64(0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	_, res = heapResidency(t, db, "plain")
	in = 0
	for _, r := range res {
		if r {
			in++
		}
	}
	if in <= ring+1 {
		t.Fatalf("INSERT of %d pages left only %d resident: the comparison shows nothing", len(res), in)
	}
}

// Updating every row of a page does not make the page look hot to the clock sweep: the
// statement found the rows already (PostgreSQL's heap_update pins a page its scan holds,
// which does not raise the usage count), while the pages the new versions fill count
// each insert. Before, two pins a row raised the old pages to the maximum too.
func TestUpdatingRowsDoesNotRaiseTheirPagesUsageCount(t *testing.T) {
	opts := testOpts()
	opts.BufferPoolBytes = 1024 * page.Size
	db, _ := newDB(t, opts)
	if err := db.CreateTable("accounts", accountCols); err != nil {
		t.Fatal(err)
	}
	copyRows(t, db, 0, 300, true) // through the ring: every page at usage 1
	before, res := heapResidency(t, db, "accounts")
	n0 := len(before)
	for b := range n0 {
		if !res[b] || before[b] != 1 {
			t.Fatalf("block %d after the COPY: usage %d (resident %v), want 1", b, before[b], res[b])
		}
	}
	tx := mustTx(t, db)
	var tids []page.TID
	if err := tx.Scan("accounts", func(tid page.TID, _ []any) error {
		tids = append(tids, tid)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, tid := range tids {
		_, ok, err := tx.UpdateRow("accounts", tid, func(cur []any) ([]any, bool, error) {
			return []any{cur[0], cur[1], i64(cur[2]) + 1}, true, nil
		})
		if err != nil || !ok {
			t.Fatalf("update %v: ok %v, %v", tid, ok, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	after, res := heapResidency(t, db, "accounts")
	if len(after) <= n0 {
		t.Fatalf("the update added no page (%d blocks): the test needs new versions on new pages", len(after))
	}
	for b := range n0 - 1 { // the last old page may hold new versions of its own rows
		if !res[b] || after[b] != 1 {
			t.Fatalf("old block %d after updating its rows: usage %d (resident %v), want 1", b, after[b], res[b])
		}
	}
	for b := n0; b < len(after)-1; b++ {
		if after[b] < 2 {
			t.Fatalf("new block %d, filled by the update: usage %d, want more than 1", b, after[b])
		}
	}
}
