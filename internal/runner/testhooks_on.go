//go:build testhooks

package runner

import "os"

// testPanic panics when the environment variable VACUUM_RUNNER_TEST_PANIC names point. It
// exists only in binaries built with -tags testhooks (the tests of cmd/vacuum-runner).
func testPanic(point string) {
	if os.Getenv("VACUUM_RUNNER_TEST_PANIC") == point {
		panic("test panic at " + point)
	}
}
