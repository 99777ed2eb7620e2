package sql

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVacuumResumeContinuesFromTheSavedPosition: a VACUUM cancelled in the middle of its
// heap scan leaves its position; VACUUM (RESUME) starts there, says so in VERBOSE, and still
// removes every dead tuple.
func TestVacuumResumeContinuesFromTheSavedPosition(t *testing.T) {
	s := newTestSession(t)
	runSQL(t, s, "CREATE TABLE r (id bigint PRIMARY KEY, n bigint)")
	runSQL(t, s, "INSERT INTO r SELECT g, g FROM generate_series(1, 20000) g")
	runSQL(t, s, "DELETE FROM r WHERE id > 18000")
	runSQL(t, s, "SET vacuum_cost_delay = 10")
	runSQL(t, s, "SET vacuum_cost_limit = 1")
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	if err := s.Query(ctx, "VACUUM r", func(*Result) error { return nil }); err == nil {
		t.Fatal("the throttled VACUUM finished within 400 ms: the test stops nothing")
	}
	runSQL(t, s, "SET vacuum_cost_delay = 0")
	var notices []string
	err := s.Query(context.Background(), "VACUUM (RESUME, VERBOSE) r", func(r *Result) error {
		for _, n := range r.Notices {
			notices = append(notices, n.Message)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`resumed at block (\d+)`).FindStringSubmatch(strings.Join(notices, "\n"))
	if m == nil {
		t.Fatalf("VERBOSE does not say where it resumed: %q", notices)
	}
	if blk, _ := strconv.Atoi(m[1]); blk == 0 {
		t.Errorf("resumed at block 0: the cancelled VACUUM saved no position")
	}
	if !strings.Contains(strings.Join(notices, "\n"), "tuples: 2000 removed") {
		t.Errorf("the resumed VACUUM did not remove the 2000 dead tuples: %q", notices)
	}
	if got := runSQL(t, s, "SELECT count(*) FROM r"); got != "count\n18000\nSELECT 1\n" {
		t.Errorf("count after the resumed VACUUM: %q", got)
	}
}
