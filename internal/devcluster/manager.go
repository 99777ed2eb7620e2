package devcluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// childProcess is a process the dev cluster started (the manager, kube-controller-manager).
type childProcess struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startChild starts bin with args (and env added to ours) in a process group of its own, its
// output appended to logPath.
func startChild(name, bin string, args, env []string, logPath string) (*childProcess, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("devcluster: %s log: %w", name, err)
	}
	defer func() { _ = logFile.Close() }() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches us, and we stop it
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devcluster: start %s: %w", name, err)
	}
	p := &childProcess{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p, nil
}

// startManager starts BinDir/manager against the cluster's kubeconfig.
func startManager(c *Cluster, o Options) (*childProcess, error) {
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
	args := append([]string{
		"--metrics-bind-address=" + metrics,
		"--health-probe-bind-address=" + probes,
		"--namespace=" + ManagerNamespace,
		"--runner-image=" + RunnerImage,
	}, o.ManagerArgs...)
	return startChild("manager", bin, args, []string{"KUBECONFIG=" + c.Kubeconfig}, c.ManagerLog)
}

// stop sends SIGTERM, then SIGKILL to its process group after grace.
func (m *childProcess) stop(grace time.Duration) error {
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
		return fmt.Errorf("devcluster: %s ignored SIGTERM; killed", m.name)
	}
	return nil
}

// running reports whether the process has not ended.
func (m *childProcess) running() bool {
	if m == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// ManagerRunning reports whether the manager process is still running (false if none was started).
func (c *Cluster) ManagerRunning() bool { return c.manager.running() }

// ControllerManagerRunning reports whether kube-controller-manager is still running.
func (c *Cluster) ControllerManagerRunning() bool { return c.controllers.running() }

// freeLocalAddr is a 127.0.0.1 address with a port free right now.
func freeLocalAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("devcluster: find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}
