package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// These tests build vacuum-runner once and run it as a user (or a pod) would: exec, real
// files, real signals, real HTTP.

var (
	binary  string // the built vacuum-runner
	fixture string // a bloated data directory, copied by each test that needs one
)

// Fixture shape: fixtureRows rows with 2 indexes; 20% deleted, 10% of the rest updated.
const (
	fixtureRows    = 30000
	fixtureDeleted = 6000
	fixtureUpdated = 2400
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	defer stopPostgres()
	dir, err := os.MkdirTemp("", "vacuum-runner-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }() // best effort: a temporary directory
	binary = filepath.Join(dir, "vacuum-runner")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build vacuum-runner: %v\n%s", err, out)
		return 1
	}
	fixture = filepath.Join(dir, "fixture")
	for _, args := range [][]string{
		{"init", "--data", fixture},
		{"bloat", "--data", fixture, "--table", "items", "--rows", strconv.Itoa(fixtureRows), "--indexes", "2",
			"--dead-fraction", "0.2", "--update-fraction", "0.1", "--seed", "7"},
	} {
		if out, err := exec.Command(binary, args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "vacuum-runner %v: %v\n%s", args, err, out)
			return 1
		}
	}
	return m.Run()
}

// result is one finished vacuum-runner process.
type result struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// vr runs vacuum-runner with args (and extra environment variables) to completion.
func vr(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("vacuum-runner %v: %v", args, err)
	}
	return r
}

// mustVR runs vacuum-runner and fails the test unless it exits 0.
func mustVR(t *testing.T, args ...string) result {
	t.Helper()
	r := vr(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("vacuum-runner %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// decode parses JSON output strictly into v.
func decode(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode %T from %q: %v", v, s, err)
	}
}

// copyFixture copies the bloated fixture into a fresh directory.
func copyFixture(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "data")
	err := filepath.WalkDir(fixture, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fixture, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = src.Close() }() // read only
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, src); err != nil {
			return errors.Join(err, out.Close())
		}
		return out.Close()
	})
	if err != nil {
		t.Fatalf("copy fixture: %v", err)
	}
	return dst
}

// freeAddr returns a 127.0.0.1 address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// proc is a vacuum-runner running in the background.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// start starts vacuum-runner in the background; the test kills it if it is still running
// at the end.
func start(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill() // it may have exited meanwhile
			<-p.done
		}
	})
	return p
}

// wait waits up to d for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("vacuum-runner still running after %v\nstderr: %s", d, p.stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

// getJSON GETs url into v, retrying while the server is not up yet.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
			}
			decode(t, string(b), v)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getText GETs url and returns the body.
func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(b)
}

// put sends a PUT with body and an optional Authorization header; it returns the status and body.
func put(t *testing.T, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
