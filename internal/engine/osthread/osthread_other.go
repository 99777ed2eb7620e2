//go:build !linux

package osthread

import "fmt"

// Lower leaves the thread alone on this system: nice 0 returns nil, any other
// value ErrUnsupported (the goroutine is not locked to its thread).
func Lower(nice int) error {
	if nice == 0 {
		return nil
	}
	if nice < 0 || nice > MaxNice {
		return fmt.Errorf("nice increment %d is outside 0 to %d", nice, MaxNice)
	}
	return ErrUnsupported
}

// Nice returns ErrUnsupported on this system.
func Nice() (int, error) { return 0, ErrUnsupported }

// IOPriority returns ErrUnsupported on this system.
func IOPriority() (int, error) { return 0, ErrUnsupported }

// Nices returns ErrUnsupported on this system.
func Nices() (map[int]int, error) { return nil, ErrUnsupported }
