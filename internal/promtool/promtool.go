// Package promtool runs Prometheus's promtool (Debian's prometheus package) for tests: the
// naming and format lint of a metrics exposition (`promtool check metrics`) and alert unit
// tests (`promtool test rules`). When promtool is missing it is installed with apt-get if the
// process runs as root; otherwise the test fails saying how to install it.
package promtool

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// T is what the checks need of a test: testing.TB, or Ginkgo's GinkgoT().
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

var (
	once    sync.Once
	path    string
	findErr error
)

// Path returns promtool's path, installing Debian's prometheus package when it is missing
// and this process is root.
func Path() (string, error) {
	once.Do(func() {
		if p, err := exec.LookPath("promtool"); err == nil {
			path = p
			return
		}
		if os.Geteuid() != 0 {
			findErr = fmt.Errorf("promtool not found: install Debian's prometheus package (apt-get install prometheus, as root)")
			return
		}
		for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", "prometheus"}} {
			cmd := exec.Command("apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				findErr = fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
		path, findErr = exec.LookPath("promtool")
	})
	return path, findErr
}

// CheckMetrics fails t with promtool's findings when the exposition (Prometheus text
// format) breaks the naming guide or the format.
func CheckMetrics(t T, exposition []byte) {
	t.Helper()
	if out, err := CheckMetricsOutput(exposition); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// CheckMetricsOutput runs `promtool check metrics` on exposition and returns its output and
// an error when it found problems (or could not run).
func CheckMetricsOutput(exposition []byte) (string, error) {
	p, err := Path()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(p, "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRules runs `promtool test rules` on the unit-test files (each names its rule files).
func TestRules(t T, files ...string) {
	t.Helper()
	p, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p, append([]string{"test", "rules"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", strings.Join(files, " "), err, out)
	}
	t.Logf("promtool test rules:\n%s", out)
}

// CheckRules runs `promtool check rules` (syntax, PromQL, and lint) on rule files.
func CheckRules(t T, files ...string) {
	t.Helper()
	p, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(p, append([]string{"check", "rules"}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", strings.Join(files, " "), err, out)
	}
}

// ServerPath returns the Prometheus server's path (/usr/bin/prometheus of the same Debian
// package as promtool), installing the package when it is missing and this process is root.
func ServerPath() (string, error) {
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	if _, err := Path(); err != nil {
		return "", err
	}
	p, err := exec.LookPath("prometheus")
	if err != nil {
		return "", fmt.Errorf("prometheus server not found beside promtool: install Debian's prometheus package: %w", err)
	}
	return p, nil
}
