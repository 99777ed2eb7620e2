package devcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// managerProcess is the manager running as a child process.
type managerProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startManager starts BinDir/manager against the cluster's kubeconfig.
func startManager(c *Cluster, o Options) (*managerProcess, error) {
	bin := filepath.Join(o.BinDir, "manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("devcluster: no manager binary (build it with make build, or set Build): %w", err)
	}
	metrics, err := freeLocalAddr()
	if err != nil {
		return nil, err
	}
	probes, err := freeLocalAddr()
	if err != nil {
		return nil, err
	}
	c.ManagerLog = filepath.Join(c.StateDir, "logs", "manager.log")
	logFile, err := os.OpenFile(c.ManagerLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devcluster: manager log: %w", err)
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	args := append([]string{
		"--metrics-bind-address=" + metrics,
		"--health-probe-bind-address=" + probes,
		"--namespace=" + ManagerNamespace,
		"--runner-image=" + RunnerImage,
	}, o.ManagerArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches us, and we stop it
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devcluster: start manager: %w", err)
	}
	m := &managerProcess{cmd: cmd, done: make(chan struct{})}
	go func() { m.err = cmd.Wait(); close(m.done) }()
	return m, nil
}

// stop sends SIGTERM, then SIGKILL after grace.
func (m *managerProcess) stop(grace time.Duration) error {
	select {
	case <-m.done:
		return nil // ended already; its log says why
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(grace):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
		return errors.New("devcluster: manager ignored SIGTERM; killed")
	}
	return nil
}

// ManagerRunning reports whether the manager process is still running (false if none was started).
func (c *Cluster) ManagerRunning() bool {
	if c.manager == nil {
		return false
	}
	select {
	case <-c.manager.done:
		return false
	default:
		return true
	}
}

// freeLocalAddr is a 127.0.0.1 address with a port free right now.
func freeLocalAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("devcluster: find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
