package online

import (
	"context"
	"errors"
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

// ErrOtherServer is a server whose system identifier is not the one the run was started
// for: the address now reaches another server (a failover, a Service edited). The run's
// lock is keyed by the identifier, so it must not vacuum this one; retry later.
var ErrOtherServer = errors.New("another server answers at this address")

// SystemIdentifier reads the server's system identifier, as pg_control_system() reports it
// on both PostgreSQL and the engine server (a decimal 64-bit number).
func SystemIdentifier(ctx context.Context, conn *pgx.Conn) (string, error) {
	var id string
	if err := conn.QueryRow(ctx, "SELECT system_identifier::text FROM pg_control_system()").Scan(&id); err != nil {
		return "", fmt.Errorf("read the system identifier (pg_control_system()): %w", err)
	}
	return id, nil
}

// Identity is what Identify found: the server and its system identifier.
type Identity struct {
	Server           Server
	SystemIdentifier string
}

// Identify connects to t, detects the server and reads its system identifier. It checks no
// option: the operator identifies a server before it takes the server's lock.
func Identify(ctx context.Context, t Target) (Identity, error) {
	cfg, err := t.Config()
	if err != nil {
		return Identity{}, err
	}
	conn, err := Connect(ctx, t, cfg)
	if err != nil {
		return Identity{}, err
	}
	defer func() { _ = conn.Close(context.Background()) }() // read-only session
	s, err := Detect(ctx, conn)
	if err != nil {
		return Identity{}, err
	}
	id, err := SystemIdentifier(ctx, conn)
	if err != nil {
		return Identity{}, err
	}
	return Identity{Server: s, SystemIdentifier: id}, nil
}
