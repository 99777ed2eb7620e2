package online

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// SetupSession sends the session settings a run's worker sends to a server of kind before
// its VACUUM (the same statement), on conn: the tests read back what the server made of them.
func SetupSession(ctx context.Context, conn *pgx.Conn, kind Kind, l runnerwire.Limits) error {
	r := &Run{server: Server{Kind: kind}}
	return r.setup(ctx, conn, l, runnerwire.AdaptiveTargets{})
}
