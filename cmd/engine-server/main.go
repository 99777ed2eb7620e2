// Command engine-server serves a data directory of the bundled storage engine over the
// PostgreSQL protocol, so that PostgreSQL clients (psql, pgx, pgbench) use it unchanged. It
// is the one cgo binary of the project (PostgreSQL's own SQL parser, through pg_query_go),
// built static: see `make engine-server`. See package internal/server/command.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vacuumops/vacuum-operator/internal/server/command"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := command.Main(ctx, os.Args[1:], command.Stdout, command.Stderr)
	stop()
	os.Exit(code)
}
