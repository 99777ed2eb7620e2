package sql

import (
	"context"
	"strings"
	"testing"
)

func TestVacuumThroughSQLRemovesDeadTuplesAndReportsVerboseAsInfo(t *testing.T) {
	s := newTestSession(t)
	runSQL(t, s, "CREATE TABLE v (id bigint PRIMARY KEY, n bigint)")
	runSQL(t, s, "INSERT INTO v SELECT g, g FROM generate_series(1, 500) g")
	if got := runSQL(t, s, "DELETE FROM v WHERE id <= 200"); got != "DELETE 200\n" {
		t.Fatalf("delete: %q", got)
	}
	var notices []string
	err := s.Query(context.Background(), "VACUUM (VERBOSE) v", func(r *Result) error {
		if r.Tag != "VACUUM" {
			t.Errorf("tag %q", r.Tag)
		}
		for _, n := range r.Notices {
			notices = append(notices, n.Severity+": "+n.Message)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(notices) != 1 || !strings.HasPrefix(notices[0], "INFO: finished vacuuming \"v\"") || !strings.Contains(notices[0], "tuples: 200 removed, 300 remain") {
		t.Fatalf("VERBOSE report: %q", notices)
	}
	for _, tc := range []struct{ q, want string }{
		{"VACUUM FULL v", "VACUUM\n"},
		{"VACUUM", "VACUUM\n"},
		{"SELECT count(*), min(id) FROM v", "count|min\n300|201\nSELECT 1\n"},
		{"CHECKPOINT", "CHECKPOINT\n"},
		{"SET vacuum_cost_delay = 2", "SET\n"},
		{"SET vacuum_max_read_rate = '8MB'", "SET\n"},
		{"VACUUM (TRUNCATE false, PARALLEL 2, BUFFER_USAGE_LIMIT '256kB') v", "VACUUM\n"},
		{"VACUUM (BUFFER_USAGE_LIMIT '1kB') v", "ERROR 22023\n"},
		{"SET vacuum_max_read_rate = 'lots'", "SET\n"},
		{"VACUUM v", "ERROR 22023\n"},
		{"RESET vacuum_max_read_rate", "RESET\n"},
		{"VACUUM nope", "ERROR 42P01\n"},
		{"ANALYZE v", "ANALYZE\n"},
		{"VACUUM ANALYZE v", "VACUUM\n"},
		{"ANALYZE nope", "ERROR 42P01\n"},
		{"BEGIN", "BEGIN\n"},
		{"VACUUM v", "ERROR 25001\n"},
		{"ROLLBACK", "ROLLBACK\n"},
	} {
		if got := runSQL(t, s, tc.q); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.q, got, tc.want)
		}
	}
}
