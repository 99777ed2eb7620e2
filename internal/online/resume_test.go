package online

import (
	"strings"
	"testing"
)

// TestResumeAddsRESUMEOnlyToTheEngineServersLazyVacuum: PostgreSQL has no RESUME option (its
// tables start at block 0), and VACUUM FULL is all or nothing.
func TestResumeAddsRESUMEOnlyToTheEngineServersLazyVacuum(t *testing.T) {
	tb := Table{Schema: "public", Name: "orders"}
	for _, c := range []struct {
		kind       Kind
		full, want bool
	}{
		{KindEngineServer, false, true},
		{KindEngineServer, true, false},
		{KindPostgreSQL, false, false},
	} {
		r := &Run{server: Server{Kind: c.kind}, opts: Options{Resume: true, Full: c.full}}
		if got := strings.Contains(r.statement(tb), "RESUME"); got != c.want {
			t.Errorf("%s, full %v: %q, want RESUME %v", c.kind, c.full, r.statement(tb), c.want)
		}
	}
}
