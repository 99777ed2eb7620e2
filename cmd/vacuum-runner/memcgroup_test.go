package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// memCgroupRoot is the cgroup v1 memory hierarchy; a pod's memory limit is a cgroup there
// (or in the v2 hierarchy), which is what OOM-kills a runner that needs more.
const memCgroupRoot = "/sys/fs/cgroup/memory"

// memCgroup is a memory cgroup with a hard limit, made for one child process.
type memCgroup struct{ dir string }

// newMemCgroup makes a memory cgroup limited to limit bytes (swap included), or returns
// nil and the reason when this machine gives the test none (not root, no v1 memory
// controller); the caller then runs under GOMEMLIMIT alone and says so.
func newMemCgroup(t *testing.T, limit int64) (*memCgroup, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, "not root"
	}
	if _, err := os.Stat(filepath.Join(memCgroupRoot, "memory.limit_in_bytes")); err != nil {
		return nil, fmt.Sprintf("no cgroup v1 memory controller: %v", err)
	}
	dir := filepath.Join(memCgroupRoot, fmt.Sprintf("vacuum-runner-test-%d-%s", os.Getpid(), strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Sprintf("make a memory cgroup: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	cg := &memCgroup{dir: dir}
	v := strconv.FormatInt(limit, 10)
	if err := cg.write("memory.limit_in_bytes", v); err != nil {
		return nil, err.Error()
	}
	// memsw exists only with swap accounting; where it does, swap must not let the child
	// outgrow the limit either.
	if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
		if err := cg.write("memory.memsw.limit_in_bytes", v); err != nil {
			return nil, err.Error()
		}
	}
	return cg, ""
}

func (cg *memCgroup) write(file, value string) error {
	if err := os.WriteFile(filepath.Join(cg.dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("write %s of %s: %w", file, cg.dir, err)
	}
	return nil
}

// wrap returns a command that joins the cgroup before it becomes name args (the shell
// writes its own pid into cgroup.procs, then execs, so the child never runs outside it).
func (cg *memCgroup) wrap(cmd *exec.Cmd) {
	argv := append([]string{"-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(cg.dir, "cgroup.procs")}, cmd.Args...)
	cmd.Path, cmd.Args = "/bin/sh", append([]string{"/bin/sh"}, argv...)
}

// oomKills is how many processes of the cgroup the kernel's OOM killer killed, and
// failcnt how often the limit was hit.
func (cg *memCgroup) oomKills(t *testing.T) (kills, failcnt int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cg.dir, "memory.oom_control"))
	if err != nil {
		t.Fatalf("read memory.oom_control: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "oom_kill" {
			kills, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	b, err = os.ReadFile(filepath.Join(cg.dir, "memory.failcnt"))
	if err != nil {
		t.Fatalf("read memory.failcnt: %v", err)
	}
	failcnt, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return kills, failcnt
}
