package online

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Kind is the kind of server a Target reaches.
type Kind string

const (
	// KindPostgreSQL is a PostgreSQL server.
	KindPostgreSQL Kind = "PostgreSQL"
	// KindEngineServer is the project's engine server (cmd/engine-server).
	KindEngineServer Kind = "engine server"
)

// EngineServerVersionPrefix starts the engine server's version(); a PostgreSQL's starts
// with "PostgreSQL".
const EngineServerVersionPrefix = "vacuumops engine-server"

// Server is what Detect found.
type Server struct {
	Kind Kind
	// Major is PostgreSQL's major version (server_version_num / 10000), e.g. 15; for the
	// engine server, the PostgreSQL major version it emulates.
	Major int
	// Version is version() as the server reports it.
	Version string
}

// String names the server as reports and errors do: "PostgreSQL 15" or "engine server".
func (s Server) String() string {
	if s.Kind == KindEngineServer {
		return string(KindEngineServer)
	}
	return fmt.Sprintf("%s %d", s.Kind, s.Major)
}

// Detect asks the server on conn what it is.
func Detect(ctx context.Context, conn *pgx.Conn) (Server, error) {
	var version string
	var num int
	if err := conn.QueryRow(ctx, "SELECT version(), current_setting('server_version_num')::int").Scan(&version, &num); err != nil {
		return Server{}, fmt.Errorf("detect the server: %w", err)
	}
	s := Server{Kind: KindPostgreSQL, Major: num / 10000, Version: version}
	if strings.HasPrefix(version, EngineServerVersionPrefix) {
		s.Kind = KindEngineServer
	}
	return s, nil
}
