package faultfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestInjectedErrorsFireAsConfigured(t *testing.T) {
	type step struct {
		do      func(t *testing.T, fs *FS, dir string) error
		wantErr error // nil = success
	}
	writeTo := func(name string, off int64) func(t *testing.T, fs *FS, dir string) error {
		return func(t *testing.T, fs *FS, dir string) error {
			f, err := fs.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			_, err = f.WriteAt([]byte("0123456789"), off)
			return err
		}
	}
	syncOf := func(name string) func(t *testing.T, fs *FS, dir string) error {
		return func(t *testing.T, fs *FS, dir string) error {
			f, err := fs.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			defer func() { _ = f.Close() }()
			return f.Sync()
		}
	}
	cases := []struct {
		name  string
		rule  Rule
		steps []step
		fired int
	}{
		{
			name: "ENOSPC on writes to one file, always",
			rule: Rule{Ops: OpWrite, Path: "base/", Fault: ENOSPC},
			steps: []step{
				{writeTo("wal", 0), nil},
				{writeTo("base/1", 0), syscall.ENOSPC},
				{writeTo("base/1", 0), syscall.ENOSPC},
			},
			fired: 2,
		},
		{
			name: "EIO once after two matching writes",
			rule: Rule{Ops: OpWrite, After: 2, Times: 1, Fault: EIO},
			steps: []step{
				{writeTo("a", 0), nil},
				{writeTo("a", 0), nil},
				{writeTo("a", 0), syscall.EIO},
				{writeTo("a", 0), nil},
			},
			fired: 1,
		},
		{
			name: "failed fsync",
			rule: Rule{Ops: OpSync, Path: "wal", Fault: EIO},
			steps: []step{
				{syncOf("data"), nil},
				{syncOf("wal"), syscall.EIO},
			},
			fired: 1,
		},
		{
			name: "extend-beyond-size only hits growing writes",
			rule: Rule{Ops: OpExtend, Fault: ENOSPC},
			steps: []step{
				{writeTo("a", 100), syscall.ENOSPC}, // file is empty: extends
				{func(t *testing.T, fs *FS, dir string) error {
					return os.WriteFile(filepath.Join(dir, "a"), make([]byte, 200), 0o644)
				}, nil},
				{writeTo("a", 100), nil}, // within size
				{writeTo("a", 195), syscall.ENOSPC},
			},
			fired: 2,
		},
		{
			name: "short write",
			rule: Rule{Ops: OpWrite, Fault: ShortWrite, ShortBytes: 3},
			steps: []step{
				{writeTo("a", 0), io.ErrShortWrite},
			},
			fired: 1,
		},
		{
			name: "create fails, open of existing file does not",
			rule: Rule{Ops: OpCreate, Fault: EIO},
			steps: []step{
				{func(t *testing.T, fs *FS, dir string) error {
					return os.WriteFile(filepath.Join(dir, "exists"), nil, 0o644)
				}, nil},
				{writeTo("exists", 0), nil},
				{writeTo("new", 0), syscall.EIO},
			},
			fired: 1,
		},
		{
			name: "rename and truncate",
			rule: Rule{Ops: OpRename | OpTruncate, Fault: EIO},
			steps: []step{
				{writeTo("a", 0), nil},
				{func(t *testing.T, fs *FS, dir string) error {
					return fs.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b"))
				}, syscall.EIO},
				{func(t *testing.T, fs *FS, dir string) error {
					f, err := fs.OpenFile(filepath.Join(dir, "a"), os.O_RDWR, 0)
					if err != nil {
						return err
					}
					defer func() { _ = f.Close() }()
					return f.Truncate(0)
				}, syscall.EIO},
			},
			fired: 2,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, dir := newFS(t)
			must(t, os.MkdirAll(filepath.Join(dir, "base"), 0o755))
			h := fs.Inject(c.rule)
			for i, s := range c.steps {
				err := s.do(t, fs, dir)
				if c := s.wantErr; (c == nil) != (err == nil) || (c != nil && !errors.Is(err, c)) {
					t.Fatalf("step %d: err = %v, want %v", i, err, s.wantErr)
				}
			}
			if h.Fired() != c.fired {
				t.Fatalf("rule fired %d times, want %d", h.Fired(), c.fired)
			}
		})
	}
}

func TestShortWriteWritesOnlyPartOfTheBuffer(t *testing.T) {
	fs, dir := newFS(t)
	name := filepath.Join(dir, "f")
	f := create(t, fs, name)
	fs.Inject(Rule{Ops: OpWrite, Fault: ShortWrite, Times: 1})
	n, err := f.WriteAt([]byte("abcdefgh"), 0)
	if n != 4 || !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("WriteAt = %d, %v; want 4, io.ErrShortWrite", n, err)
	}
	if got := string(onDisk(t, name)); got != "abcd" {
		t.Fatalf("on disk %q, want abcd", got)
	}
}

func TestFailedSyncLeavesDataNonDurable(t *testing.T) {
	fs, dir := newFS(t)
	name := filepath.Join(dir, "f")
	f := create(t, fs, name)
	must(t, fs.SyncDir(dir))
	write(t, f, []byte("durable"), 0)
	must(t, f.Sync())
	write(t, f, []byte("LOST!!!"), 0)
	fs.Inject(Rule{Ops: OpSync, Fault: EIO, Times: 1})
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync = %v, want EIO", err)
	}
	must(t, fs.PowerLoss(PowerLossOptions{}))
	if got := string(onDisk(t, name)); got != "durable" {
		t.Fatalf("on disk %q, want durable", got)
	}
}

func TestRemoveRuleStopsInjection(t *testing.T) {
	fs, dir := newFS(t)
	f := create(t, fs, filepath.Join(dir, "f"))
	h := fs.Inject(Rule{Ops: OpRead, Fault: EIO})
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read = %v, want EIO", err)
	}
	fs.RemoveRule(h)
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, io.EOF) {
		t.Fatalf("read after RemoveRule = %v, want EOF of an empty file", err)
	}
	if s := fs.Stats(); s.ByOp["read"] != 2 || s.ByOp["create"] != 1 || s.Mutating != 1 {
		t.Fatalf("stats %+v", s)
	}
}
