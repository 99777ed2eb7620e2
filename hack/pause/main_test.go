//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPauseRunsUntilSIGTERMThenExitsZero(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("pause exited on its own: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("want exit 0 on SIGTERM, got %v", err)
		}
	case <-time.After(2 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause did not exit within 2 s of SIGTERM")
	}
}

func TestReapChildrenCollectsExitedChildren(t *testing.T) {
	// A child of this test process stands in for an orphan re-parented to a pod's PID 1.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	proc := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid))
	deadline := time.Now().Add(2 * time.Second)
	for !isZombie(t, proc) {
		if time.Now().After(deadline) {
			t.Fatal("the child did not exit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	reapChildren()
	if _, err := os.Stat(proc); !os.IsNotExist(err) {
		t.Errorf("%s still exists after reapChildren (err %v): the zombie was not reaped", proc, err)
	}
}

// isZombie reports whether the process of /proc/PID is in state Z.
func isZombie(t *testing.T, proc string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && len(b) > i+2 && b[i+2] == 'Z'
}
