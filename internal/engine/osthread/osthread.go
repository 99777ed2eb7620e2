// Package osthread lowers the scheduling priority of the OS thread a goroutine
// runs on, for background work (a VACUUM) that should yield the CPU and the
// disk to the foreground's threads when both want them.
//
// Lower locks the calling goroutine to its thread (runtime.LockOSThread) and
// raises that thread's nice value and lowers its I/O priority. The goroutine
// must then end without calling runtime.UnlockOSThread: Go ends a thread
// whose locked goroutine exits, so the lowered thread never runs another
// goroutine. Go creates new threads from a locked thread through its template
// thread, so threads started while a lowered goroutine runs do not inherit
// its priority. Only Linux sets a thread's priority apart from its process's
// (setpriority(PRIO_PROCESS, tid) and ioprio_set(IOPRIO_WHO_PROCESS, tid));
// elsewhere Lower leaves the thread alone and returns ErrUnsupported.
package osthread

import "errors"

// ErrUnsupported is returned by Lower where threads have no priority of their
// own (every system but Linux).
var ErrUnsupported = errors.New("per-thread priority is not supported on this system")

// MaxNice is the largest nice increment Lower takes: Linux's nice range is
// -20 to 19.
const MaxNice = 39
