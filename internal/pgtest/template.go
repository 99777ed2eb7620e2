package pgtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Template starts servers from one initdb: the first Start initialises a data directory in a
// temporary directory of its own, and every Start copies it (cp -a, owner and modes kept)
// where Start would run initdb, which is most of a server's start (about 0.6 of 1 s on the
// project's 2-core machine, against some 0.1 s for the copy). For a caller that starts many
// servers, such as the benchmark, which calls Close when done.
type Template struct {
	mu   sync.Mutex
	dir  string // the temporary directory, "" until the first Start
	data string // the initialised data directory in it
}

// Start is the package's Start, with the data directory copied from the template.
func (t *Template) Start(ctx context.Context, settings ...string) (*Server, error) {
	return start(ctx, t, settings)
}

// Close removes the template's directory; servers started from it keep their own copies.
func (t *Template) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	dir := t.dir
	t.dir, t.data = "", ""
	if dir == "" {
		return nil
	}
	return os.RemoveAll(dir)
}

// copyTo copies the template's data directory to data, initialising it first if need be.
func (t *Template) copyTo(ctx context.Context, data string) error {
	src, err := t.ensure(ctx)
	if err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "cp", "-a", src, data).CombinedOutput(); err != nil {
		return fmt.Errorf("copy the template data directory %s: %w\n%s", src, err, out)
	}
	return nil
}

// ensure initialises the template's data directory once and returns it.
func (t *Template) ensure(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.data != "" {
		return t.data, nil
	}
	dir, err := os.MkdirTemp("", "pgtest-template-")
	if err != nil {
		return "", err
	}
	s := &Server{dir: dir}
	data := filepath.Join(dir, "data")
	err = s.runAsNobody()
	if err == nil {
		err = s.initdb(ctx, data)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	t.dir, t.data = dir, data
	return data, nil
}
