package bench

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
)

// openForegroundTable builds a small table with both indexes and returns
// the open database and the number of keys.
func openForegroundTable(t *testing.T) (*engine.DB, int64) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	opts := engine.Options{BufferPoolBytes: 4 << 20}
	const rows = 2000
	if err := BuildDataSet(dir, opts, []TableSpec{{Name: "t", Rows: rows, Payload: 50, Seed: 1}}); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, rows
}

// Each worker sleeps think after every lookup, so in a window of d it can
// start at most d/think + 1 lookups. A Reset that let the warm-up's
// samples through (each worker used to keep up to 1,023 unflushed ones)
// counts far more than that.
func TestForegroundCountsOnlyLookupsStartedAfterReset(t *testing.T) {
	db, keys := openForegroundTable(t)
	const workers, think = 4, time.Millisecond
	fg := StartForeground(db, IDIndex("t"), keys, workers, think, 1)
	time.Sleep(300 * time.Millisecond) // warm-up: a few hundred lookups per worker
	fg.Reset()
	time.Sleep(100 * time.Millisecond)
	lat, err := fg.Stop()
	if err != nil {
		t.Fatal(err)
	}
	possible := workers * (int(lat.Duration/think) + 1)
	if lat.Count > possible {
		t.Errorf("%d lookups counted in a %v window where at most %d are possible: warm-up samples leaked through Reset",
			lat.Count, lat.Duration.Round(time.Millisecond), possible)
	}
	if lat.Count == 0 {
		t.Errorf("no lookups counted in a %v window", lat.Duration)
	}
}

// Snapshot sees every lookup finished so far, so two snapshots of the same
// window never go backwards and a snapshot before Stop is not empty.
func TestForegroundSnapshotSeesEveryFinishedLookup(t *testing.T) {
	db, keys := openForegroundTable(t)
	fg := StartForeground(db, IDIndex("t"), keys, 2, time.Millisecond, 2)
	fg.Reset()
	time.Sleep(50 * time.Millisecond)
	first := fg.Snapshot()
	lat, err := fg.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if first.Count == 0 {
		t.Error("a snapshot after 50 ms of lookups counted none")
	}
	if lat.Count < first.Count {
		t.Errorf("Stop counted %d lookups, fewer than the earlier snapshot's %d", lat.Count, first.Count)
	}
}
