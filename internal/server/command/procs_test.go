package command

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestServeProcsRaisesGoProcessorsOnlyWhereNobodyChoseThem(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		flag                 int
		env                  string
		current, cores, want int
	}{
		{"two cores, Go's default", 0, "", 2, 2, minServeProcs},
		{"sixteen cores, Go's default", 0, "", 16, 16, 16},
		{"the flag wins over everything", 3, "5", 1, 2, 3},
		{"a GOMAXPROCS variable is kept", 0, "2", 2, 2, 2},
		{"a container's CPU limit is kept", 0, "", 1, 8, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := serveProcs(tc.flag, tc.env, tc.current, tc.cores); got != tc.want {
				t.Fatalf("serveProcs(%d, %q, %d, %d) = %d, want %d", tc.flag, tc.env, tc.current, tc.cores, got, tc.want)
			}
		})
	}
}

// TestServeRunsOnTheProcessorsItIsGivenAndRestoresThem: serve --gomaxprocs sets Go's
// processors while it serves, says so in its log, and an in-process server leaves the
// process's setting as it found it.
func TestServeRunsOnTheProcessorsItIsGivenAndRestoresThem(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	want := before + 3
	addr := freeAddr(t)
	logs, stop := goServe(t, "serve", "--init", "--data", t.TempDir()+"/data", "--auth", "trust", "--listen", addr,
		"--buffer-pool", "4Mi", "--gomaxprocs", strconv.Itoa(want))
	c := connect(t, addr, logs)
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Errorf("GOMAXPROCS %d while serving, want %d", got, want)
	}
	_ = c.Close(context.Background())
	if code := stop(); code != ExitOK {
		t.Fatalf("serve exited %d\n%s", code, logs.String())
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS %d after serve returned, want %d as before", got, before)
	}
	if !strings.Contains(logs.String(), "GOMAXPROCS "+strconv.Itoa(want)) {
		t.Errorf("the log does not say the processors it runs on:\n%s", logs.String())
	}
}

// TestTwoInProcessServersShareTheProcessorsUntilTheLastReturns: the first server to stop
// does not take the second one's processors away, and the second one's rule starts from
// Go's own choice, not from the first one's raise.
func TestTwoInProcessServersShareTheProcessorsUntilTheLastReturns(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	want := before + 3
	start := func() func() int {
		addr := freeAddr(t)
		logs, stop := goServe(t, "serve", "--init", "--data", t.TempDir()+"/data", "--auth", "trust", "--listen", addr,
			"--buffer-pool", "4Mi", "--gomaxprocs", strconv.Itoa(want))
		_ = connect(t, addr, logs).Close(context.Background())
		return stop
	}
	stopFirst, stopSecond := start(), start()
	if code := stopFirst(); code != ExitOK {
		t.Fatalf("the first server exited %d", code)
	}
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Errorf("GOMAXPROCS %d after the first of two servers returned, want %d while the second serves", got, want)
	}
	if code := stopSecond(); code != ExitOK {
		t.Fatalf("the second server exited %d", code)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS %d after both servers returned, want %d as before", got, before)
	}
}
