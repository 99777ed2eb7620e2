//go:build linux

package osthread

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// I/O priority values (linux/ioprio.h): the class in the top bits, the level in
// the low ones.
const (
	ioprioClassShift = 13
	ioprioClassBE    = 2 // best effort, levels 0 (highest) to 7 (lowest)
	ioprioWhoProcess = 1 // with a thread id: that thread
	ioprioLowestBE   = ioprioClassBE<<ioprioClassShift | 7
)

// Lower locks the calling goroutine to its OS thread, then adds p.Nice to
// that thread's nice value (capped at 19) or, with p.Idle, puts it in
// SCHED_IDLE, and sets its I/O priority to the lowest of the best-effort
// class. The caller must not unlock the thread: its goroutine's end ends the
// thread. The zero Priority does nothing. On an error the goroutine stays
// locked (so its thread, whatever it got, is not reused) and the error says
// which step failed.
func Lower(p Priority) error {
	if !p.Lowers() {
		return nil
	}
	if err := p.Validate(); err != nil {
		return err
	}
	runtime.LockOSThread()
	tid := unix.Gettid()
	if p.Idle {
		// An unprivileged thread may always move itself to SCHED_IDLE.
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
			return fmt.Errorf("put thread %d in SCHED_IDLE: %w", tid, err)
		}
	} else {
		// getpriority's raw syscall returns 20 - nice (so that it is never negative).
		cur, err := unix.Getpriority(unix.PRIO_PROCESS, tid)
		if err != nil {
			return fmt.Errorf("read the nice value of thread %d: %w", tid, err)
		}
		to := min(20-cur+p.Nice, 19)
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, to); err != nil {
			return fmt.Errorf("set the nice value of thread %d to %d: %w", tid, to, err)
		}
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, uintptr(tid), ioprioLowestBE); errno != 0 {
		return fmt.Errorf("set the I/O priority of thread %d: %w", tid, errno)
	}
	return nil
}

// Idle reports whether the calling goroutine's current OS thread runs in
// SCHED_IDLE. Lock the goroutine to its thread first for the answer to stay
// true.
func Idle() (bool, error) {
	attr, err := unix.SchedGetAttr(unix.Gettid(), 0)
	if err != nil {
		return false, fmt.Errorf("read the thread's scheduling policy: %w", err)
	}
	return attr.Policy == unix.SCHED_IDLE, nil
}

// Policies returns the scheduling policy of every thread of this process, by
// thread id, from /proc/self/task/TID/stat (field 41: 0 SCHED_NORMAL, 5
// SCHED_IDLE); a thread that ends while it is read is left out.
func Policies() (map[int]int, error) {
	return statField(41)
}

// Nice is the nice value of the calling goroutine's current OS thread (-20 to
// 19). Lock the goroutine to its thread first for the answer to stay true.
func Nice() (int, error) {
	cur, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		return 0, fmt.Errorf("read the thread's nice value: %w", err)
	}
	return 20 - cur, nil
}

// IOPriority is the I/O priority of the calling goroutine's current OS thread,
// as ioprio_get returns it (class << 13 | level; 0: none set, the thread
// follows its nice value).
func IOPriority() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_IOPRIO_GET, ioprioWhoProcess, uintptr(unix.Gettid()), 0)
	if errno != 0 {
		return 0, fmt.Errorf("read the thread's I/O priority: %w", errno)
	}
	return int(v), nil
}

// Nices returns the nice value of every thread of this process, by thread id, from
// /proc/self/task/TID/stat (field 19); a thread that ends while it is read is left out.
func Nices() (map[int]int, error) {
	return statField(19)
}

// statField returns field n (numbered from 1, as proc(5) numbers them, n at least 3) of
// /proc/self/task/TID/stat of every thread of this process, by thread id.
func statField(n int) (map[int]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list this process's threads: %w", err)
	}
	out := make(map[int]int, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/stat")
		if err != nil {
			continue // the thread ended meanwhile
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 > len(s) {
			return nil, fmt.Errorf("thread %d: stat %q has no command name", tid, s)
		}
		f := strings.Fields(s[i+2:]) // fields from 3 on
		if len(f) <= n-3 {
			return nil, fmt.Errorf("thread %d: stat has %d fields, want at least %d", tid, len(f)+2, n)
		}
		if out[tid], err = strconv.Atoi(f[n-3]); err != nil {
			return nil, fmt.Errorf("thread %d: stat field %d %q: %w", tid, n, f[n-3], err)
		}
	}
	return out, nil
}
