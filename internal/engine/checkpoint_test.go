package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

func TestCheckpointRunsAutomaticallyAndRecyclesWAL(t *testing.T) {
	opts := testOpts()
	opts.WALSegmentSize = 64 << 10
	opts.CheckpointWALBytes = 128 << 10
	// The last checkpoint the WAL asks for has less than its distance of WAL
	// after it: spread over at most 1 s of time (spread.go), not the default 30.
	opts.CheckpointSpread = time.Second
	db, dir := newDB(t, opts)
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	first, err := wal.ReadControl(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for batch := int64(0); batch < 40; batch++ {
		tx := mustTx(t, db)
		for i := int64(0); i < 50; i++ {
			if _, err := tx.Insert("t", []any{batch*50 + i, "some bytes to fill the log", i}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// The checkpointer runs in the background; give it a moment.
	deadline := time.Now().Add(10 * time.Second)
	var ctl *wal.Control
	for {
		if ctl, err = wal.ReadControl(vfs.OS(), dir); err != nil {
			t.Fatal(err)
		}
		_, serr := os.Stat(wal.SegmentPath(dir, 0, opts.WALSegmentSize))
		if (ctl.RedoLSN >= wal.LSN(opts.WALSegmentSize) && os.IsNotExist(serr)) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ctl.RedoLSN <= first.RedoLSN {
		t.Fatalf("no automatic checkpoint: redo LSN still %X after %X of WAL", uint64(ctl.RedoLSN), uint64(db.log.InsertLSN()-first.RedoLSN))
	}
	if ctl.State != wal.StateInProduction {
		t.Fatalf("control state %v while open", ctl.State)
	}
	// Segments wholly before the redo pointer are gone: the first one
	// (LSN 0) ends long before it.
	if ctl.RedoLSN < wal.LSN(opts.WALSegmentSize) {
		t.Fatalf("redo LSN %X still in the first segment", uint64(ctl.RedoLSN))
	}
	if _, err := os.Stat(wal.SegmentPath(dir, 0, opts.WALSegmentSize)); !os.IsNotExist(err) {
		t.Fatalf("first WAL segment not recycled: %v", err)
	}
}

// walSegmentsAfter lists the WAL segment files whose number is above the
// segment holding lsn (the spares, after a clean shutdown at lsn).
func walSegmentsAfter(t *testing.T, dir string, lsn wal.LSN, segSize int64) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, wal.WALDirName))
	if err != nil {
		t.Fatal(err)
	}
	var after []string
	for _, e := range ents {
		if n, ok := wal.ParseSegmentName(e.Name(), segSize); ok && n > uint64(lsn)/uint64(segSize) {
			after = append(after, e.Name())
		}
	}
	return after
}

// Segments recycled at checkpoints survive a clean Close and Open, so the
// next writes reuse them, and a crash after writing into them loses no
// commit (package wal's tests show that their stale records are never read
// and that a crash's reopen removes the spares).
func TestCleanReopenKeepsRecycledWALSegmentsAndACrashInThemKeepsEveryCommit(t *testing.T) {
	opts := testOpts()
	opts.WALSegmentSize = 64 << 10
	opts.CheckpointWALBytes = 128 << 10
	db, dir := newDB(t, opts)
	if err := db.CreateTable("t", accountCols); err != nil {
		t.Fatal(err)
	}
	fill := func(db *DB, from int64) {
		t.Helper()
		for batch := int64(0); batch < 40; batch++ {
			tx := mustTx(t, db)
			for i := int64(0); i < 50; i++ {
				if _, err := tx.Insert("t", []any{from + batch*50 + i, "some bytes to fill the log", i}); err != nil {
					t.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	fill(db, 0)
	closeDB(t, db)
	ctl, err := wal.ReadControl(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	spares := walSegmentsAfter(t, dir, ctl.CheckpointLSN, opts.WALSegmentSize)
	if len(spares) < 2 {
		t.Fatalf("%d spare WAL segments after a clean Close (%v), want at least 2 recycled ones", len(spares), spares)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if kept := walSegmentsAfter(t, dir, ctl.CheckpointLSN, opts.WALSegmentSize); !slices.Equal(kept, spares) {
		t.Fatalf("spare WAL segments after a clean reopen %v, want %v kept", kept, spares)
	}
	fill(db, 1_000_000)
	abandon(t, db)
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB(t, db)
	if got := len(scanAll(t, db, "t")); got != 4000 {
		t.Fatalf("%d rows after recovery, want the 4000 committed", got)
	}
	if db.RecoveryInfo().CleanShutdown {
		t.Fatal("recovery after abandon reports a clean shutdown")
	}
}

// TestACheckpointLogsWhyItStartedAndWhatItWrote: as PostgreSQL's log_checkpoints does,
// each checkpoint logs its start with its cause and its end with the buffers it wrote
// and its phases' times, so a stall of the foreground can be laid beside it: an
// immediate one (CHECKPOINT), one the engine starts after its WAL distance, and the
// one of a clean shutdown.
func TestACheckpointLogsWhyItStartedAndWhatItWrote(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	o := spreadOpts()
	o.Logf = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	o.CheckpointSpread = -1 // the engine's own checkpoint writes at once: the test waits less
	o.LogCheckpoints = true
	db, _ := newDB(t, o)
	logged := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(lines)
	}
	complete := regexp.MustCompile(`^checkpoint complete: wrote (\d+) buffers; write=[0-9.]+ s, sync=[0-9.]+ s, total=[0-9.]+ s; distance=\d+ kB$`)
	// check runs one checkpoint after dirtying the table anew and returns the
	// buffers its completion line says it wrote.
	check := func(why string, run func() error) int {
		t.Helper()
		before := len(logged())
		dirtyTableNamed(t, db, "t"+why, 500)
		if err := run(); err != nil {
			t.Fatalf("%s checkpoint: %v", why, err)
		}
		got := logged()[before:]
		start := slices.Index(got, "checkpoint starting: "+why)
		if start < 0 {
			t.Fatalf("no %q among the lines logged: %q", "checkpoint starting: "+why, got)
		}
		for _, l := range got[start+1:] {
			if m := complete.FindStringSubmatch(l); m != nil {
				n, _ := strconv.Atoi(m[1])
				return n
			}
		}
		t.Fatalf("no completion line after %q: %q", got[start], got)
		return 0
	}
	if n := check("immediate", db.Checkpoint); n == 0 {
		t.Error("the immediate checkpoint after 500 rows says it wrote no buffer")
	}
	if n := check("wal", db.checkpointSpread); n == 0 {
		t.Error("the engine's own checkpoint after 500 rows says it wrote no buffer")
	}
	check("shutdown", db.Close)
}
