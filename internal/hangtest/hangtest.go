// Package hangtest ends a test that deadlocks at once, with the stack of every
// goroutine, instead of at the test binary's timeout.
package hangtest

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// Wait waits up to d for ch and fails t on the error it delivers. After d it
// panics with every goroutine's stack, so that the stacks that show the deadlock
// end the run. It panics on a goroutine of its own: a panic of the test's
// goroutine would run the test's cleanups first, and a deadlock holds a cleanup's
// Close too, so the run would wait for the binary's timeout after all.
func Wait(t testing.TB, what string, ch <-chan error, d time.Duration) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		msg := fmt.Sprintf("%s still waits after %v: deadlocked\n\n%s", what, d, buf)
		go func() { panic(msg) }()
		select {} // the panic ends the process
	}
}
