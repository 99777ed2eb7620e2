package localnode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxTerminationMessage is the kubelet's limit on a termination message.
const maxTerminationMessage = 4096

// podProcess is one pod's running (or ended) process.
type podProcess struct {
	uid       types.UID
	key       types.NamespacedName
	ip        string
	termPath  string
	cmd       *exec.Cmd
	startedAt metav1.Time
	done      chan struct{} // closed once the process has ended and result is set

	// limits are the pod's emptyDir volumes with a sizeLimit, watched while it runs.
	limits []volumeLimit
	// restartPolicy is the pod's; restarts what this container carries over from earlier ones.
	restartPolicy corev1.RestartPolicy
	restarts      restartState
	// abandoned is closed when the pod is deleted or force-deleted: no restart then.
	abandoned   chan struct{}
	abandonOnce sync.Once

	mu         sync.Mutex
	termSent   bool
	restarting bool   // ended, and to be started again (set when it ends)
	evicted    string // why the node evicted the pod ("" unless it did)
	result     exitResult
	reported   bool // the terminal status has been written
}

// exitResult is how a process ended.
type exitResult struct {
	exitCode   int32
	signal     string // "" unless killed by a signal
	finishedAt metav1.Time
	message    string // termination message, at most maxTerminationMessage bytes
	evicted    string // the eviction message when the node evicted the pod
	// containerID names the container in a terminated state (the pod's UID, and for a
	// restarted one its restart count): filled in when the state is written.
	containerID string
}

// startProcess starts l as a new process group, its output appended to logPath.
func startProcess(l *launch, logPath string) (*exec.Cmd, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", logPath, err)
	}
	cmd := exec.Command(l.path, l.args...)
	cmd.Env = l.env
	cmd.Dir = l.workDir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C on the dev cluster's terminal does not reach the pods
	// directly (the node stops them), and SIGKILL reaches the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", l.path, err)
	}
	_ = logFile.Close() // the child holds its own descriptor
	if err := os.WriteFile(filepath.Join(l.dir, "pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600); err != nil {
		return cmd, fmt.Errorf("write pid file: %w", err)
	}
	return cmd, nil
}

// wait blocks until the process ends, then records its result.
func (p *podProcess) wait() {
	err := p.cmd.Wait()
	res := exitResult{finishedAt: metav1.Now()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.exitCode = 128 + int32(ws.Signal())
			res.signal = ws.Signal().String()
		} else {
			res.exitCode = int32(ee.ExitCode())
		}
	default:
		res.exitCode = 128
		res.message = err.Error()
	}
	if msg, err := readTermination(p.termPath); err == nil && msg != "" {
		res.message = msg
	}
	p.mu.Lock()
	res.evicted = p.evicted
	p.result = res
	p.restarting = res.evicted == "" && !p.termSent && !p.isAbandoned() && restartsAfter(p.restartPolicy, res.exitCode)
	p.mu.Unlock()
	close(p.done)
}

// restartsAfter reports whether a container that exited with code is restarted under the
// pod's restart policy, as a kubelet decides it.
func restartsAfter(policy corev1.RestartPolicy, code int32) bool {
	switch policy {
	case corev1.RestartPolicyAlways:
		return true
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return false
}

// isRestarting reports whether the ended process is to be started again (its pod's end is
// then not reported).
func (p *podProcess) isRestarting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarting
}

// abandon gives up any restart of the process (its pod is being deleted).
func (p *podProcess) abandon() { p.abandonOnce.Do(func() { close(p.abandoned) }) }

// isAbandoned reports whether abandon was called.
func (p *podProcess) isAbandoned() bool {
	select {
	case <-p.abandoned:
		return true
	default:
		return false
	}
}

// readTermination reads at most maxTerminationMessage bytes of the termination message.
func readTermination(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, maxTerminationMessage))
	return string(b), err
}

// isReported reports whether the process's end has been written to the pod's status.
func (p *podProcess) isReported() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reported
}

// exited reports whether the process has ended.
func (p *podProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// terminate sends SIGTERM to the process group once, and SIGKILL after grace if it is still
// running then.
func (p *podProcess) terminate(grace time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.termSent || p.exited() {
		return
	}
	p.termSent = true
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	go func() {
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}()
}
