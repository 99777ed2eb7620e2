package wire

import (
	"context"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgproto3"
)

// ReplicationConn is a replication connection past startup: authenticated (its user has
// the users file's replication marker, or the server trusts everyone), AuthenticationOk,
// the parameter reports and ReadyForQuery sent. The handler owns the connection's protocol
// from there; closing Conn ends it.
type ReplicationConn struct {
	Backend *pgproto3.Backend
	Conn    net.Conn
	PID     uint32
	User    string
	// AppName is the startup packet's application_name (a standby's --name).
	AppName string
	// Database is the startup's replication mode: false for replication=true (physical),
	// true for replication=database.
	Database bool
}

// ReplicationHandler serves replication connections (package replication). Serve returns
// when the connection ends or ctx ends (Shutdown).
type ReplicationHandler interface {
	ServeReplication(ctx context.Context, rc ReplicationConn)
}

// replicationMode is the startup parameter replication's meaning, as PostgreSQL reads
// it: "" for a normal connection, "physical" for true/on/yes/1, "database" for database.
func replicationMode(v string) string {
	switch strings.ToLower(v) {
	case "", "false", "off", "no", "0":
		return ""
	case "database":
		return "database"
	}
	return "physical"
}

// serveReplication hands the connection to the replication handler. The connection counts
// as idle for Shutdown, which then closes it at once.
func (c *conn) serveReplication() {
	c.mu.Lock()
	c.busy = false
	stopping := c.stopping
	c.mu.Unlock()
	if stopping {
		return
	}
	app, _ := c.sess.Setting("application_name")
	c.srv.cfg.Replication.ServeReplication(c.base, ReplicationConn{Backend: c.be, Conn: c.nc, PID: c.pid, User: c.user,
		AppName: app, Database: c.repl == "database"})
}
