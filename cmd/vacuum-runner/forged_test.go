package main

import (
	"bytes"
	"context"
	bin "encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vacuumops/vacuum-operator/internal/engine/txn"
	"github.com/vacuumops/vacuum-operator/internal/engine/vfs"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal"
	"github.com/vacuumops/vacuum-operator/internal/engine/wal/waltest"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// memLimit is the memory a runner pod of a small run gets; a forged file must never make
// the runner need more.
const memLimit = 256 << 20

// vrMeasured runs vacuum-runner as a pod limited to 256Mi runs it: in a memory cgroup of
// that hard limit (where the machine gives one: root and a cgroup v1 memory controller),
// with GOMEMLIMIT=256MiB as the runner image sets it. It returns the exit code, stderr
// and peak resident set size (getrusage of the child), and fails the test on an OOM kill.
func vrMeasured(t *testing.T, args ...string) (int, string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "GOMEMLIMIT=256MiB")
	cg, why := newMemCgroup(t, memLimit)
	if cg != nil {
		cg.wrap(cmd)
	} else {
		t.Logf("no memory cgroup for the child (%s): the limit is GOMEMLIMIT and the RSS check alone", why)
	}
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errb
	err := cmd.Run()
	if cg != nil {
		kills, failcnt := cg.oomKills(t)
		t.Logf("memory cgroup %s: limit hit %d times, %d OOM kills", cg.dir, failcnt, kills)
		if kills > 0 {
			t.Fatalf("vacuum-runner %v was OOM-killed in a %d MiB memory cgroup (exit %v)", args, memLimit>>20, err)
		}
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("vacuum-runner %v: %v", args, err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		t.Fatal("no rusage for the child")
	}
	return cmd.ProcessState.ExitCode(), errb.String(), ru.Maxrss << 10 // Maxrss is in KiB on Linux
}

// forgeControl rewrites the control file of dir with fn applied and a valid CRC (layout 2).
func forgeControl(t *testing.T, dir string, fn func(c *wal.Control)) {
	t.Helper()
	c, err := wal.ReadControl(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	fn(c)
	b := wal.EncodeControl(c)
	if err := os.WriteFile(filepath.Join(dir, wal.ControlFileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// forgeRawNextXID writes next into the control file's next-xid field and re-seals its CRC,
// bypassing EncodeControl (a forger is not bound by it).
func forgeRawNextXID(t *testing.T, dir string, next uint64) {
	t.Helper()
	p := filepath.Join(dir, wal.ControlFileName)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	bin.LittleEndian.PutUint64(b[32:], next)
	bin.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// appendForgedRecord appends, after the last record of dir's WAL, a record with a valid CRC
// and a correct prev link that names transaction xid.
func appendForgedRecord(t *testing.T, dir string, xid uint64) {
	t.Helper()
	c, err := wal.ReadControl(vfs.OS(), dir)
	if err != nil {
		t.Fatal(err)
	}
	last := waltest.LastRecord(t, dir, c.RedoLSN, wal.Options{})
	b := wal.Encode(&wal.Record{Rmgr: wal.RmgrXact, Info: txn.InfoCommit, XID: xid, PrevLSN: last.StartLSN, Main: []byte{}})
	size := int64(wal.DefaultSegmentSize)
	seg := int64(last.EndLSN) / size * size
	f, err := os.OpenFile(wal.SegmentPath(dir, wal.LSN(seg), size), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, int64(last.EndLSN)-seg); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestForgedControlFilesAndWALExitFourWithinTheMemoryLimit forges the values a hostile or
// broken volume could hold (a next transaction id of 2^44 or 2^63, one beyond what the
// commit log covers, a WAL record naming transaction 2^31): each must be refused as
// corruption (exit 4), within a pod's 256Mi, never by an out-of-memory kill or a panic.
func TestForgedControlFilesAndWALExitFourWithinTheMemoryLimit(t *testing.T) {
	cases := []struct {
		name  string
		forge func(t *testing.T, dir string)
	}{
		{"control next xid 2^44", func(t *testing.T, dir string) { forgeRawNextXID(t, dir, 1<<44) }},
		{"control next xid 2^63", func(t *testing.T, dir string) { forgeRawNextXID(t, dir, 1<<63) }},
		{"control next xid beyond the commit log", func(t *testing.T, dir string) {
			forgeControl(t, dir, func(c *wal.Control) { c.NextXID = 1 << 31 })
		}},
		{"control redo LSN 2^63", func(t *testing.T, dir string) {
			forgeControl(t, dir, func(c *wal.Control) { c.RedoLSN, c.CheckpointLSN = 1<<63, 1<<63 })
		}},
		{"WAL record naming transaction 2^31", func(t *testing.T, dir string) { appendForgedRecord(t, dir, 1<<31) }},
		{"WAL record naming transaction 2^63", func(t *testing.T, dir string) { appendForgedRecord(t, dir, 1<<63) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyFixture(t)
			tc.forge(t, dir)
			code, stderr, rss := vrMeasured(t, "check", "--data", dir)
			t.Logf("exit %d, peak RSS %d MiB", code, rss>>20)
			if code != runnerwire.ExitCorruption || !strings.Contains(stderr, "damaged") {
				t.Fatalf("check of a directory with a %s: exit %d, stderr %q; want 4 (corruption)", tc.name, code, stderr)
			}
			if rss >= memLimit {
				t.Fatalf("peak RSS %d MiB, over the %d MiB limit", rss>>20, memLimit>>20)
			}
		})
	}
}
