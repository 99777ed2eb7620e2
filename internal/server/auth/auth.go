// Package auth is the server's client authentication: the users file and SCRAM-SHA-256
// (RFC 7677, as PostgreSQL speaks it) through github.com/xdg-go/scram.
//
// Users file: one user a line, `name:secret`, where secret is a plain password or a
// PostgreSQL SCRAM verifier (`SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`,
// base64 parts, what pg_authid.rolpassword holds), optionally followed by whitespace and the
// word `replication` (the user may open replication connections). Blank lines and lines
// starting with # are skipped. A plain password cannot contain whitespace.
package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/xdg-go/scram"
)

// Iterations is the PBKDF2 iteration count for verifiers made from plain passwords
// (PostgreSQL's scram_iterations default).
const Iterations = 4096

// User is one entry of the users file.
type User struct {
	Name        string
	Creds       scram.StoredCredentials
	Replication bool
}

// Users is the set of users that may log in, by name.
type Users map[string]User

// ErrUnknownUser is a login by a user the file does not name.
var ErrUnknownUser = errors.New("no such user")

// LoadFile reads a users file.
func LoadFile(path string) (Users, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read users file: %w", err)
	}
	u, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("users file %s: %w", path, err)
	}
	return u, nil
}

// Parse parses a users file's contents.
func Parse(b []byte) (Users, error) {
	users := Users{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, rest, ok := strings.Cut(text, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("line %d: want name:secret", line)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 || len(fields) > 2 || (len(fields) == 2 && fields[1] != "replication") {
			return nil, fmt.Errorf("line %d: want name:secret [replication]", line)
		}
		creds, err := credentials(fields[0])
		if err != nil {
			return nil, fmt.Errorf("line %d (user %q): %w", line, name, err)
		}
		if _, dup := users[name]; dup {
			return nil, fmt.Errorf("line %d: user %q listed twice", line, name)
		}
		users[name] = User{Name: name, Creds: creds, Replication: len(fields) == 2}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return users, nil
}

// credentials turns a secret into SCRAM stored credentials.
func credentials(secret string) (scram.StoredCredentials, error) {
	if strings.HasPrefix(secret, "SCRAM-SHA-256$") {
		return parseVerifier(secret)
	}
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return scram.StoredCredentials{}, err
	}
	return Derive(secret, salt, Iterations)
}

// Derive computes the stored credentials of a password with the given salt and iterations.
func Derive(password string, salt []byte, iters int) (scram.StoredCredentials, error) {
	c, err := scram.SHA256.NewClient("", password, "")
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("password: %w", err)
	}
	creds, err := c.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: iters})
	if err != nil {
		return scram.StoredCredentials{}, fmt.Errorf("derive SCRAM credentials: %w", err)
	}
	return creds, nil
}

// Verifier renders credentials as PostgreSQL's SCRAM verifier text.
func Verifier(c scram.StoredCredentials) string {
	e := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", c.Iters, e([]byte(c.Salt)), e(c.StoredKey), e(c.ServerKey))
}

func parseVerifier(v string) (scram.StoredCredentials, error) {
	bad := errors.New("malformed SCRAM-SHA-256 verifier (want SCRAM-SHA-256$iterations:salt$StoredKey:ServerKey)")
	parts := strings.Split(strings.TrimPrefix(v, "SCRAM-SHA-256$"), "$")
	if len(parts) != 2 {
		return scram.StoredCredentials{}, bad
	}
	itersS, saltS, ok1 := strings.Cut(parts[0], ":")
	storedS, serverS, ok2 := strings.Cut(parts[1], ":")
	if !ok1 || !ok2 {
		return scram.StoredCredentials{}, bad
	}
	iters, err := strconv.Atoi(itersS)
	if err != nil || iters < 1 {
		return scram.StoredCredentials{}, bad
	}
	d := base64.StdEncoding.DecodeString
	salt, err1 := d(saltS)
	stored, err2 := d(storedS)
	server, err3 := d(serverS)
	if err1 != nil || err2 != nil || err3 != nil || len(stored) != 32 || len(server) != 32 {
		return scram.StoredCredentials{}, bad
	}
	return scram.StoredCredentials{KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: iters}, StoredKey: stored, ServerKey: server}, nil
}

// Conversation is one SCRAM-SHA-256 exchange for the user named in the startup packet (the
// SCRAM username, which libpq leaves empty, is ignored as PostgreSQL ignores it).
type Conversation struct{ conv *scram.ServerConversation }

// NewConversation starts an exchange; an unknown user still runs the exchange with made-up
// credentials and fails at the end, so a client cannot tell unknown users from wrong
// passwords.
func (u Users) NewConversation(user string) (*Conversation, error) {
	srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) {
		if e, ok := u[user]; ok {
			return e.Creds, nil
		}
		return Derive(fmt.Sprintf("%x", make([]byte, 8)), []byte(user+"-no-such-user"), Iterations)
	})
	if err != nil {
		return nil, err
	}
	return &Conversation{conv: srv.NewConversation()}, nil
}

// Step consumes a client message and returns the server's answer.
func (c *Conversation) Step(msg []byte) ([]byte, error) {
	r, err := c.conv.Step(string(msg))
	return []byte(r), err
}

// Valid reports whether the exchange ended with the client proven to know the password.
func (c *Conversation) Valid(u Users, user string) bool {
	_, known := u[user]
	return known && c.conv.Done() && c.conv.Valid()
}
