package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// Relation file records: the WAL says when a relation's file starts to exist and when
// a creation was given up, as PostgreSQL's XLOG_SMGR_CREATE and the unlinks of an abort
// record do. Replay uses them to tell a file meant to exist from an orphan:
//
//   - storageCreate (wal.RmgrStorage, Info 0x10) is logged when a relfilenode is taken
//     for a new fork: VACUUM FULL's new heap and indexes (allocRelfilenode, under db.mu,
//     so before any catalog or checkpoint record that counts the OID), CREATE TABLE's
//     three forks, CREATE INDEX, TRUNCATE's new files. Its redo creates the fork's file
//     and marks the relation as applied, whatever the catalog's next OID says: without
//     it a standby whose catalog already counted the OID (another table's switch logged
//     during the rewrite) and that restarted before the rewrite's first page record
//     took the missing file for a retired relation and skipped the whole rewrite.
//   - storageAbandon (wal.RmgrStorage, Info 0x20) is logged when files that no catalog
//     ever named are removed: a VACUUM FULL that failed or was cancelled before its
//     swap, a DDL whose switch did not happen. Its redo removes them (never a relation
//     the catalog names).
//   - xlogEndOfRecovery (wal.RmgrXLOG, Info 0x03, empty Main) is logged by a primary's
//     Open after its orphan sweep and its catalog record: nothing created before it is
//     still being built, since whatever built it died with the session before. A
//     standby sweeps then the files created before it that its catalog does not name
//     (sweepStandbyOrphans).
//
// Main of storageCreate and storageAbandon, 5 bytes:
//
//	offset size field
//	     0    4 relfilenode (little-endian, never 0)
//	     4    1 fork (storage.ForkNum: 0 main, 1 FSM, 2 VM; always 0 for storageAbandon,
//	            which concerns every fork)
const (
	storageCreate     uint8 = 0x10
	storageAbandon    uint8 = 0x20
	xlogEndOfRecovery uint8 = 0x03
	relFileMainSize   int   = 5
)

// relFileRecord is the Main of a storageCreate or storageAbandon record.
type relFileRecord struct {
	Rel  storage.RelFileNode
	Fork storage.ForkNum
}

func (r relFileRecord) encode() []byte {
	b := make([]byte, relFileMainSize)
	binary.LittleEndian.PutUint32(b, uint32(r.Rel))
	b[4] = byte(r.Fork)
	return b
}

func decodeRelFile(b []byte) (relFileRecord, error) {
	if len(b) != relFileMainSize {
		return relFileRecord{}, fmt.Errorf("relation file record of %d bytes, want %d", len(b), relFileMainSize)
	}
	r := relFileRecord{Rel: storage.RelFileNode(binary.LittleEndian.Uint32(b)), Fork: storage.ForkNum(b[4])}
	if r.Rel == 0 {
		return relFileRecord{}, errors.New("relation file record of relfilenode 0")
	}
	switch r.Fork {
	case storage.MainFork, storage.FSMFork, storage.VMFork:
	default:
		return relFileRecord{}, fmt.Errorf("relation file record of relation %d names fork %d", r.Rel, r.Fork)
	}
	return r, nil
}

// heapForks are the forks CREATE TABLE and TRUNCATE make for a heap (createHeap).
var heapForks = []storage.ForkNum{storage.MainFork, storage.VMFork, storage.FSMFork}

// logCreate inserts a storageCreate record for each fork of rel (not flushed: a record
// that needs it durable, a catalog record or a commit, flushes it with itself).
func (db *DB) logCreate(rel storage.RelFileNode, forks ...storage.ForkNum) error {
	for _, f := range forks {
		rec := &wal.Record{Rmgr: wal.RmgrStorage, Info: storageCreate, Main: relFileRecord{Rel: rel, Fork: f}.encode()}
		if _, err := db.log.Insert(rec, nil); err != nil {
			return fmt.Errorf("log the creation of relation %d fork %d: %w", rel, f, err)
		}
	}
	return nil
}

// abandonRels removes the files of relations no catalog ever named (a creation given
// up) and logs a storageAbandon record for each, flushed, so that standbys remove their
// copies too. Logging is best effort: on a failed DB (or a failed log) the files are
// still removed here, and a standby drops its copies at the end-of-recovery record of
// the primary's next Open.
func (db *DB) abandonRels(what string, rels []storage.RelFileNode) {
	if len(rels) > 0 && db.writable() == nil {
		var end wal.LSN
		var err error
		for _, r := range rels {
			rec := &wal.Record{Rmgr: wal.RmgrStorage, Info: storageAbandon, Main: relFileRecord{Rel: r}.encode()}
			if end, err = db.log.Insert(rec, nil); err != nil {
				break
			}
		}
		if err == nil {
			err = db.log.Flush(end, nil)
		}
		if err != nil {
			db.opts.Logf("%s: the removal of relations %v is not logged for standbys: %v", what, rels, err)
		}
	}
	db.dropRels(what, rels)
}

// logEndOfRecovery inserts and flushes the end-of-recovery record.
func (db *DB) logEndOfRecovery() error {
	end, err := db.log.Insert(&wal.Record{Rmgr: wal.RmgrXLOG, Info: xlogEndOfRecovery}, nil)
	if err != nil {
		return fmt.Errorf("insert end-of-recovery record: %w", err)
	}
	if err := db.log.Flush(end, nil); err != nil {
		return fmt.Errorf("flush end-of-recovery record: %w", err)
	}
	return nil
}

// redoStorage replays a storageCreate or storageAbandon record.
func (db *DB) redoStorage(rec *wal.Record, skip *replaySkip) error {
	r, err := decodeRelFile(rec.Main)
	if err != nil {
		return fmt.Errorf("record at LSN %X: %w", uint64(rec.StartLSN), err)
	}
	switch rec.Info {
	case storageCreate:
		skip.created(r.Rel, rec.StartLSN)
		if !db.opts.Standby && uint32(r.Rel) >= db.cat.NextOID {
			// Never hand the OID out again, even if no checkpoint counted it.
			db.cat.NextOID = uint32(r.Rel) + 1
		}
		if err := db.st.Create(r.Rel, r.Fork); err != nil {
			return fmt.Errorf("redo the creation at LSN %X: %w", uint64(rec.StartLSN), err)
		}
		return nil
	case storageAbandon:
		if r.Fork != storage.MainFork {
			return fmt.Errorf("record at LSN %X abandons fork %d of relation %d: an abandon concerns every fork (0)",
				uint64(rec.StartLSN), r.Fork, r.Rel)
		}
		if skip.rels[r.Rel] {
			db.opts.Logf("replay: the record at LSN %X abandons relation %d, which the catalog names: its files are kept",
				uint64(rec.StartLSN), r.Rel)
			return nil
		}
		skip.abandoned(r.Rel)
		db.forgetHandle(r.Rel)
		db.pool.DropRel(r.Rel)
		if err := db.st.Drop(r.Rel); err != nil {
			return fmt.Errorf("redo the abandon at LSN %X: %w", uint64(rec.StartLSN), err)
		}
		return nil
	}
	return fmt.Errorf("record at LSN %X has unknown storage record kind %#x", uint64(rec.StartLSN), rec.Info)
}

// sweepStandbyOrphans deals, on a standby, with the relation files its catalog does not
// name and whose creation is known to precede the end-of-recovery record at at (0: none):
// those whose storageCreate record replay saw before at, and, when final is set (replay
// has passed every record this directory's files reflect: after Open's replay, or while
// following), those whose creation it did not see (made before replay started); and with
// the relations an older catalog record named that the catalog no longer does
// (retiredSeen). A file created after at, such as a VACUUM FULL's rewrite whose catalog
// record has not arrived, is never one of them. The caller holds db.mu exclusively (or
// is Open). As Open does on a primary (disposeOrphans), the files are removed when the
// directory is consistent and moved into the quarantine otherwise.
func (db *DB) sweepStandbyOrphans(at wal.LSN, final bool, info *RecoveryInfo) error {
	skip := db.skip
	rels := db.cat.Rels()
	list, err := db.st.List()
	if err != nil {
		return fmt.Errorf("standby orphan sweep: list relation files: %w", err)
	}
	var orphans []storage.RelFileNode
	for _, r := range list {
		if rels[r] {
			continue
		}
		c, ok := skip.createdAt[r]
		if skip.retiredSeen[r] || at != 0 && (ok && c < at || !ok && final) {
			orphans = append(orphans, r)
		}
	}
	clear(skip.retiredSeen)
	if len(orphans) == 0 {
		return nil
	}
	missing, err := db.missingRelations()
	if err != nil {
		return fmt.Errorf("standby orphan sweep: %w", err)
	}
	var reasons []string
	if len(missing) > 0 {
		reasons = append(reasons, "the catalog names missing relation files ("+strings.Join(missing, ", ")+")")
	}
	marker := filepath.Join(db.dir, uncertainSwitchName)
	if b, err := readSmall(db.fs, marker); err == nil {
		reasons = append(reasons, "a catalog switch may not have reached the disk ("+strings.TrimSpace(string(b))+")")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", marker, err)
	}
	for _, r := range orphans {
		skip.abandoned(r)
	}
	what := "on the standby"
	if at != 0 {
		what = fmt.Sprintf("on the standby, at the end of the primary's recovery (LSN %X)", uint64(at))
	}
	return db.disposeOrphans(what, orphans, reasons, info)
}
