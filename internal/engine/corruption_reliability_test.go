package engine

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/page"
	"github.com/vacuumops/vacuum-operator/internal/engine/storage"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum/throttle"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal/waltest"
)

var flipsPerKind = flag.Int("flips.per-kind", 30, "bit flips per file kind in TestRandomBitFlips*")

// corruptOpts: small relation segments, so the heap spans several files
// and a block number within the fork differs from the one in its file.
func corruptOpts() Options {
	o := testOpts()
	o.SegmentSize = 8 * page.Size
	o.CheckpointWALBytes = -1
	return o
}

// buildCorruptionBase fills the work table (with its index) through
// inserts, updates and deletes, and a lazy vacuum (so the visibility map
// has set bits), and returns the open DB and the committed rows.
func buildCorruptionBase(t *testing.T, dir string, opts Options) (*DB, map[int64]rowVal) {
	t.Helper()
	if err := Init(dir, opts); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateTable(workTable, workCols); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateIndex(workTable+"_id", workTable, "id"); err != nil {
		t.Fatal(err)
	}
	committed := map[int64]rowVal{}
	w, err := newWriter(db, 7, "base")
	if err != nil {
		t.Fatal(err)
	}
	var pending []workOp
	for range 150 {
		err := w.step(func(_ int64, ops []workOp) error { pending = ops; return nil },
			func(int64) error { applyOps(committed, pending); return nil })
		if err != nil {
			t.Fatal(err)
		}
	}
	vo := vacuum.DefaultOptions()
	vo.Throttle = &throttle.Settings{}
	if _, err := db.Vacuum(context.Background(), workTable, vo); err != nil {
		t.Fatal(err)
	}
	if err := db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	return db, committed
}

// copyDir copies the data directory src to dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		if d.Name() == LockFileName {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// relFile is one segment file of a fork.
type relFile struct {
	path   string // the segment file
	fork0  string // segment 0 of the fork (what Check names)
	first  int64  // fork block number of the file's first block
	blocks int64
}

// forkFiles lists the segment files of (rel, fork) that hold blocks.
func forkFiles(t *testing.T, db *DB, rel storage.RelFileNode, fork storage.ForkNum) []relFile {
	t.Helper()
	var out []relFile
	bps := int64(db.st.BlocksPerSegment())
	for seg := uint32(0); ; seg++ {
		p := db.st.SegmentPath(rel, fork, seg)
		st, err := os.Stat(p)
		if err != nil {
			break
		}
		if st.Size() >= page.Size {
			out = append(out, relFile{path: p, fork0: db.st.Path(rel, fork), first: int64(seg) * bps, blocks: st.Size() / page.Size})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no files for relation %d fork %d", rel, fork)
	}
	return out
}

// TestRandomBitFlipsInDataPagesAreDetectedAndNamed flips one random bit in
// a fresh copy of a cleanly shut down data directory, in a heap, index or
// visibility-map page, many times. Every flip must be reported by Check
// naming the file and the block, and every query either fails or returns
// exactly the committed rows (never a silently wrong answer, never a
// panic).
func TestRandomBitFlipsInDataPagesAreDetectedAndNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("bit-flip sweep skipped in -short mode")
	}
	opts := corruptOpts()
	base := filepath.Join(t.TempDir(), "base")
	db, committed := buildCorruptionBase(t, base, opts)
	ti := mustTable(t, db)
	kinds := []struct {
		name  string
		files []relFile
	}{
		{"heap", forkFiles(t, db, ti.Relfilenode, storage.MainFork)},
		{"index", forkFiles(t, db, ti.Indexes[0].Relfilenode, storage.MainFork)},
		{"visibility map", forkFiles(t, db, ti.Relfilenode, storage.VMFork)},
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d; %d rows", seed, len(committed))
	rng := rand.New(rand.NewPCG(seed, 1))
	detectedByRead, flips := 0, 0
	for _, k := range kinds {
		for i := range *flipsPerKind {
			f := k.files[rng.IntN(len(k.files))]
			blk := rng.Int64N(f.blocks)
			off := blk*page.Size + rng.Int64N(page.Size)
			bit := byte(1) << rng.IntN(8)
			dir := filepath.Join(t.TempDir(), "d")
			copyDir(t, base, dir)
			target := strings.Replace(f.path, base, dir, 1)
			flipBitMask(t, target, off, bit)
			what := fmt.Sprintf("%s flip %d: %s block %d (fork block %d) byte %d bit %#x", k.name, i, filepath.Base(target), blk, f.first+blk, off%page.Size, bit)
			if checkFlippedCopy(t, dir, opts, committed, strings.Replace(f.fork0, base, dir, 1), f.first+blk, what) {
				detectedByRead++
			}
			flips++
		}
	}
	t.Logf("%d bit flips in data pages: every one named by Check; %d also failed a query, the others' queries returned the right rows", flips, detectedByRead)
}

// checkFlippedCopy opens dir, runs the queries and Check. It reports
// whether a query failed.
func checkFlippedCopy(t *testing.T, dir string, opts Options, want map[int64]rowVal, file string, blk int64, what string) bool {
	t.Helper()
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("%s: Open: %v (a damaged data page must not stop Open)", what, err)
	}
	defer closeDB(t, db)
	queryFailed := false
	if got, err := visibleState(db); err != nil {
		queryFailed = true
		if !strings.Contains(err.Error(), filepath.Base(file)) {
			t.Errorf("%s: scan error %q does not name the file", what, err)
		}
	} else if diff := stateDiff(got, want); diff != "" {
		t.Fatalf("%s: scan returned wrong rows without an error: %s", what, diff)
	}
	tx := mustTx(t, db)
	for id, w := range want {
		found, err := tx.IndexLookup(workTable+"_id", id)
		if err != nil {
			queryFailed = true
			break
		}
		if len(found) != 1 || i64(found[0].Row[2]) != w.N || string(bs(found[0].Row[1])) != w.Val {
			t.Fatalf("%s: index lookup %d returned %v without an error, want n=%d", what, id, found, w.N)
		}
	}
	endTx(tx)
	rep, err := db.Check(context.Background())
	if err != nil {
		t.Fatalf("%s: Check: %v", what, err)
	}
	for _, p := range rep.Problems {
		if p.File == file && p.Block == blk {
			return queryFailed
		}
	}
	t.Errorf("%s: Check did not name %s block %d; it reported %v", what, file, blk, rep.Problems)
	return queryFailed
}

// lengthReadsZero reports whether the length field of the WAL record at lsn (its first four
// bytes) reads zero in dir; false when the field crosses into the next segment.
func lengthReadsZero(t *testing.T, dir string, lsn wal.LSN, segSize int64) bool {
	t.Helper()
	seg := int64(lsn) / segSize * segSize
	off := int64(lsn) - seg
	if off+4 > segSize {
		return false
	}
	b, err := os.ReadFile(wal.SegmentPath(dir, wal.LSN(seg), segSize))
	if err != nil {
		t.Fatal(err)
	}
	return b[off] == 0 && b[off+1] == 0 && b[off+2] == 0 && b[off+3] == 0
}

func flipBitMask(t *testing.T, path string, off int64, bit byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= bit
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestRandomBitFlipsInWALAreCorruptionUnlessInTheLastRecord crashes a
// directory with transactions after the last checkpoint (their pages only
// in WAL), then, in fresh copies, flips one random bit of the WAL it must
// replay. A damaged record followed by valid ones is damage in the middle
// of the log: Open must refuse with ErrCorrupt naming both LSNs, never
// replay up to it and drop the committed work after it. Damage in the
// last record is indistinguishable from a torn write: replay stops there,
// reports its LSN, and the table holds exactly the transactions committed
// before it, with clean indexes and Check.
func TestRandomBitFlipsInWALAreCorruptionUnlessInTheLastRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("bit-flip sweep skipped in -short mode")
	}
	opts := corruptOpts()
	base := filepath.Join(t.TempDir(), "base")
	db, committed := buildCorruptionBase(t, base, opts)
	redo := wal.LSN(db.lastRedo.Load())
	ckptEnd := db.log.FlushedLSN() // the checkpoint record is the last one flushed
	// Transactions after the checkpoint: the pool is big enough that none
	// of their pages reaches the files, so the WAL alone holds them.
	snaps := []map[int64]rowVal{cloneState(committed)}
	ends := []wal.LSN{ckptEnd}
	w, err := newWriter(db, 11, "wal")
	if err != nil {
		t.Fatal(err)
	}
	var pending []workOp
	for range 30 {
		err := w.step(func(_ int64, ops []workOp) error { pending = ops; return nil }, func(int64) error {
			applyOps(committed, pending)
			snaps = append(snaps, cloneState(committed))
			ends = append(ends, db.log.FlushedLSN())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	end := db.log.FlushedLSN()
	abandon(t, db)
	lastStart := waltest.LastRecord(t, base, redo, wal.Options{SegmentSize: opts.WALSegmentSize}).StartLSN

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d; WAL to replay %X..%X, %d commits, last record at %X", seed, uint64(redo), uint64(end), len(ends)-1, uint64(lastStart))
	rng := rand.New(rand.NewPCG(seed, 2))
	torn, mid, refused := 0, 0, 0
	for i := range *flipsPerKind + 10 {
		lsn := redo + wal.LSN(rng.Int64N(int64(end-redo)))
		switch {
		case i%8 == 0: // the checkpoint record itself: the control file says it is durable
			lsn = redo + wal.LSN(rng.Int64N(int64(ckptEnd-redo)))
		case i%4 == 1: // the last record: a torn end
			lsn = lastStart + wal.LSN(rng.Int64N(int64(end-lastStart)))
		}
		seg := int64(lsn) / opts.WALSegmentSize * opts.WALSegmentSize
		dir := filepath.Join(t.TempDir(), "d")
		copyDir(t, base, dir)
		bit := byte(1) << rng.IntN(8)
		flipBitMask(t, wal.SegmentPath(dir, wal.LSN(seg), opts.WALSegmentSize), int64(lsn)-seg, bit)
		what := fmt.Sprintf("WAL flip %d at LSN %X bit %#x", i, uint64(lsn), bit)
		// A flip that turns the last record's length to zero makes it read as the log's
		// clean end, as the zeroed space after the log does (PostgreSQL reads a zero
		// length so too): the record is lost as a torn one is, with no torn tail to name.
		// Read before Open, whose end-of-recovery record is written over it.
		zeroed := lengthReadsZero(t, dir, lastStart, opts.WALSegmentSize)

		db, err := Open(dir, opts)
		switch {
		case lsn < ckptEnd:
			// Damage at or before the last checkpoint record: the WAL the
			// control file relies on is gone, Open must refuse.
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "LSN") {
				t.Fatalf("%s (before the end of the checkpoint record at %X): Open = %v, want ErrCorrupt naming the LSN", what, uint64(ckptEnd), err)
			}
			refused++
			continue
		case lsn < lastStart:
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "middle of the log") {
				t.Fatalf("%s (before the last record at %X): Open = %v, want ErrCorrupt for damage in the middle of the log", what, uint64(lastStart), err)
			}
			mid++
			continue
		}
		if err != nil {
			t.Fatalf("%s (in the last record): Open: %v", what, err)
		}
		ri := db.RecoveryInfo()
		switch {
		case zeroed && (ri.TornTail != nil || ri.EndLSN != lastStart):
			t.Fatalf("%s: the last record's length reads zero: replay ended at %v (end %X), want a clean end at %X", what, ri.TornTail, uint64(ri.EndLSN), uint64(lastStart))
		case !zeroed && (ri.TornTail == nil || ri.TornTail.LSN != lastStart || ri.EndLSN != lastStart):
			t.Fatalf("%s: replay ended at %v (end %X), want the damaged last record at %X", what, ri.TornTail, uint64(ri.EndLSN), uint64(lastStart))
		}
		torn++
		k := len(ends) - 1
		for k > 0 && ends[k] > lastStart {
			k--
		}
		got, err := visibleState(db)
		if err != nil {
			t.Fatalf("%s: scan: %v", what, err)
		}
		if diff := stateDiff(got, snaps[k]); diff != "" {
			t.Fatalf("%s: replay ended at %v: rows differ from the %d transactions committed before it: %s", what, ri.TornTail, k, diff)
		}
		verifyIndexes(t, db, snaps[k])
		checkClean(t, db)
		if qi, err := db.Quarantine(); !zeroed && (err != nil || qi.Files == 0) {
			t.Fatalf("%s: the discarded WAL tail was not moved aside: %+v, %v", what, qi, err)
		}
		closeDB(t, db)
	}
	t.Logf("%d WAL bit flips: %d in the middle of the log (Open refused), %d damaged the checkpoint record (Open refused), %d in the last record (replay ended there)",
		torn+mid+refused, mid, refused, torn)
	if torn == 0 || mid == 0 {
		t.Fatal("the flips did not cover both the middle and the end of the log")
	}
}

// TestZeroedStretchInTheMiddleOfTheWALIsCorruption zeroes 4 KiB in the
// middle of the WAL to replay (a lost sector reads as zeros, which looks
// like the clean end of the log): the valid records after it make it
// damage, and Open refuses.
func TestZeroedStretchInTheMiddleOfTheWALIsCorruption(t *testing.T) {
	opts := corruptOpts()
	base := filepath.Join(t.TempDir(), "base")
	db, _ := buildCorruptionBase(t, base, opts)
	w, err := newWriter(db, 12, "wal")
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		if err := w.step(func(int64, []workOp) error { return nil }, func(int64) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	end := db.log.FlushedLSN()
	redo := wal.LSN(db.lastRedo.Load())
	abandon(t, db)
	mid := redo + (end-redo)/2
	seg := int64(mid) / opts.WALSegmentSize * opts.WALSegmentSize
	f, err := os.OpenFile(wal.SegmentPath(base, wal.LSN(seg), opts.WALSegmentSize), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := min(int64(4096), opts.WALSegmentSize-(int64(mid)-seg))
	if _, err := f.WriteAt(make([]byte, n), int64(mid)-seg); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(base, opts); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "middle of the log") {
		t.Fatalf("Open with 4 KiB zeroed at LSN %X of a WAL ending at %X = %v, want ErrCorrupt for damage in the middle of the log", uint64(mid), uint64(end), err)
	}
}

func cloneState(s map[int64]rowVal) map[int64]rowVal {
	c := make(map[int64]rowVal, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}
