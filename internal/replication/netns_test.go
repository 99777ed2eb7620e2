package replication_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"
)

// The network-namespace tests: the primary in one namespace, the standby in another, a
// veth pair between them whose link the test cuts (ip link set down) and restores. The
// test process stays in its own namespace and reaches each server through a socket made
// inside that server's namespace (setns on a locked thread), so only the link between the
// two servers is cut.

var netnsSeq atomic.Int64

// netnsPair is two network namespaces joined by a veth pair: a (10.231.0.1) and b
// (10.231.0.2), each with its loopback up.
type netnsPair struct {
	a, b  string // namespace names
	vethA string
	addrA string // the primary's IP in a
	addrB string
}

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newNetnsPair makes the namespaces and the veth pair; t.Cleanup deletes both namespaces
// (their veth ends go with them) even when the test fails.
func newNetnsPair(t *testing.T) *netnsPair {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: the network-namespace tests need root (ip netns add, veth pairs); run as root to cut a link between primary and standby")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the network-namespace tests need iproute2's ip (apt-get install iproute2): %v", err)
	}
	n := netnsSeq.Add(1)
	p := &netnsPair{a: fmt.Sprintf("vo18-%d-%d-a", os.Getpid(), n), b: fmt.Sprintf("vo18-%d-%d-b", os.Getpid(), n),
		vethA: "vo18a", addrA: "10.231.0.1", addrB: "10.231.0.2"}
	for _, ns := range []string{p.a, p.b} {
		ipCmd(t, "netns", "add", ns)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
			}
		})
	}
	ipCmd(t, "link", "add", p.vethA, "netns", p.a, "type", "veth", "peer", "name", "vo18b", "netns", p.b)
	for _, x := range []struct{ ns, dev, addr string }{{p.a, p.vethA, p.addrA}, {p.b, "vo18b", p.addrB}} {
		ipCmd(t, "-n", x.ns, "addr", "add", x.addr+"/30", "dev", x.dev)
		ipCmd(t, "-n", x.ns, "link", "set", x.dev, "up")
		ipCmd(t, "-n", x.ns, "link", "set", "lo", "up")
	}
	return p
}

// cut takes the link down (both ends lose carrier); restore brings it back.
func (p *netnsPair) cut(t *testing.T) { ipCmd(t, "-n", p.a, "link", "set", p.vethA, "down") }

func (p *netnsPair) restore(t *testing.T) { ipCmd(t, "-n", p.a, "link", "set", p.vethA, "up") }

// dialIn dials addr from inside network namespace ns: the socket is made on a thread
// moved into ns and belongs to ns from then on; the thread moves back before it is
// unlocked (and is left locked, so it dies with its goroutine, if it cannot).
func dialIn(ctx context.Context, ns, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer func() { _ = orig.Close() }()
		target, err := os.Open(filepath.Join("/var/run/netns", ns))
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{nil, fmt.Errorf("setns %s: %w", ns, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// netnsUsers: tester (the test's sessions) and repl (the standby's), SCRAM: trust is
// refused off loopback.
const netnsUsers = "tester:secret\nrepl:secret replication\n"

// startNetnsServer runs `engine-server serve` inside ns, listening on ip:5432 (the
// namespace is the test's own, so the port is free), with SCRAM users.
func startNetnsServer(t *testing.T, name, ns, ip string, args ...string) *server {
	t.Helper()
	dir := t.TempDir()
	users, pw := filepath.Join(dir, "users"), filepath.Join(dir, "password")
	if err := os.WriteFile(users, []byte(netnsUsers), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pw, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(ip, "5432")
	s := &server{t: t, name: name, addr: addr, netns: ns, password: "secret",
		args: append([]string{"serve", "--listen", addr, "--auth", "scram", "--users-file", users,
			"--data", filepath.Join(dir, "data"), "--buffer-pool", "16Mi", "--password-file", pw}, args...)}
	s.start()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("%s's output:\n%s", s.name, s.out.String())
		}
	})
	return s
}

// netnsFixture: a primary in one namespace, its standby (base backup its first step) in
// the other, pgbench tables written and replicated.
func netnsFixture(t *testing.T, primaryArgs ...string) (*netnsPair, *server, *server) {
	t.Helper()
	p := newNetnsPair(t)
	primary := startNetnsServer(t, "primary", p.a, p.addrA, append([]string{"--init"}, primaryArgs...)...)
	standby := startNetnsServer(t, "standby", p.b, p.addrB, "--standby-of", primary.addr, "--user", "repl",
		"--basebackup-if-empty", "--name", "s1")
	pc := primary.conn(t)
	pgbenchInit(t, pc)
	pgbenchWrites(t, pc, 0, 50)
	waitStandbyEqual(t, primary, standby)
	return p, primary, standby
}

// TestACutLinkLeavesAnAsynchronousPrimaryServingAndTheStandbyCatchesUp: with the link
// between the namespaces down, the primary keeps committing (each transaction as fast
// as with the link up) and the standby, still serving reads, falls behind; once the link
// is back it catches up and its tables equal the primary's row for row.
func TestACutLinkLeavesAnAsynchronousPrimaryServingAndTheStandbyCatchesUp(t *testing.T) {
	p, primary, standby := netnsFixture(t)
	pc, sc := primary.conn(t), standby.conn(t)
	p.cut(t)
	start := time.Now()
	pgbenchWrites(t, pc, 50, 200)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("200 transactions took %v with the link cut: an asynchronous primary must not wait for its standby", d)
	}
	var primaryRows, standbyRows int64
	if err := pc.QueryRow(context.Background(), "SELECT count(*) FROM pgbench_history", pgx.QueryExecModeSimpleProtocol).Scan(&primaryRows); err != nil {
		t.Fatal(err)
	}
	if err := sc.QueryRow(context.Background(), "SELECT count(*) FROM pgbench_history", pgx.QueryExecModeSimpleProtocol).Scan(&standbyRows); err != nil {
		t.Fatalf("the standby stopped serving reads while cut off: %v", err)
	}
	if standbyRows >= primaryRows {
		t.Fatalf("standby has %d history rows with the link cut, primary %d: the cut did not cut", standbyRows, primaryRows)
	}
	t.Logf("link cut: primary committed 200 transactions in %v; standby at %d of %d history rows", time.Since(start), standbyRows, primaryRows)
	p.restore(t)
	waitStandbyEqual(t, primary, standby)
}

// TestACutLinkHoldsASynchronousCommitUntilItIsRestored: with --synchronous-standby, a
// commit made while the link is down does not return; once the link is back the standby
// flushes it and it returns, and the standby's tables equal the primary's.
func TestACutLinkHoldsASynchronousCommitUntilItIsRestored(t *testing.T) {
	p, primary, standby := netnsFixture(t, "--synchronous-standby", "s1")
	p.cut(t)
	done := make(chan error, 1)
	go func() {
		c, err := primary.connect(context.Background())
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = c.Close(context.Background()) }()
		_, err = c.Exec(context.Background(), "INSERT INTO pgbench_history (seq, delta) VALUES (-1, 7)", pgx.QueryExecModeSimpleProtocol)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a synchronous commit returned (%v) while the link to the standby was cut", err)
	case <-time.After(1500 * time.Millisecond):
	}
	restored := time.Now()
	p.restore(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the held commit returned %v after the link came back", time.Since(restored))
	case <-time.After(30 * time.Second):
		t.Fatal("the synchronous commit still waits 30 s after the link came back")
	}
	waitStandbyEqual(t, primary, standby)
}
