package wire_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// pauseRow is a vacuum's position and pause state in a progress view.
type pauseRow struct {
	phase    string
	scanned  int64
	vacuumed int64 // heap_blks_vacuumed (lazy) or index_rebuild_count (FULL)
	paused   bool
	pausedMS int64
}

func readPause(t *testing.T, c *pgx.Conn, view string, pid uint32) (pauseRow, bool) {
	t.Helper()
	moved := "heap_blks_vacuumed"
	if view == "pg_stat_progress_cluster" {
		moved = "index_rebuild_count"
	}
	var r pauseRow
	err := c.QueryRow(context.Background(), "SELECT phase, heap_blks_scanned, "+moved+", paused, time_paused_ms FROM "+view+" WHERE pid = $1",
		int32(pid)).Scan(&r.phase, &r.scanned, &r.vacuumed, &r.paused, &r.pausedMS)
	if err == pgx.ErrNoRows {
		return r, false
	}
	if err != nil {
		t.Fatalf("read %s: %v", view, err)
	}
	return r, true
}

func callBool(t *testing.T, c *pgx.Conn, q string, args ...any) bool {
	t.Helper()
	var ok bool
	if err := c.QueryRow(context.Background(), q, args...).Scan(&ok); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return ok
}

// TestVacuumPauseHoldsARunningVacuumUntilResumeAndCancelEndsItWhilePaused watches a
// throttled VACUUM in pg_stat_progress_vacuum and a VACUUM FULL in pg_stat_progress_cluster
// (PostgreSQL's phase and command) and pauses each from another session with vacuum_pause:
// the view says paused and its position does not move while the time paused grows (and,
// for the lazy vacuum, the table stays writable); vacuum_resume lets the lazy one move on;
// a second pause and pg_cancel_backend end each with 57014 within 2 s, leaving no row.
// (It replaced the cancel-only test of the same two statements.)
func TestVacuumPauseHoldsARunningVacuumUntilResumeAndCancelEndsItWhilePaused(t *testing.T) {
	s := startServer(t, wire.Config{})
	ctl := connect(t, s.url("ctl", "", "postgres"))
	bloated(t, ctl, "bloat")
	vac := connect(t, s.url("vacuum-runner", "", "postgres"))
	pid := vac.PgConn().PID()
	ctx := context.Background()
	// About 50 blocks a second: the vacuum is under way for several seconds.
	mustExec(t, vac, "SET vacuum_cost_delay = 10")
	mustExec(t, vac, "SET vacuum_cost_limit = 10")
	for _, stmt := range []string{"VACUUM bloat", "VACUUM FULL bloat"} {
		full := strings.Contains(stmt, "FULL")
		view := map[bool]string{false: "pg_stat_progress_vacuum", true: "pg_stat_progress_cluster"}[full]
		if full {
			mustExec(t, vac, "SET vacuum_cost_limit = 100") // the rewrite charges per tuple too
		}
		done := make(chan error, 1)
		go func() {
			_, err := vac.Exec(ctx, stmt)
			done <- err
		}()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if r, ok := readPause(t, ctl, view, pid); ok && r.scanned > 0 {
				if r.paused || r.pausedMS != 0 {
					t.Fatalf("%s: %+v before any pause", view, r)
				}
				var phase, command string
				q := "SELECT phase, 'VACUUM' FROM " + view + " WHERE pid = $1"
				if full {
					q = "SELECT phase, command FROM " + view + " WHERE pid = $1"
				}
				if err := ctl.QueryRow(ctx, q, int32(pid)).Scan(&phase, &command); err != nil {
					t.Fatalf("%s: %v", view, err)
				}
				wantPhase, wantCommand := "scanning heap", "VACUUM"
				if full {
					wantPhase, wantCommand = "seq scanning heap", "VACUUM FULL"
				}
				if phase != wantPhase || command != wantCommand {
					t.Fatalf("%s: phase %q command %q, want %q %q", view, phase, command, wantPhase, wantCommand)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no row with blocks scanned within 10 s", stmt)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !callBool(t, ctl, "SELECT vacuum_pause($1)", int32(pid)) {
			t.Fatalf("vacuum_pause of the session running %s = false", stmt)
		}
		time.Sleep(100 * time.Millisecond) // the page in flight at the pause
		first, ok := readPause(t, ctl, view, pid)
		if !ok || !first.paused {
			t.Fatalf("%s after vacuum_pause: %+v (row %v), want paused", view, first, ok)
		}
		if !full {
			// A paused lazy vacuum blocks nobody.
			mustExec(t, ctl, "UPDATE bloat SET n = n + 1 WHERE id = 1")
		}
		time.Sleep(400 * time.Millisecond)
		later, _ := readPause(t, ctl, view, pid)
		if later.phase != first.phase || later.scanned != first.scanned || later.vacuumed != first.vacuumed || !later.paused {
			t.Fatalf("%s moved while paused: %+v then %+v", stmt, first, later)
		}
		if later.pausedMS < 400 || later.pausedMS > 60_000 {
			t.Fatalf("time_paused_ms %d after 500 ms paused", later.pausedMS)
		}
		if !full {
			if !callBool(t, ctl, "SELECT vacuum_resume($1)", int32(pid)) {
				t.Fatal("vacuum_resume = false")
			}
			deadline = time.Now().Add(10 * time.Second)
			for {
				r, ok := readPause(t, ctl, view, pid)
				if !ok {
					t.Fatalf("the vacuum ended within 10 s of resuming, before it was seen moving (%v)", <-done)
				}
				if r.paused {
					t.Fatalf("%s after vacuum_resume: %+v, want not paused", view, r)
				}
				if r.scanned > later.scanned || r.vacuumed > later.vacuumed || r.phase != later.phase {
					if r.pausedMS < later.pausedMS {
						t.Fatalf("time_paused_ms went back from %d to %d", later.pausedMS, r.pausedMS)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("resumed vacuum did not move in 10 s: %+v", r)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !callBool(t, ctl, "SELECT vacuum_pause($1)", int32(pid)) {
				t.Fatal("second vacuum_pause = false")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !callBool(t, ctl, "SELECT pg_cancel_backend($1)", int32(pid)) {
			t.Fatal("pg_cancel_backend = false")
		}
		select {
		case err := <-done:
			if sqlstate(err) != "57014" {
				t.Fatalf("paused %s after pg_cancel_backend: %v, want 57014", stmt, err)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("paused %s still there 2 s after pg_cancel_backend", stmt)
		}
		var n int64
		if err := ctl.QueryRow(ctx, "SELECT count(*) FROM "+view).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%s rows after the cancel: %d, %v", view, n, err)
		}
	}
	var ok bool
	if err := ctl.QueryRow(ctx, "SELECT pg_cancel_backend(1)").Scan(&ok); err != nil || ok {
		t.Fatalf("pg_cancel_backend of no backend: %v, %v (want false and a warning)", ok, err)
	}
	for _, f := range []string{"vacuum_pause", "vacuum_resume"} {
		if callBool(t, ctl, "SELECT "+f+"($1)", int32(pid)) {
			t.Errorf("%s of a session running no VACUUM = true", f)
		}
	}
}
