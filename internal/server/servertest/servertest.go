// Package servertest starts an in-process engine server for tests: a fresh
// data directory, the engine opened over it and package wire serving it on
// a free loopback port, shut down gracefully when the test ends. It is to
// the engine server's tests what waltest is to the WAL's.
package servertest

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// Server is an in-process engine server a test started.
type Server struct {
	Wire *wire.Server
	Addr string // host:port on the loopback interface
	DB   *engine.DB
	Dir  string // the data directory
}

// BufferPoolBytes is the engine's buffer pool in a started server.
const BufferPoolBytes = 4 << 20

// Start initializes a data directory in t.TempDir(), opens the engine over
// it and serves cfg (its DB and Logf set here; Auth trust unless cfg names
// one) on a free loopback port. When the test ends the server shuts down
// (in-flight sessions end) and the engine closes; failures of either fail
// the test.
func Start(t testing.TB, cfg wire.Config) *Server {
	t.Helper()
	dir := t.TempDir()
	if err := engine.Init(dir, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(dir, engine.Options{BufferPoolBytes: BufferPoolBytes})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Auth == "" {
		cfg.Auth = wire.AuthTrust
	}
	cfg.DB = db
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = db.Close()
		t.Fatal(err)
	}
	srv := wire.New(cfg)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, wire.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &Server{Wire: srv, Addr: ln.Addr().String(), DB: db, Dir: dir}
}
