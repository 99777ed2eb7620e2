package replication_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/replication"
	"github.com/vacuumops/vacuum-operator/internal/server/auth"
	"github.com/vacuumops/vacuum-operator/internal/server/wire"
)

// primary is an engine server with replication on a free loopback port over a fresh
// data directory (16 MiB WAL segments, PostgreSQL's), users "repl" (replication marker)
// and "plain" (none), both with password "secret".
type primary struct {
	dir  string
	addr string
	db   *engine.DB
	srv  *wire.Server
	p    *replication.Primary
	stop func()
}

func startPrimary(t *testing.T, cfg replication.PrimaryConfig) *primary {
	t.Helper()
	dir := t.TempDir()
	if err := engine.Init(dir, engine.Options{}); err != nil {
		t.Fatal(err)
	}
	return openPrimary(t, dir, cfg)
}

func openPrimary(t *testing.T, dir string, cfg replication.PrimaryConfig) *primary {
	t.Helper()
	db, err := engine.Open(dir, engine.Options{BufferPoolBytes: 8 << 20, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	users, err := auth.Parse([]byte("repl:secret replication\nplain:secret\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB, cfg.Logf = db, t.Logf
	p, err := replication.NewPrimary(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := wire.New(wire.Config{DB: db, Auth: wire.AuthSCRAM, Users: users, Replication: p, Views: p.Views(), Logf: t.Logf})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	pr := &primary{dir: dir, addr: ln.Addr().String(), db: db, srv: srv, p: p}
	stopped := false
	pr.stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, wire.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		p.Close()
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	t.Cleanup(pr.stop)
	return pr
}

func (p *primary) hostPort() (string, string) {
	h, port, _ := net.SplitHostPort(p.addr)
	return h, port
}

func (p *primary) replURL(user string) string {
	return fmt.Sprintf("postgres://%s:secret@%s/postgres?sslmode=disable&replication=true", user, p.addr)
}

// write inserts n rows of pad bytes each into table (created if needed), committed in
// batches of 100.
func write(t *testing.T, db *engine.DB, table string, n, pad int) {
	t.Helper()
	if _, err := db.Table(table); err != nil {
		if err := db.CreateTable(table, []engine.Column{{Name: "id", Type: engine.Int8}, {Name: "pad", Type: engine.Bytea}}); err != nil {
			t.Fatal(err)
		}
	}
	b := make([]byte, pad)
	for i := 0; i < n; {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 100 && i < n; j++ {
			b[0], b[1] = byte(i), byte(i>>8)
			if _, err := tx.Insert(table, []any{int64(i), b}); err != nil {
				t.Fatal(err)
			}
			i++
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}

func fmtUint(v uint64) string { return fmt.Sprint(v) }
