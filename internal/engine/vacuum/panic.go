package vacuum

import (
	"fmt"
	"runtime/debug"
)

// PanicError is a panic recovered in one of a vacuum's worker goroutines,
// returned as the vacuum's error so that the caller (the runner) reports an
// internal error instead of the process dying with Go's exit status 2.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("internal error: panic in a vacuum worker: %v", e.Value)
}

// recoverInto stores a recovered panic in *err; use as `defer recoverInto(&err)`.
func recoverInto(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v, Stack: debug.Stack()}
	}
}
