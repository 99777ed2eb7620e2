package sql

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
)

// simStandby replays the primary's WAL at a fixed rate, in steps, and reports each step
// as a standby status update would: the server's SlowestReplay stand-in.
type simStandby struct {
	log *wal.Log

	mu       sync.Mutex
	replayed wal.LSN
	changed  chan struct{}
}

func (s *simStandby) position() (wal.LSN, int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replayed, 1, s.changed
}

// standbyLag is the most inserted-and-not-replayed WAL a simStandby saw, over its whole
// replay and over its first second.
type standbyLag struct{ worst, firstSecond int64 }

// replay advances by at most step bytes every tick, never past what the primary flushed
// (it is sent nothing else), until ctx ends, and returns the most inserted-and-not-replayed
// bytes seen just before a step.
func (s *simStandby) replay(ctx context.Context, tick time.Duration, step int64) standbyLag {
	var lag standbyLag
	began := time.Now()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return lag
		case <-t.C:
		}
		ins := s.log.InsertLSN()
		s.mu.Lock()
		behind := int64(ins - s.replayed)
		lag.worst = max(lag.worst, behind)
		if time.Since(began) <= time.Second {
			lag.firstSecond = max(lag.firstSecond, behind)
		}
		s.replayed = max(s.replayed, min(s.log.FlushedLSN(), s.replayed+wal.LSN(step)))
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}

// mustSQL runs q and fails the test unless its output is want.
func mustSQL(t *testing.T, s *Session, q, want string) {
	t.Helper()
	if got := runSQL(t, s, q); got != want {
		t.Fatalf("%s: %q, want %q", q, got, want)
	}
}

// newStandbyTestServer returns a session of a new database with a table t of rows rows
// (bigint id, a, b), and its VACUUM registry.
func newStandbyTestServer(t *testing.T, rows int) (*engine.DB, *Session, *Vacuums) {
	t.Helper()
	dir := t.TempDir()
	if err := engine.Init(dir, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	v := NewVacuums()
	s := NewSession(Config{DB: db, PID: 42, User: "tester", Vacuums: v})
	mustSQL(t, s, "CREATE TABLE t (id bigint PRIMARY KEY, a bigint, b bigint)", "CREATE TABLE\n")
	mustSQL(t, s, fmt.Sprintf("INSERT INTO t SELECT g, g, g FROM generate_series(1, %d) g", rows), fmt.Sprintf("INSERT 0 %d\n", rows))
	return db, s, v
}

// fullWithStandby runs VACUUM FULL of t beside a standby that replays 4 KiB every 2 ms
// (2 MB/s), with the session's settings first (RESET after), and returns the most WAL
// the standby was behind (over the FULL and over its first second) and the statement's
// result.
func fullWithStandby(t *testing.T, db *engine.DB, s *Session, v *Vacuums, settings ...string) (lag standbyLag, res string) {
	t.Helper()
	sb := &simStandby{log: db.WAL(), replayed: db.WAL().InsertLSN(), changed: make(chan struct{})}
	v.SetStandbyReplay(sb.position)
	for _, q := range settings {
		mustSQL(t, s, q, "SET\n")
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan standbyLag)
	go func() { done <- sb.replay(ctx, 2*time.Millisecond, 4<<10) }()
	from, began := db.WAL().InsertLSN(), time.Now()
	// A worker held for WAL the standby was never sent would wait for ever: 30 s ends it.
	qctx, qcancel := context.WithTimeout(context.Background(), 30*time.Second)
	res = "VACUUM\n"
	if err := s.Query(qctx, "VACUUM FULL t", func(*Result) error { return nil }); err != nil {
		res = "ERROR " + err.Error()
	}
	qcancel()
	t.Logf("%v: FULL wrote %d bytes of WAL in %v", settings, db.WAL().InsertLSN()-from, time.Since(began))
	stop()
	mustSQL(t, s, "RESET ALL", "RESET\n")
	return <-done, res
}

// TestTheLagTargetHoldsAFullsWALWithinTheBoundOfAStandby: with
// vacuum_adaptive_max_lag_bytes set, VACUUM FULL's WAL never gets more than that many
// bytes ahead of a standby that replays slower than FULL writes,
// in its first second too, where the adaptive law, which the same setting starts, runs
// at the ceiling (TestTheLawsStartIsInForceBeforeTheVacuumRuns); without it, the same FULL
// under the same WAL rate limit runs megabytes ahead within its first second.
func TestTheLagTargetHoldsAFullsWALWithinTheBoundOfAStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two VACUUM FULLs of 20,000 rows")
	}
	// The lag target; the workers are held from walHoldAt(bound), so that the WAL a delay
	// point lets pass before the hold (a heap page's image and its records) stays within it.
	const bound = 128 << 10
	// Each FULL rewrites the same 20,000 rows: the first removes no dead rows, so the
	// second writes the same WAL.
	db, s, v := newStandbyTestServer(t, 20000)
	open, res := fullWithStandby(t, db, s, v, "SET vacuum_max_wal_rate = '1GB'")
	if res != "VACUUM\n" {
		t.Fatalf("VACUUM FULL without the bound: %q", res)
	}
	if open.firstSecond < 4*bound {
		t.Fatalf("without the bound FULL ran only %d bytes ahead of the standby in its first second: the test's standby is too fast to show the bound", open.firstSecond)
	}
	held, res := fullWithStandby(t, db, s, v, "SET vacuum_max_wal_rate = '1GB'", "SET vacuum_adaptive_max_lag_bytes = '128kB'")
	if res != "VACUUM\n" {
		t.Fatalf("VACUUM FULL with the bound: %q", res)
	}
	if held.firstSecond > bound || held.worst > bound {
		t.Fatalf("with a %d-byte bound FULL ran %d bytes ahead of the standby in its first second, %d in all (without it: %d, %d)",
			bound, held.firstSecond, held.worst, open.firstSecond, open.worst)
	}
	t.Logf("most WAL ahead of the standby (first second, all): %d, %d bytes without the bound; %d, %d with a %d-byte bound",
		open.firstSecond, open.worst, held.firstSecond, held.worst, bound)
}

// TestAVacuumHeldByTheLagBoundEndsWhenCancelled: a standby that never replays holds FULL
// at its first delay point past the bound; cancelling the statement ends it with 57014.
func TestAVacuumHeldByTheLagBoundEndsWhenCancelled(t *testing.T) {
	db, s, v := newStandbyTestServer(t, 3000)
	stuck := db.WAL().InsertLSN()
	never := make(chan struct{})
	v.SetStandbyReplay(func() (wal.LSN, int, <-chan struct{}) { return stuck, 1, never })
	mustSQL(t, s, "SET vacuum_max_wal_rate = '1GB'", "SET\n")
	mustSQL(t, s, "SET vacuum_adaptive_max_lag_bytes = '16kB'", "SET\n")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Query(ctx, "VACUUM FULL t", func(*Result) error { return nil }) }()
	select {
	case err := <-errc:
		t.Fatalf("VACUUM FULL ended (%v) while its standby replayed nothing", err)
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "cancel") {
			t.Fatalf("the held VACUUM FULL ended with %v after the cancel, want a cancellation", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held VACUUM FULL still runs 5 s after its statement was cancelled")
	}
}
