package replication_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/replication"
)

// pgBin finds a PostgreSQL 15 client program, installing the client package as root
// when it is missing, or fails the test saying so.
func pgBin(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("/usr/lib/postgresql/15/bin", name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Geteuid() == 0 {
		out, err := exec.Command("sh", "-c", "apt-get install -y postgresql-client-15 || (apt-get update && apt-get install -y postgresql-client-15)").CombinedOutput()
		if err == nil {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
		t.Logf("apt-get: %s", out)
	}
	t.Fatalf("%s is missing: install Debian's postgresql-client-15 (apt-get install postgresql-client-15)", p)
	return ""
}

// TestPgReceivewalFilesEqualTheServersSegments streams with PostgreSQL 15's own
// pg_receivewal (slot created by it, a first short stream, then WAL crossing a segment
// boundary with a checkpoint that would recycle the first segment without the slot, and
// a second stream resuming from the first's partial file), and compares every
// file it wrote with the server's WAL file of the same name over the range it received.
func TestPgReceivewalFilesEqualTheServersSegments(t *testing.T) {
	bin := pgBin(t, "pg_receivewal")
	pr := startPrimary(t, replication.PrimaryConfig{MaxSlotWALKeepSize: -1})
	host, port := pr.hostPort()
	out := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"-h", host, "-p", port, "-U", "repl", "-w", "--no-loop", "-v"}, args...)...)
		cmd.Env = append(os.Environ(), "PGPASSWORD=secret", "PGCONNECT_TIMEOUT=10")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pg_receivewal %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	run("--create-slot", "-S", "recv")
	// pg_receivewal creates its slot without reserving WAL; its first stream (from the
	// start of the current segment, up to now) makes the slot hold WAL from there.
	// (pg_receivewal stops once it has received past --endpos: one byte before the end.)
	run("-D", out, "-S", "recv", "-E", replication.FormatLSN(pr.db.WAL().FlushedLSN()-1))
	if sl, ok := pr.p.Slots().Get("recv"); !ok || sl.RestartLSN == 0 || sl.RestartLSN >= 16<<20 {
		t.Fatalf("slot after the first stream: %+v, %v; want one holding the first segment", sl, ok)
	}
	write(t, pr.db, "t", 18000, 1000) // about 20 MiB of WAL: past the first segment
	if err := pr.db.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	write(t, pr.db, "t2", 100, 100)
	end := pr.db.WAL().FlushedLSN()
	if end < 16<<20 {
		t.Fatalf("WAL ends at %X, want past the first 16 MiB segment", uint64(end))
	}
	log := run("-D", out, "-S", "recv", "-E", replication.FormatLSN(end-1))
	t.Logf("pg_receivewal: %s", strings.TrimSpace(log))

	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	seg := int64(wal.DefaultSegmentSize)
	full, partial := 0, 0
	for _, e := range ents {
		name, isPartial := strings.CutSuffix(e.Name(), ".partial")
		segno, ok := wal.ParseSegmentName(name, seg)
		if !ok {
			t.Fatalf("pg_receivewal wrote %s, not a segment name the server uses", e.Name())
		}
		got, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(pr.dir, wal.WALDirName, name))
		if err != nil {
			t.Fatalf("server has no WAL file %s: %v", name, err)
		}
		n := seg
		if isPartial {
			n = int64(uint64(end) - segno*uint64(seg))
			partial++
		} else {
			full++
		}
		if int64(len(got)) < n || int64(len(want)) < n {
			t.Fatalf("%s: %d bytes received, server file %d, want at least %d", e.Name(), len(got), len(want), n)
		}
		if !bytes.Equal(got[:n], want[:n]) {
			i := 0
			for i < int(n) && got[i] == want[i] {
				i++
			}
			t.Fatalf("%s differs from the server's %s at byte %d (of %d compared)", e.Name(), name, i, n)
		}
		t.Logf("%s: %d bytes equal to the server's", e.Name(), n)
	}
	if full < 1 || partial != 1 {
		t.Fatalf("pg_receivewal wrote %d full and %d partial segments, want at least 1 and 1", full, partial)
	}
	if sl, _ := pr.p.Slots().Get("recv"); sl.RestartLSN < wal.LSN(seg) {
		t.Logf("slot restart LSN %s after streaming (pg_receivewal reports its flush position only every 10 s without --synchronous)", replication.FormatLSN(sl.RestartLSN))
	}
}
