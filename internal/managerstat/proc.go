package managerstat

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Proc is a process's kernel accounting at one moment.
type Proc struct {
	CPU      time.Duration // utime + stime
	RSSBytes int64         // VmRSS
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every Linux
// architecture Go supports (the kernel fixes it for user space whatever its own HZ).
const clockTicks = 100

// ReadProc reads /proc/<pid>/stat (utime, stime) and /proc/<pid>/status (VmRSS).
func ReadProc(pid int) (Proc, error) {
	var p Proc
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, fmt.Errorf("read stat of process %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields count from
	// the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return p, fmt.Errorf("stat of process %d: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return p, fmt.Errorf("stat of process %d: %d fields after the command name", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return p, fmt.Errorf("stat of process %d: utime %q, stime %q", pid, f[11], f[12])
	}
	p.CPU = time.Duration(ut+st) * time.Second / clockTicks
	st2, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, fmt.Errorf("read status of process %d: %w", pid, err)
	}
	defer func() { _ = st2.Close() }()
	sc := bufio.NewScanner(st2)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb := strings.Fields(rest)
		if len(kb) != 2 || kb[1] != "kB" {
			return p, fmt.Errorf("status of process %d: VmRSS %q", pid, rest)
		}
		v, err := strconv.ParseInt(kb[0], 10, 64)
		if err != nil {
			return p, fmt.Errorf("status of process %d: VmRSS %q: %w", pid, rest, err)
		}
		p.RSSBytes = v << 10
		return p, nil
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("status of process %d: %w", pid, err)
	}
	return p, fmt.Errorf("status of process %d: no VmRSS (a zombie?)", pid)
}
