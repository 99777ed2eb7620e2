package engine

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const childOpenEnv = "ENGINE_TEST_CHILD_OPEN"

// TestMain lets the test binary act as a second process for the lock and
// crash tests.
func TestMain(m *testing.M) {
	if dir := os.Getenv(childOpenEnv); dir != "" {
		childOpen(dir)
		return
	}
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

// childOpen tries to open dir and prints the outcome.
func childOpen(dir string) {
	db, err := Open(dir, Options{})
	switch {
	case errors.Is(err, ErrInUse):
		_, _ = os.Stdout.WriteString("in use: " + err.Error() + "\n")
		os.Exit(3)
	case err != nil:
		_, _ = os.Stdout.WriteString("error: " + err.Error() + "\n")
		os.Exit(1)
	}
	if err := db.Close(); err != nil {
		_, _ = os.Stdout.WriteString("close: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}

func TestSecondOpenInThisProcessFailsWithErrInUse(t *testing.T) {
	db, dir := newDB(t, testOpts())
	_ = db
	start := time.Now()
	opts := testOpts()
	opts.LockTimeout = 200 * time.Millisecond
	_, err := Open(dir, opts)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open: %v, want ErrInUse", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("error %q does not name the directory", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Fatalf("gave up after %v, before the lock timeout", waited)
	}
}

func TestOpenInAnotherProcessFailsWithErrInUseUntilClose(t *testing.T) {
	db, dir := newDB(t, testOpts())
	run := func() (int, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childOpenEnv+"="+dir)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(); code != 3 {
		t.Fatalf("child open while held: exit %d, output %q; want ErrInUse", code, out)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out := run(); code != 0 {
		t.Fatalf("child open after Close: exit %d, output %q", code, out)
	}
}

func TestOpenWaitsForTheLockWithinTimeout(t *testing.T) {
	db, dir := newDB(t, testOpts())
	go func() {
		time.Sleep(150 * time.Millisecond)
		closeDB(t, db)
	}()
	opts := testOpts()
	opts.LockTimeout = 5 * time.Second
	db2, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open with a timeout longer than the holder: %v", err)
	}
	closeDB(t, db2)
}
