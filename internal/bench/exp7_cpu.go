package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// treeCPU is the CPU time (user + system) a PostgreSQL postmaster's process tree has used:
// the postmaster's own and its reaped children's (cutime, cstime), and every live child's
// (backends, WAL writer, checkpointer, ...) with theirs; backends is how many live children
// serve a client session. Backends fork from the postmaster and exit with their session,
// so a backend's time moves from its own line to the postmaster's cutime when it is reaped.
func treeCPU(pid int) (cpu time.Duration, backends int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, 0, fmt.Errorf("children of postgres %d: %w", pid, err)
	}
	for _, f := range strings.Fields(string(b)) {
		c, err := strconv.Atoi(f)
		if err != nil {
			return 0, 0, fmt.Errorf("children of postgres %d: %q: %w", pid, f, err)
		}
		t, err := statCPU(c)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // reaped since the list was read: its time is in the postmaster's cutime
			}
			return 0, 0, err
		}
		cpu += t
		// A backend's process title is "postgres: USER DB HOST(PORT) STATE"; the
		// background processes' ("postgres: checkpointer", ...) hold no parenthesis.
		if title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c)); err == nil && bytes.IndexByte(title, '(') >= 0 {
			backends++
		}
	}
	own, err := statCPU(pid)
	if err != nil {
		return 0, 0, err
	}
	return cpu + own, backends, nil
}

// statCPU is utime + stime + cutime + cstime of /proc/<pid>/stat.
func statCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of process %d: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime, stime, cutime, cstime are fields 14 to 17.
	if len(f) < 15 {
		return 0, fmt.Errorf("stat of process %d: %d fields after the command name", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:15] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat of process %d: times %q: %w", pid, f[11:15], err)
		}
		ticks += v
	}
	// USER_HZ is 100 on every Linux architecture Go supports.
	return time.Duration(ticks) * time.Second / 100, nil
}

// postgresCPU is a cpu meter for the PostgreSQL of postmaster pid. Before a sample it waits
// (up to 2 s) until the postmaster has reaped every backend, so that no backend exits
// between the reads of its time and of the postmaster's cutime (which would count it twice).
func postgresCPU(ctx context.Context, pid int) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		deadline := time.Now().Add(2 * time.Second)
		for {
			cpu, n, err := treeCPU(pid)
			if err != nil || n == 0 {
				return cpu, err
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("postgres %d still has %d backends 2 s after its clients left", pid, n)
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}
