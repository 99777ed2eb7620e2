package auth

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary users files (bytes from disk): they parse or fail without
// panicking, and every user parsed from a verifier line keeps exactly those credentials
// (its verifier prints back as written).
func FuzzParse(f *testing.F) {
	f.Add([]byte("app:secret\n"))
	f.Add([]byte("# comment\n\nrepl:pw replication\n"))
	f.Add([]byte("app:SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0c2FsdA==$" + strings.Repeat("A", 43) + "=:" + strings.Repeat("B", 43) + "=\n"))
	f.Add([]byte("app:SCRAM-SHA-256$0:$:\n"))
	f.Add([]byte("a:b\na:c\n"))
	f.Add([]byte(":x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 || bytes.Count(b, []byte("\n")) > 8 {
			return // every plain password costs a 4096-iteration derivation
		}
		users, err := Parse(b)
		if err != nil {
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			fields := strings.Fields(rest)
			if !ok || len(fields) == 0 || !strings.HasPrefix(fields[0], "SCRAM-SHA-256$") {
				continue
			}
			u, ok := users[name]
			if !ok {
				t.Fatalf("user %q of line %q is missing from %v", name, line, users)
			}
			back, err := parseVerifier(Verifier(u.Creds))
			if err != nil || Verifier(back) != Verifier(u.Creds) {
				t.Fatalf("user %q: verifier %q does not round-trip (%v)", name, Verifier(u.Creds), err)
			}
		}
	})
}
