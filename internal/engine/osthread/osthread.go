// Package osthread lowers the scheduling priority of the OS thread a goroutine
// runs on, for background work (a VACUUM) that should yield the CPU and the
// disk to the foreground's threads when both want them.
//
// Lower locks the calling goroutine to its thread (runtime.LockOSThread) and
// raises that thread's nice value and lowers its I/O priority, or puts it in
// the kernel's SCHED_IDLE policy (Priority). The goroutine
// must then end without calling runtime.UnlockOSThread: Go ends a thread
// whose locked goroutine exits, so the lowered thread never runs another
// goroutine. Go creates new threads from a locked thread through its template
// thread, so threads started while a lowered goroutine runs do not inherit
// its priority. Only Linux sets a thread's priority apart from its process's
// (setpriority(PRIO_PROCESS, tid) and ioprio_set(IOPRIO_WHO_PROCESS, tid));
// elsewhere Lower leaves the thread alone and returns ErrUnsupported.
package osthread

import (
	"errors"
	"fmt"
)

// ErrUnsupported is returned by Lower where threads have no priority of their
// own (every system but Linux).
var ErrUnsupported = errors.New("per-thread priority is not supported on this system")

// MaxNice is the largest nice increment Lower takes: Linux's nice range is
// -20 to 19.
const MaxNice = 39

// Priority is how far Lower lowers a thread. The zero value leaves it alone.
type Priority struct {
	// Nice is the nice steps added to the thread's nice value (0 to
	// MaxNice; the result is capped at 19). Linux weighs a thread at nice
	// n+5 about a third of one at n when both want a core, but a thread
	// that wakes up does not always take the core from a lowered one at
	// once.
	Nice int
	// Idle puts the thread in the SCHED_IDLE policy: it runs only on a
	// core no other thread of the machine wants (a waking thread of any
	// other policy takes the core from it at once), with a share of a core
	// below nice 19's when all want them. Nice is then moot.
	Idle bool
}

// Lowers reports whether p changes a thread at all.
func (p Priority) Lowers() bool { return p.Nice != 0 || p.Idle }

// Validate reports a Nice outside 0 to MaxNice.
func (p Priority) Validate() error {
	if p.Nice < 0 || p.Nice > MaxNice {
		return fmt.Errorf("nice increment %d is outside 0 to %d", p.Nice, MaxNice)
	}
	return nil
}

// String names p as a log line would: "SCHED_IDLE", "nice +5", "unchanged".
func (p Priority) String() string {
	switch {
	case p.Idle:
		return "SCHED_IDLE"
	case p.Nice != 0:
		return fmt.Sprintf("nice +%d", p.Nice)
	}
	return "unchanged"
}
