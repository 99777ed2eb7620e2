package online_test

import (
	"context"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/vacuumops/vacuum-operator/internal/online"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
)

// controlFileSystemIdentifier reads the system identifier with pg_controldata, from the
// control file itself rather than through SQL.
func controlFileSystemIdentifier(t *testing.T) string {
	t.Helper()
	out, err := osexec.Command(filepath.Join(pgtest.BinDir, "pg_controldata"), filepath.Join(pg.Dir(), "data")).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_controldata: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Database system identifier:\s+(\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("pg_controldata printed no system identifier:\n%s", out)
	}
	return string(m[1])
}

func TestIdentifyReadsTheControlFilesSystemIdentifierAsAnOrdinaryRole(t *testing.T) {
	db, conn := newDB(t)
	exec(t, conn, "CREATE ROLE identifier LOGIN PASSWORD '"+pgtest.Password+"'")
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP ROLE identifier") }) // best effort
	tg := target(db)
	tg.User = ""
	tg.UserFile = filepath.Join(t.TempDir(), "username")
	writeFile(t, tg.UserFile, "identifier\n")
	id, err := online.Identify(context.Background(), tg)
	if err != nil {
		t.Fatal(err)
	}
	if want := controlFileSystemIdentifier(t); id.SystemIdentifier != want {
		t.Errorf("system identifier %q, pg_controldata says %q", id.SystemIdentifier, want)
	}
	if id.Server.Kind != online.KindPostgreSQL || id.Server.Major != 15 {
		t.Errorf("server %+v, want PostgreSQL 15", id.Server)
	}
}

func TestARunStartedForAnotherServerIsRefusedBeforeAnyTable(t *testing.T) {
	db, conn := newDB(t)
	bloat(t, conn, "elsewhere", 200, 10)
	_, err := online.New(context.Background(), target(db), online.Options{Parallelism: 1,
		Throttle: limits(0, 200), SystemIdentifier: "12345"})
	if !errors.Is(err, online.ErrOtherServer) {
		t.Fatalf("New: %v, want ErrOtherServer", err)
	}
	if n := waitDead(t, conn, "elsewhere", func(int64) bool { return true }); n != 100 {
		t.Errorf("%d dead tuples, want the 100 left alone", n)
	}
	run, err := online.New(context.Background(), target(db), online.Options{Parallelism: 1,
		Throttle: limits(0, 200), SystemIdentifier: controlFileSystemIdentifier(t)})
	if err != nil {
		t.Fatalf("New with the server's own identifier: %v", err)
	}
	_ = run.Close()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
