package localnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Ephemeral storage. A kubelet evicts a pod whose emptyDir volume holds more than its
// sizeLimit (the eviction manager's local storage check), and the local node does the
// same, so that a pod which fits on a laptop but not in its volume's limit fails here as
// it would on a cluster. Usage counts what a kubelet with filesystem quotas counts: the
// blocks of the files in the directory, plus the files the pod's process still holds open
// after unlinking them there (a sort run, for one); a kubelet that measures with du misses
// the latter, one with project quotas does not.

// DefaultEvictionInterval is how often a running pod's emptyDir usage is measured (a
// kubelet's eviction manager looks every 10 s).
const DefaultEvictionInterval = time.Second

// volumeLimit is an emptyDir volume with a sizeLimit: its host directory and the limit.
type volumeLimit struct {
	name  string
	dir   string
	limit int64
	shown string // the limit as written in the pod spec, for the message
}

// volumeLimits lists the pod's emptyDir volumes that have a sizeLimit.
func (n *Node) volumeLimits(pod *corev1.Pod) []volumeLimit {
	var out []volumeLimit
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
			continue
		}
		out = append(out, volumeLimit{name: v.Name, dir: filepath.Join(n.podDir(pod), "volumes", v.Name),
			limit: v.EmptyDir.SizeLimit.Value(), shown: v.EmptyDir.SizeLimit.String()})
	}
	return out
}

// enforceLimits measures the pod's limited volumes until its process ends, and evicts the
// pod (SIGKILL to its process group, phase Failed, reason Evicted) once one holds more
// than its limit, with the kubelet's message.
func (n *Node) enforceLimits(p *podProcess) {
	defer n.wg.Done()
	every := n.cfg.EvictionInterval
	if every <= 0 {
		every = DefaultEvictionInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-t.C:
		}
		for _, v := range p.limits {
			used, err := volumeUsage(v.dir, p.cmd.Process.Pid)
			if err != nil {
				n.cfg.Log.Error(err, "measure emptyDir usage", "pod", p.key, "volume", v.name)
				continue
			}
			if used > v.limit {
				msg := fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.name, v.shown)
				n.cfg.Log.Info("evicting pod", "pod", p.key, "volume", v.name, "usedBytes", used, "limitBytes", v.limit)
				p.evict(msg)
				return
			}
		}
	}
}

// evict records why the pod is evicted and kills its process group at once (a kubelet
// evicts for local storage with no grace period).
func (p *podProcess) evict(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited() {
		return
	}
	p.evicted = msg
	p.termSent = true
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// volumeUsage is the bytes of disk the directory's files take, plus those of files the
// process pid holds open that were unlinked from under the directory.
func volumeUsage(dir string, pid int) (int64, error) {
	var used int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				used += diskBytes(info)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("walk %s: %w", dir, err)
	}
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return used, nil // the process has just ended
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	for _, fd := range fds {
		link := filepath.Join(fdDir, fd.Name())
		target, err := os.Readlink(link)
		if err != nil || !strings.HasSuffix(target, " (deleted)") || !strings.HasPrefix(target, prefix) {
			continue
		}
		if info, err := os.Stat(link); err == nil && info.Mode().IsRegular() {
			used += diskBytes(info)
		}
	}
	return used, nil
}

// diskBytes is the space a file takes on disk (its blocks), else its size.
func diskBytes(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}
