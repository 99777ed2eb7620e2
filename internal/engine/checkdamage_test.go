package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/engine/btree"
	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
)

// Each case damages a healthy table in a way whose pages still carry valid
// checksums (written through the engine's own components, or re-checksummed),
// and Check must name the damage.
func TestCheckReportsChecksumValidDamage(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, db *DB, dir string, tids map[int64]page.TID)
		want   string
	}{
		{"index entry to an unused slot", func(t *testing.T, db *DB, _ string, _ map[int64]page.TID) {
			ti, _ := db.Table("t")
			if err := db.indexTree(ti.Indexes[0].Relfilenode).Insert(btree.IntKey(5), page.TID{Block: 0, Off: 250}, nil); err != nil {
				t.Fatal(err)
			}
		}, "points at an unused line pointer"},
		{"index entry past the end of the table", func(t *testing.T, db *DB, _ string, _ map[int64]page.TID) {
			ti, _ := db.Table("t")
			if err := db.indexTree(ti.Indexes[0].Relfilenode).Insert(btree.IntKey(5), page.TID{Block: 9999, Off: 1}, nil); err != nil {
				t.Fatal(err)
			}
		}, "points past the end"},
		{"live tuple missing from an index", func(t *testing.T, db *DB, _ string, tids map[int64]page.TID) {
			ti, _ := db.Table("t")
			victim := tids[17]
			_, err := db.indexTree(ti.Indexes[0].Relfilenode).BulkDelete(func(tid page.TID) bool { return tid == victim }, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
		}, "lacks an entry for tuple"},
		{"visibility map bit on a page with dead tuples", func(t *testing.T, db *DB, _ string, tids map[int64]page.TID) {
			tx := mustTx(t, db)
			if err := tx.Delete("t", tids[3]); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			ti, _ := db.Table("t")
			if err := db.heapRel(ti.Relfilenode).VM().Set(storage.BlockNumber(tids[3].Block), nil, nil); err != nil {
				t.Fatal(err)
			}
		}, "visibility map bit set but tuple"},
		{"overlapping line pointers", func(t *testing.T, db *DB, dir string, _ map[int64]page.TID) {
			ti, _ := db.Table("t")
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "base", fmt.Sprint(ti.Relfilenode))
			overlapLinePointers(t, path, 0)
		}, "invalid line pointer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := testOpts()
			db, dir := newDB(t, opts)
			tids := fillTable(t, db, 200)
			if err := db.CreateIndex("t_id", "t", "id"); err != nil {
				t.Fatal(err)
			}
			checkClean(t, db)
			c.damage(t, db, dir, tids)
			if db.closed.Load() {
				var err error
				if db, err = Open(dir, opts); err != nil {
					t.Fatal(err)
				}
				defer closeDB(t, db)
			}
			rep, err := db.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, p := range rep.Problems {
				msgs = append(msgs, p.String())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), c.want) {
				t.Fatalf("Check found %q, want a problem containing %q", msgs, c.want)
			}
			t.Logf("Check: %s", strings.Join(msgs, "; "))
		})
	}
}

// overlapLinePointers makes line pointer 2 of block blk a copy of line
// pointer 1 (two items on the same bytes) and rewrites the page with a
// valid checksum.
func overlapLinePointers(t *testing.T, path string, blk int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	p := make(page.Page, page.Size)
	if _, err := f.ReadAt(p, blk*page.Size); err != nil {
		t.Fatal(err)
	}
	lp1 := binary.LittleEndian.Uint32(p[page.HeaderSize:])
	binary.LittleEndian.PutUint32(p[page.HeaderSize+page.ItemIDSize:], lp1)
	page.SetChecksum(p, uint32(blk))
	if page.VerifyChecksum(p, uint32(blk)) != nil || p.Validate() == nil {
		t.Fatal("damage not as intended: want a valid checksum and an invalid layout")
	}
	if _, err := f.WriteAt(p, blk*page.Size); err != nil {
		t.Fatal(err)
	}
}
