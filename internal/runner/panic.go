package runner

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/vacuumops/vacuum-operator/internal/engine/vacuum"
)

// PanicError is a panic recovered in the runner: an internal error (exit 1, retried),
// never bad input, whatever its message says.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("internal error: panic: %v", e.Value) }

// recovered turns a recovered panic value into an error (nil for none).
func recovered(v any) error {
	if v == nil {
		return nil
	}
	return &PanicError{Value: v, Stack: debug.Stack()}
}

// isPanic reports whether err is a recovered panic of the runner or of a vacuum worker.
func isPanic(err error) bool {
	var pe *PanicError
	var vpe *vacuum.PanicError
	return errors.As(err, &pe) || errors.As(err, &vpe)
}
