//go:build !linux

package osthread

// Lower leaves the thread alone on this system: the zero Priority returns
// nil, any other ErrUnsupported (the goroutine is not locked to its thread).
func Lower(p Priority) error {
	if !p.Lowers() {
		return nil
	}
	if err := p.Validate(); err != nil {
		return err
	}
	return ErrUnsupported
}

// Idle returns ErrUnsupported on this system.
func Idle() (bool, error) { return false, ErrUnsupported }

// Policies returns ErrUnsupported on this system.
func Policies() (map[int]int, error) { return nil, ErrUnsupported }

// Nice returns ErrUnsupported on this system.
func Nice() (int, error) { return 0, ErrUnsupported }

// IOPriority returns ErrUnsupported on this system.
func IOPriority() (int, error) { return 0, ErrUnsupported }

// Nices returns ErrUnsupported on this system.
func Nices() (map[int]int, error) { return nil, ErrUnsupported }
