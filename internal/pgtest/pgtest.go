// Package pgtest starts a real PostgreSQL 15 for tests: initdb into a temporary directory,
// loopback only, a free port, SCRAM-SHA-256 passwords, autovacuum off (so that dead tuples
// stay until the test vacuums them). As root it runs the server as user nobody (PostgreSQL
// refuses to run as root) and installs Debian's postgresql-15 when it is missing; as
// another user it runs the server as that user and fails, saying what to install, when the
// binaries are missing. It never skips.
//
// The server also speaks TLS (ssl=on) with a certificate for 127.0.0.1 signed by a CA made
// for it (CAFile), so verify-full can be tested; a client may still connect without TLS.
//
// Besides the superuser the server has two roles whose pg_hba.conf lines ask for the
// methods the runner refuses: CleartextUser (method password) and MD5User (method md5,
// its password stored as MD5). All roles have Password.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Roles and password of every server started here.
const (
	Superuser     = "postgres"
	CleartextUser = "cleartext_user"
	MD5User       = "md5_user"
	Password      = "pgtest-secret"
)

// BinDir is where Debian's postgresql-15 puts the server binaries.
const BinDir = "/usr/lib/postgresql/15/bin"

// Server is a running PostgreSQL.
type Server struct {
	// Host and Port are the loopback address the server listens on.
	Host string
	Port int
	dir  string
	cmd  *exec.Cmd
	// exited is closed once the server process has exited, with waitErr set.
	exited  chan struct{}
	waitErr error
	cred    *syscall.Credential
	// CAFile is the PEM certificate of the CA that signed the server's certificate.
	CAFile string
	// settings are Start's extra -c settings.
	settings []string
	// tmpl, when set, is the template the data directory is copied from instead of initdb.
	tmpl *Template
}

// Addr is HOST:PORT.
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Pid is the postmaster's process id (0 when the server is not running).
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// ConnString is a keyword/value connection string for user to database db.
func (s *Server) ConnString(user, db string) string {
	return fmt.Sprintf("host=%s port=%d user=%s password=%s dbname=%s sslmode=disable", s.Host, s.Port, user, Password, db)
}

// Connect opens a session as the superuser to db.
func (s *Server) Connect(ctx context.Context, db string) (*pgx.Conn, error) {
	return pgx.Connect(ctx, s.ConnString(Superuser, db))
}

// Dir is the server's temporary directory (its log is Dir()/postgres.log).
func (s *Server) Dir() string { return s.dir }

// Start initialises and starts a server, waiting until it accepts connections. Each of
// settings ("name=value") is passed as one more -c after the defaults above, so it wins over
// them: a benchmark asks for PostgreSQL's durable defaults back with "fsync=on",
// "synchronous_commit=on", "full_page_writes=on".
func Start(ctx context.Context, settings ...string) (*Server, error) {
	return start(ctx, nil, settings)
}

// start is Start, with the data directory copied from tmpl when it is not nil.
func start(ctx context.Context, tmpl *Template, settings []string) (*Server, error) {
	if err := EnsureInstalled(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", dir: dir, exited: make(chan struct{}), settings: settings, tmpl: tmpl}
	if err := s.start(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start(ctx context.Context) error {
	if err := s.runAsNobody(); err != nil {
		return err
	}
	data := filepath.Join(s.dir, "data")
	if s.tmpl != nil {
		if err := s.tmpl.copyTo(ctx, data); err != nil {
			return err
		}
	} else if err := s.initdb(ctx, data); err != nil {
		return err
	}
	hba := strings.Join([]string{
		"host replication " + Superuser + " 127.0.0.1/32 scram-sha-256", // StartStandby's pg_basebackup and WAL receiver
		"host all " + CleartextUser + " 127.0.0.1/32 password",
		"host all " + MD5User + " 127.0.0.1/32 md5",
		"host all all 127.0.0.1/32 scram-sha-256",
		"local all all scram-sha-256", ""}, "\n")
	if err := s.writeFile(filepath.Join(data, "pg_hba.conf"), hba); err != nil {
		return err
	}
	if err := s.writeCertificates(data); err != nil {
		return err
	}
	if err := s.launch(ctx, data); err != nil {
		return err
	}
	return s.createRoles(ctx)
}

// runAsNobody, as root, makes the server run as user nobody (PostgreSQL refuses root) and
// gives it its directory.
func (s *Server) runAsNobody() error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return fmt.Errorf("look up user nobody to run PostgreSQL as (it refuses root): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return os.Chown(s.dir, uid, gid)
}

// initdb initialises the data directory data (the superuser's password Password, SCRAM).
func (s *Server) initdb(ctx context.Context, data string) error {
	pwfile := filepath.Join(s.dir, "pwfile")
	if err := s.writeFile(pwfile, Password+"\n"); err != nil {
		return err
	}
	if out, err := s.command(ctx, "initdb", "-D", data, "-U", Superuser, "--pwfile", pwfile,
		"--auth", "scram-sha-256", "-E", "UTF8", "--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// launch starts postgres on the data directory data, on a free port, and waits until it
// accepts connections.
func (s *Server) launch(ctx context.Context, data string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Port = port
	logf, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }() // the child has its own descriptor
	args := []string{"-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=" + s.Host, "-c", "unix_socket_directories=" + s.dir,
		"-c", "autovacuum=off", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "shared_buffers=64MB", "-c", "max_connections=40",
		"-c", "password_encryption=scram-sha-256", "-c", "ssl=on",
		"-c", "ssl_cert_file=" + filepath.Join(data, "server.crt"), "-c", "ssl_key_file=" + filepath.Join(data, "server.key")}
	for _, kv := range s.settings {
		args = append(args, "-c", kv)
	}
	s.cmd = s.command(context.Background(), "postgres", args...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	go func() { s.waitErr = s.cmd.Wait(); close(s.exited) }()
	return s.waitReady(ctx)
}

// waitReady connects until the server accepts (30 s at most).
func (s *Server) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := s.Connect(ctx, "postgres")
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
			return fmt.Errorf("postgres exited (%v) before accepting connections:\n%s", s.waitErr, log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres on %s not ready after 30s: %w", s.Addr(), err)
		}
	}
}

func (s *Server) createRoles(ctx context.Context) error {
	conn, err := s.Connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }() // a test server
	for _, q := range []string{
		"CREATE ROLE " + CleartextUser + " LOGIN PASSWORD '" + Password + "'",
		"SET password_encryption = 'md5'",
		"CREATE ROLE " + MD5User + " LOGIN PASSWORD '" + Password + "'",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// CreateDatabase creates a database (one per test keeps their tables apart).
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	conn, err := s.Connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(ctx) }() // a test server
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// Stop shuts the server down (fast) and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill() // the server we started, stuck
			<-s.exited
		}
	}
	_ = os.RemoveAll(s.dir) // best effort: a temporary directory
}

// command runs a PostgreSQL binary as the server's user.
func (s *Server) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(BinDir, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// writeFile writes a file the server's user owns.
func (s *Server) writeFile(path, content string) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if s.cred != nil {
		return os.Chown(path, int(s.cred.Uid), int(s.cred.Gid))
	}
	return nil
}

// EnsureInstalled makes sure Debian's postgresql-15 and postgresql-client-15 are installed:
// when their programs are missing and we are root it installs them with apt-get, otherwise
// it fails saying what to do.
func EnsureInstalled(ctx context.Context) error {
	var missing []string
	for _, name := range []string{"postgres", "psql", "pgbench"} {
		if _, err := os.Stat(filepath.Join(BinDir, name)); err != nil {
			missing = append(missing, filepath.Join(BinDir, name))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("PostgreSQL 15 is not installed (%s missing): install Debian's postgresql-15 and "+
			"postgresql-client-15 (apt-get install postgresql-15 postgresql-client-15) or run the tests as root, which installs them",
			strings.Join(missing, ", "))
	}
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "postgresql-15", "postgresql-client-15"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, p := range missing {
		if _, err := os.Stat(p); err != nil {
			return errors.New("apt-get installed postgresql-15 and postgresql-client-15 but " + p + " is still missing")
		}
	}
	return nil
}

// Tool returns the path of the PostgreSQL 15 program name (psql, pgbench, initdb, ...),
// installing the packages first when they are missing (EnsureInstalled).
func Tool(ctx context.Context, name string) (string, error) {
	if err := EnsureInstalled(ctx); err != nil {
		return "", err
	}
	p := filepath.Join(BinDir, name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("PostgreSQL 15's %s: %w", name, err)
	}
	return p, nil
}

// freePort returns a loopback port nobody listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }() // only probing
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, fmt.Errorf("listener address %v is not TCP", ln.Addr())
	}
	return addr.Port, nil
}
