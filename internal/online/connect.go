package online

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SSL modes accepted by Target.SSLMode (libpq's names; "prefer" and "allow", which fall back
// to cleartext silently, are not offered).
const (
	SSLDisable    = "disable"
	SSLRequire    = "require"
	SSLVerifyCA   = "verify-ca"
	SSLVerifyFull = "verify-full"
)

// DefaultSSLMode is the sslmode when none is given.
const DefaultSSLMode = SSLRequire

// ApplicationName is the application_name of every session the runner opens; the engine
// server does not count sessions whose name starts with it as foreground.
const ApplicationName = "vacuum-runner"

// connectTimeout bounds one connection attempt (TCP, TLS and authentication).
const connectTimeout = 10 * time.Second

var (
	// ErrUnreachable is a server that could not be reached or is not accepting connections
	// now (refused, timed out, starting up, too many connections): retry later.
	ErrUnreachable = errors.New("server unreachable")
	// ErrAuth is an authentication failure or refusal: wrong password, an authentication
	// method the runner refuses to answer, a certificate that does not verify, an unknown
	// database or role. Retrying does not help.
	ErrAuth = errors.New("authentication failed")
)

// Target says which server to connect to and as whom, with libpq's conventions.
type Target struct {
	// Address is HOST:PORT ("[::1]:5432" for IPv6).
	Address string
	// Database is the database to vacuum (required).
	Database string
	// User is the role; empty means PGUSER, else the OS user (unless NoEnvironment).
	User string
	// UserFile holds the role's name (a mounted Secret key; trailing newlines are
	// dropped); it is read when User is empty.
	UserFile string
	// PasswordFile holds the password (trailing newlines are dropped); empty means
	// PGPASSWORD, else the matching line of ~/.pgpass (PGPASSFILE) (unless NoEnvironment).
	PasswordFile string
	// SSLMode is disable, require, verify-ca or verify-full (DefaultSSLMode when empty).
	SSLMode string
	// SSLRootCert is the CA bundle for verify-ca and verify-full (libpq's sslrootcert).
	SSLRootCert string
	// NoEnvironment ignores PGUSER, PGPASSWORD and ~/.pgpass: in a pod everything comes from
	// the RunSpec, and User is then required.
	NoEnvironment bool
}

// verifies says whether mode checks the server's certificate.
func verifies(mode string) bool { return mode == SSLVerifyCA || mode == SSLVerifyFull }

// requireAuth is the authentication policy for mode, as libpq's require_auth: SCRAM-SHA-256
// or none, plus a cleartext password when the server's certificate is verified. MD5 never.
func requireAuth(mode string) string {
	if verifies(mode) {
		return "scram-sha-256,password,none"
	}
	return "scram-sha-256,none"
}

// Config checks t and returns the pgx configuration of one session.
func (t Target) Config() (*pgx.ConnConfig, error) {
	host, port, err := net.SplitHostPort(t.Address)
	if err != nil {
		return nil, &FieldError{Field: "server", Message: fmt.Sprintf("want HOST:PORT, got %q", t.Address)}
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || host == "" {
		return nil, &FieldError{Field: "server", Message: fmt.Sprintf("want HOST:PORT with a port from 1 to 65535, got %q", t.Address)}
	}
	if t.Database == "" {
		return nil, &FieldError{Field: "database", Message: "required"}
	}
	mode := t.SSLMode
	if mode == "" {
		mode = DefaultSSLMode
	}
	switch mode {
	case SSLDisable, SSLRequire, SSLVerifyCA, SSLVerifyFull:
	default:
		return nil, &FieldError{Field: "sslmode", Message: fmt.Sprintf("must be disable, require, verify-ca or verify-full, got %q", mode)}
	}
	if t.User == "" && t.UserFile != "" {
		b, err := os.ReadFile(t.UserFile)
		if err != nil {
			return nil, &FieldError{Field: "userFile", Message: oneLine(err)}
		}
		t.User = strings.TrimRight(string(b), "\r\n")
	}
	if t.NoEnvironment && t.User == "" {
		return nil, &FieldError{Field: "user", Message: "required"}
	}
	kv := map[string]string{
		"host": host, "port": port, "dbname": t.Database, "sslmode": mode,
		"application_name": ApplicationName, "require_auth": requireAuth(mode),
		"connect_timeout": strconv.Itoa(int(connectTimeout / time.Second)),
	}
	if t.User != "" {
		kv["user"] = t.User
	}
	if t.SSLRootCert != "" {
		kv["sslrootcert"] = t.SSLRootCert
	} else if verifies(mode) && t.NoEnvironment {
		return nil, &FieldError{Field: "sslrootcert", Message: "required with sslmode " + mode}
	}
	if t.NoEnvironment {
		kv["passfile"] = os.DevNull
	}
	cfg, err := pgx.ParseConfig(keywordValues(kv))
	if err != nil {
		return nil, &FieldError{Field: "server", Message: oneLine(err)}
	}
	switch {
	case t.PasswordFile != "":
		b, err := os.ReadFile(t.PasswordFile)
		if err != nil {
			return nil, &FieldError{Field: "passwordFile", Message: oneLine(err)}
		}
		cfg.Password = strings.TrimRight(string(b), "\r\n")
	case t.NoEnvironment:
		cfg.Password = ""
	}
	if t.NoEnvironment {
		cfg.User = t.User
	}
	return cfg, nil
}

// keywordValues writes a libpq keyword/value connection string, quoting every value.
func keywordValues(kv map[string]string) string {
	var b strings.Builder
	for _, k := range []string{"host", "port", "dbname", "user", "sslmode", "sslrootcert", "passfile",
		"application_name", "require_auth", "connect_timeout"} {
		v, ok := kv[k]
		if !ok {
			continue
		}
		v = strings.ReplaceAll(v, `\`, `\\`)
		v = strings.ReplaceAll(v, `'`, `\'`)
		fmt.Fprintf(&b, "%s='%s' ", k, v)
	}
	return strings.TrimSpace(b.String())
}

// Connect opens one session to t with cfg (from t.Config), classifying a failure as
// ErrUnreachable or ErrAuth.
func Connect(ctx context.Context, t Target, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classifyConnect(t, err)
	}
	return conn, nil
}

// classifyConnect wraps a connection failure with ErrUnreachable or ErrAuth. A failure that
// is the network's or the server's momentary state is ErrUnreachable; every other one
// (authentication, the refused methods, TLS verification, unknown database or role) is the
// configuration's, ErrAuth.
func classifyConnect(t Target, err error) error {
	msg := oneLine(err)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P03", "53300", "53000", "08006", "08001", "08004":
			// cannot_connect_now (starting up, shutting down), too many connections,
			// insufficient resources, connection failures.
			return fmt.Errorf("connect to %s: %s: %w", t.Address, msg, ErrUnreachable)
		}
		return fmt.Errorf("connect to %s: %s: %w", t.Address, msg, ErrAuth)
	}
	var netErr net.Error
	var opErr *net.OpError
	var dnsErr *net.DNSError
	switch {
	case pgconn.Timeout(err), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.As(err, &opErr), errors.As(err, &dnsErr),
		errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("connect to %s: %s: %w", t.Address, msg, ErrUnreachable)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("connect to %s: %w", t.Address, err)
	}
	return fmt.Errorf("connect to %s: %s: %w", t.Address, msg, ErrAuth)
}

// oneLine flattens a multi-line error message.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}

// FieldError is an input the server or the connection cannot take, naming its field (the
// RunSpec's name; the runner translates it to a flag's).
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }
