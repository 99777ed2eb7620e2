package bench

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Machine describes the host, read at run time so the report never
// states what it did not measure.
type Machine struct {
	Cores      int
	MemoryMiB  int64
	Kernel     string
	CPUModel   string
	FS         string // file system type of the work directory's mount
	Mount      string // that mount point
	Device     string
	GoVersion  string
	LoadStart  string // /proc/loadavg at the start
	LoadEnd    string // and at the end
	DirectAsk  bool   // O_DIRECT requested
	DirectUsed bool   // every relation file of the measured runs was opened with O_DIRECT
}

// ReadMachine reads the facts about the host and the file system of dir.
func ReadMachine(dir string) Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: LoadAvg()}
	m.Kernel = strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))
	if v, ok := procField("/proc/meminfo", "MemTotal:"); ok {
		if kb, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64); err == nil {
			m.MemoryMiB = kb >> 10
		}
	}
	if v, ok := procField("/proc/cpuinfo", "model name"); ok {
		m.CPUModel = strings.TrimSpace(strings.TrimPrefix(v, ":"))
	}
	m.Device, m.Mount, m.FS = mountOf(dir)
	return m
}

// LoadAvg is the first three fields of /proc/loadavg ("?" when unreadable).
func LoadAvg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func readFile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return string(b)
}

// procField returns the rest of the first line of file p starting with key.
func procField(p, key string) (string, bool) {
	f, err := os.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, key) {
			return strings.TrimSpace(strings.TrimPrefix(line, key)), true
		}
	}
	return "", false
}

// mountOf finds the mount holding dir in /proc/mounts (longest matching
// mount point) and returns its device, mount point and file system type.
func mountOf(dir string) (dev, mnt, fstype string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return "?", "?", "?"
	}
	defer f.Close()
	dev, mnt, fstype = "?", "?", "?"
	best := -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 {
			continue
		}
		mp := fs[1]
		if abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/") || mp == "/" {
			if len(mp) > best {
				best, dev, mnt, fstype = len(mp), fs[0], mp, fs[2]
			}
		}
	}
	return dev, mnt, fstype
}

// cpuTime is the CPU time (user + system) this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
