package engine

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// xlogCatalog is the Info of the RmgrXLOG catalog record: its Main is the
// whole catalog as its file holds it (catalog.Encode: header with CRC32C,
// then JSON). Every catalog switch that reached the disk logs one (DDL,
// VACUUM FULL's swap, TRUNCATE, DROP), and so does every Open after its
// recovery, which covers a crash between the catalog's rename and its
// record. The catalog file stays what the primary's own recovery trusts;
// a standby's replay adopts a record whose Seq is above its catalog's.
const xlogCatalog uint8 = 0x02

// logCatalog inserts and flushes the catalog record of c.
func (db *DB) logCatalog(c *catalog.Catalog) error {
	b, err := catalog.Encode(c)
	if err != nil {
		return err
	}
	end, err := db.log.Insert(&wal.Record{Rmgr: wal.RmgrXLOG, Info: xlogCatalog, Main: b}, nil)
	if err != nil {
		return fmt.Errorf("insert catalog record: %w", err)
	}
	if err := db.log.Flush(end, nil); err != nil {
		return fmt.Errorf("flush catalog record: %w", err)
	}
	return nil
}

// replaySkip decides which records replay ignores: those of a relation the
// current catalog does not name but once did (dropped, or retired by a
// VACUUM FULL or TRUNCATE: its OID is below the catalog's next OID).
// Records of a relation newer than anything the catalog knows are applied:
// on a standby they are the content of a table or index whose catalog
// record follows them (an index build, a VACUUM FULL's rewrite); in a
// primary's own recovery, the files of a DDL that never switched, which
// the orphan sweep then removes as before.
type replaySkip struct {
	rels    map[storage.RelFileNode]bool
	nextOID uint32
}

func newReplaySkip(c *catalog.Catalog) *replaySkip {
	return &replaySkip{rels: c.Rels(), nextOID: c.NextOID}
}

func (s *replaySkip) skip(r storage.RelFileNode) bool {
	return !s.rels[r] && uint32(r) < s.nextOID
}

// redoCatalog replays a catalog record: a record no newer than the current
// catalog is ignored (a primary's recovery, whose catalog file is already
// the latest); a newer one is adopted as a standby's switch (adoptCatalog).
func (db *DB) redoCatalog(rec *wal.Record, skip *replaySkip) error {
	next, err := catalog.Decode(rec.Main)
	if err != nil {
		return fmt.Errorf("catalog record at LSN %X: %w", uint64(rec.StartLSN), err)
	}
	db.mu.RLock()
	cur := db.cat.Seq
	db.mu.RUnlock()
	if next.Seq <= cur {
		return nil
	}
	return db.adoptCatalog(next, skip)
}

// adoptCatalog makes next the catalog, as its switch did on the primary:
// a table whose heap no WAL has touched yet gets its empty files, the
// catalog file is replaced, and the files it no longer names are removed.
// Standby readers that could still use a retired file are waited for (up
// to MaxStandbyStreamingDelay) and then cancelled.
func (db *DB) adoptCatalog(next *catalog.Catalog, skip *replaySkip) error {
	db.mu.RLock()
	old := db.cat.Rels()
	db.mu.RUnlock()
	nrels := next.Rels()
	var retired []storage.RelFileNode
	for r := range old {
		if !nrels[r] {
			retired = append(retired, r)
		}
	}
	if len(retired) > 0 {
		db.resolveConflicts(0, true, "a table's files were replaced or removed on the primary")
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, t := range next.Tables {
		if old[t.Rel] {
			continue
		}
		ok, err := db.st.Exists(t.Rel, storage.MainFork)
		if err != nil {
			return fmt.Errorf("adopt catalog %d: %w", next.Seq, err)
		}
		if !ok {
			if err := db.createHeap(t.Rel); err != nil {
				return fmt.Errorf("adopt catalog %d: create table %q: %w", next.Seq, t.Name, err)
			}
		}
	}
	if err := catalog.Save(db.fs, db.dir, next); err != nil {
		return fmt.Errorf("adopt catalog %d: %w", next.Seq, err)
	}
	db.cat = next
	skip.rels, skip.nextOID = nrels, next.NextOID
	db.dropRels(fmt.Sprintf("adopt catalog %d", next.Seq), retired)
	return nil
}
