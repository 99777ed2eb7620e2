package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// StartStandby makes a streaming hot standby of the server: a base backup with PostgreSQL
// 15's pg_basebackup (WAL streamed alongside, -X stream), standby.signal, and a
// primary_conninfo naming the standby name as its application_name, so that the primary's
// synchronous_standby_names can name it. The standby runs with the primary's settings plus
// settings, on its own free port and directory; it accepts read-only sessions once it is
// consistent, and Stop removes it like a primary.
func (s *Server) StartStandby(ctx context.Context, name string, settings ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgtest-standby-")
	if err != nil {
		return nil, err
	}
	sb := &Server{Host: s.Host, dir: dir, exited: make(chan struct{}), cred: s.cred, CAFile: s.CAFile}
	if sb.cred != nil {
		if err := os.Chown(dir, int(sb.cred.Uid), int(sb.cred.Gid)); err != nil {
			sb.Stop()
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	bb := sb.command(ctx, "pg_basebackup", "-D", data, "-h", s.Host, "-p", fmt.Sprint(s.Port), "-U", Superuser,
		"-X", "stream", "-c", "fast", "--no-sync")
	bb.Env = append(os.Environ(), "PGPASSWORD="+Password, "PGSSLMODE=disable")
	if out, err := bb.CombinedOutput(); err != nil {
		sb.Stop()
		return nil, fmt.Errorf("pg_basebackup from %s: %w\n%s", s.Addr(), err, out)
	}
	if err := sb.writeFile(filepath.Join(data, "standby.signal"), ""); err != nil {
		sb.Stop()
		return nil, err
	}
	conninfo := fmt.Sprintf("host=%s port=%d user=%s password=%s application_name=%s sslmode=disable",
		s.Host, s.Port, Superuser, Password, name)
	sb.settings = append(append(append([]string{}, s.settings...), "primary_conninfo="+conninfo, "hot_standby=on"), settings...)
	if err := sb.launch(ctx, data); err != nil {
		sb.Stop()
		return nil, fmt.Errorf("standby %s of %s: %w", name, s.Addr(), err)
	}
	return sb, nil
}

// StopProcesses freezes the server (SIGSTOP to the postmaster and every process it started,
// the WAL receiver and startup process of a standby among them); ContinueProcesses thaws it.
func (s *Server) StopProcesses() error { return s.signalAll(syscall.SIGSTOP) }

// ContinueProcesses undoes StopProcesses (SIGCONT to the same processes).
func (s *Server) ContinueProcesses() error { return s.signalAll(syscall.SIGCONT) }

func (s *Server) signalAll(sig syscall.Signal) error {
	if s.cmd == nil || s.cmd.Process == nil {
		return fmt.Errorf("server on %s is not running", s.Addr())
	}
	pids := []int{s.cmd.Process.Pid}
	// The postmaster's children, from /proc (PostgreSQL forks them; none forks further
	// but for parallel workers, which a standby's replay does not use).
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", s.cmd.Process.Pid, s.cmd.Process.Pid))
	if err != nil {
		return fmt.Errorf("children of postgres %d: %w", s.cmd.Process.Pid, err)
	}
	for _, f := range strings.Fields(string(b)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("signal %v to postgres process %d: %w", sig, pid, err)
		}
	}
	return nil
}
