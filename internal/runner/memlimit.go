package runner

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// cgroupRootEnv overrides the cgroup file system root (tests point it at a fake tree).
const cgroupRootEnv = "VACUUM_RUNNER_CGROUP_ROOT"

// noLimitV1 is the smallest cgroup v1 limit that means "unlimited" (the kernel writes
// PAGE_COUNTER_MAX pages, rounded to the page size: about 2^63).
const noLimitV1 = int64(1) << 62

// cgroupMemoryLimit returns the memory limit of this process's cgroup under root (cgroup v2
// memory.max, else v1 memory/memory.limit_in_bytes) and the file it came from; ok is false
// when no limit is set or no cgroup file system is visible. selfCgroup is the content of
// /proc/self/cgroup (may be empty).
func cgroupMemoryLimit(root, selfCgroup string) (limit int64, file string, ok bool, err error) {
	v2, v1 := "/", "/"
	sc := bufio.NewScanner(strings.NewReader(selfCgroup))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case slices.Contains(strings.Split(parts[1], ","), "memory"):
			v1 = parts[2]
		}
	}
	var candidates []string
	for _, dir := range []string{filepath.Join(root, v2), root} {
		candidates = append(candidates, filepath.Join(dir, "memory.max"))
	}
	for _, dir := range []string{filepath.Join(root, "memory", v1), filepath.Join(root, "memory")} {
		candidates = append(candidates, filepath.Join(dir, "memory.limit_in_bytes"))
	}
	for _, f := range candidates {
		b, rerr := os.ReadFile(f)
		if errors.Is(rerr, fs.ErrNotExist) {
			continue
		}
		if rerr != nil {
			return 0, f, false, fmt.Errorf("read cgroup memory limit: %w", rerr)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, f, false, nil
		}
		v, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || v < 0 {
			return 0, f, false, fmt.Errorf("cgroup memory limit in %s is %q, not a number", f, s)
		}
		if v >= noLimitV1 {
			return 0, f, false, nil
		}
		return v, f, true, nil
	}
	return 0, "", false, nil
}

// checkMemory refuses a run that would not fit under the cgroup memory limit.
func checkMemory(r runnerwire.Resolved) error {
	root := os.Getenv(cgroupRootEnv)
	self := ""
	if root == "" {
		root = "/sys/fs/cgroup"
		if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
			self = string(b)
		}
	}
	limit, file, ok, err := cgroupMemoryLimit(root, self)
	if err != nil || !ok {
		return err
	}
	if need := runnerwire.MemoryRequirement(r); need > limit {
		return &MemoryError{Need: need, Limit: limit, File: file}
	}
	return nil
}
