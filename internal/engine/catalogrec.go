package engine

import (
	"fmt"

	"github.com/vacuumops/vacuum-operator/internal/engine/catalog"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
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

// replaySkip decides which records replay ignores: those of a relation it
// knows was retired (dropped, or replaced by a VACUUM FULL or TRUNCATE), or
// whose creation was abandoned, so that its removed files are not made again.
// Replay knows a relation was retired when a catalog it adopted named it and
// the current one does not, when a storageAbandon record named it, or, for a
// relation below the next OID of the catalog replay started from that this
// catalog does not name, when its file is gone the first time a record names
// it and replay has not seen its creation (relfile.go): it was retired before
// the catalog was saved or copied.
//
// A relation whose storageCreate record replay saw is applied, whatever the
// catalog's next OID: a VACUUM FULL takes its new relfilenode from the live
// catalog, so a catalog record of another table's switch logged during the
// rewrite (a TRUNCATE, a DDL), or a checkpoint, already counts it, and a
// standby that restarted from there before the rewrite's first page record
// has no file for it yet. Its pages are the table's content once the swap's
// record names it. A creation replay did not see precedes where replay
// started, so its file was created before that point's restartpoint or
// checkpoint fsynced the directory: a missing file is a removed one.
// Records of a relation newer than anything the catalog knows are applied
// too: on a standby the content of a table or index whose catalog record
// follows them; in a primary's own recovery, the files of a DDL that never
// switched, which the orphan sweep then removes as before.
type replaySkip struct {
	rels    map[storage.RelFileNode]bool
	nextOID uint32 // of the catalog replay started from
	// retired holds what replay decided for relations the catalog does not
	// name: true = retired (skipped), false = applied.
	retired map[storage.RelFileNode]bool
	// createdAt holds the start LSN of the first storageCreate record
	// replay saw of each relation the catalog did not name then.
	createdAt map[storage.RelFileNode]wal.LSN
	// endOfRecovery is the last xlogEndOfRecovery record Open's replay saw
	// (0 if none): a standby sweeps its orphans when Open's replay ends.
	endOfRecovery wal.LSN
	// retiredSeen holds, on a standby, the relations a catalog record older
	// than its catalog named and its catalog does not: retired since, though
	// replay (which restarted before they were) may have made their files
	// again from their creation records. The standby's Open removes them.
	retiredSeen map[storage.RelFileNode]bool
	st          *storage.Manager
}

func newReplaySkip(c *catalog.Catalog, st *storage.Manager) *replaySkip {
	return &replaySkip{rels: c.Rels(), nextOID: c.NextOID, retired: map[storage.RelFileNode]bool{},
		createdAt: map[storage.RelFileNode]wal.LSN{}, retiredSeen: map[storage.RelFileNode]bool{}, st: st}
}

func (s *replaySkip) skip(r storage.RelFileNode) bool {
	if s.rels[r] {
		return false
	}
	if gone, ok := s.retired[r]; ok {
		return gone
	}
	gone := false
	if uint32(r) < s.nextOID {
		exists, err := s.st.Exists(r, storage.MainFork)
		gone = err == nil && !exists // on an error, redo reports it
	}
	s.retired[r] = gone
	return gone
}

// created records a storageCreate record of r at lsn: its records are applied
// from there on.
func (s *replaySkip) created(r storage.RelFileNode, lsn wal.LSN) {
	s.retired[r] = false
	if _, ok := s.createdAt[r]; !ok && !s.rels[r] {
		s.createdAt[r] = lsn
	}
}

// abandoned records that r's files were removed for good (a storageAbandon
// record, or a standby's orphan sweep).
func (s *replaySkip) abandoned(r storage.RelFileNode) {
	s.retired[r] = true
	delete(s.createdAt, r)
}

// adopt makes next's relations the named ones and marks those of the
// catalog before it that next no longer names as retired.
func (s *replaySkip) adopt(old, next map[storage.RelFileNode]bool) {
	for r := range old {
		if !next[r] {
			s.retired[r] = true
			delete(s.createdAt, r)
		}
	}
	for r := range next {
		delete(s.retired, r)
		delete(s.createdAt, r)
	}
	s.rels = next
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
		if db.opts.Standby {
			// A standby restarted before this record: what it named and the
			// (newer) catalog does not was retired since.
			for r := range next.Rels() {
				if !skip.rels[r] {
					skip.abandoned(r)
					skip.retiredSeen[r] = true
				}
			}
		}
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
		if vfs.MaybeReplaced(err) {
			// The directory may name either catalog: the next Open's sweep
			// quarantines rather than deletes (sweepStandbyOrphans).
			db.markSwitchUncertain(fmt.Sprintf("adopt catalog %d", next.Seq), err)
		}
		return fmt.Errorf("adopt catalog %d: %w", next.Seq, err)
	}
	db.setCatalog(next)
	skip.adopt(old, nrels)
	db.dropRels(fmt.Sprintf("adopt catalog %d", next.Seq), retired)
	return nil
}
