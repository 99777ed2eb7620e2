package runner

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadSpec feeds arbitrary bytes to the --spec-file decoder and the resolver: they must
// return a RunSpec or a usage error, never panic.
func FuzzReadSpec(f *testing.F) {
	for _, s := range []string{`{}`, `{"dataDir":"/data","mode":"full","throttle":{"costDelay":"2ms","maxReadBytesPerSecond":"50Mi"}}`,
		`{"tableOverrides":[{"table":"a","throttle":{"costLimit":1}}]}`, `[1,2]`, `{"ringSize":"1e400"}`, "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "spec.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := readSpec("", path)
		if err != nil {
			return
		}
		_, _ = resolveSpec(s, false)
	})
}

// FuzzCgroupMemoryLimit feeds arbitrary /proc/self/cgroup contents and memory.max files.
func FuzzCgroupMemoryLimit(f *testing.F) {
	f.Add("0::/\n", "max\n")
	f.Add("4:memory:/a/b\n0::/x\n", "1073741824")
	f.Add("::::\n0::../../..\n", "-1")
	f.Fuzz(func(t *testing.T, self, limit string) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte(limit), 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, _, _ = cgroupMemoryLimit(root, self)
	})
}
