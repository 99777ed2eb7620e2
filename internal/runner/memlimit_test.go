package runner

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupMemoryLimitReadsV2ThenV1AndTreatsMaxAsNoLimit(t *testing.T) {
	cases := []struct {
		name      string
		files     map[string]string // relative to the cgroup root
		self      string            // /proc/self/cgroup
		wantLimit int64
		wantOK    bool
		wantFile  string
		wantErr   bool
	}{
		{name: "no cgroup file system", files: nil},
		{name: "v2 limit at the root", files: map[string]string{"memory.max": "536870912\n"},
			wantLimit: 512 << 20, wantOK: true, wantFile: "memory.max"},
		{name: "v2 max means no limit", files: map[string]string{"memory.max": "max\n"}},
		{name: "v2 limit of our own cgroup wins", self: "0::/kubepods/pod1/c1\n",
			files:     map[string]string{"kubepods/pod1/c1/memory.max": "268435456", "memory.max": "max"},
			wantLimit: 256 << 20, wantOK: true, wantFile: "kubepods/pod1/c1/memory.max"},
		{name: "v1 limit", files: map[string]string{"memory/memory.limit_in_bytes": "1073741824\n"},
			wantLimit: 1 << 30, wantOK: true, wantFile: "memory/memory.limit_in_bytes"},
		{name: "v1 unlimited is a huge number", files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}},
		{name: "v1 own cgroup", self: "4:memory:/pod/c\n0::/\n",
			files:     map[string]string{"memory/pod/c/memory.limit_in_bytes": "2097152", "memory/memory.limit_in_bytes": "9223372036854771712"},
			wantLimit: 2 << 20, wantOK: true, wantFile: "memory/pod/c/memory.limit_in_bytes"},
		{name: "garbage is an error", files: map[string]string{"memory.max": "lots"}, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for rel, content := range c.files {
				p := filepath.Join(root, rel)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			limit, file, ok, err := cgroupMemoryLimit(root, c.self)
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if limit != c.wantLimit || ok != c.wantOK {
				t.Errorf("limit %d ok %v, want %d %v", limit, ok, c.wantLimit, c.wantOK)
			}
			if c.wantFile != "" && file != filepath.Join(root, c.wantFile) {
				t.Errorf("file %s, want %s", file, c.wantFile)
			}
		})
	}
}
