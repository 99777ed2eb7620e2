package e2ereal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// hostProcess is what /proc on the host says about a container's main process.
type hostProcess struct {
	pid    int
	status map[string]string // /proc/PID/status, key -> value
	rootRO bool              // its root mount is read-only
	exe    string
}

// containerProcess finds the PID of a pod's container through the node's containerd, and reads
// /proc for it (the node's /proc, E2E_REAL_PROC: the host's on the real lane, the kind node's
// as the host sees it on the kind lane).
func containerProcess(ctx context.Context, pod *corev1.Pod, container string) hostProcess {
	GinkgoHelper()
	var id string
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container {
			id = strings.TrimPrefix(cs.ContainerID, "containerd://")
		}
	}
	Expect(id).NotTo(BeEmpty(), "container %s of pod %s has no containerd ID", container, pod.Name)
	out := run(ctx, nil, "ctr", "--address", env.ctrSocket, "--namespace", "k8s.io", "tasks", "ls")
	p := hostProcess{status: map[string]string{}}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == id {
			pid, err := strconv.Atoi(f[1])
			Expect(err).NotTo(HaveOccurred())
			p.pid = pid
		}
	}
	Expect(p.pid).To(BeNumerically(">", 0), "containerd lists no task for %s:\n%s", id, out)

	proc := filepath.Join(env.procDir, strconv.Itoa(p.pid))
	b, err := os.ReadFile(filepath.Join(proc, "status"))
	Expect(err).NotTo(HaveOccurred())
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			p.status[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	b, err = os.ReadFile(filepath.Join(proc, "mountinfo"))
	Expect(err).NotTo(HaveOccurred())
	p.rootRO = rootMountReadOnly(string(b))
	p.exe, _ = os.Readlink(filepath.Join(proc, "exe"))
	return p
}

// rootMountReadOnly reports whether the mount at "/" in a mountinfo listing has the ro option.
// Fields: ID parentID major:minor root mountpoint options ...
func rootMountReadOnly(mountinfo string) bool {
	ro := false
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) >= 6 && f[4] == "/" {
			// The last mount over "/" is the one in effect.
			ro = false
			for _, opt := range strings.Split(f[5], ",") {
				if opt == "ro" {
					ro = true
				}
			}
		}
	}
	return ro
}

func (p hostProcess) String() string {
	return fmt.Sprintf("pid %d exe %s Uid %q Gid %q CapEff %s CapPrm %s CapBnd %s NoNewPrivs %s Seccomp %s rootRO %v",
		p.pid, p.exe, p.status["Uid"], p.status["Gid"], p.status["CapEff"], p.status["CapPrm"],
		p.status["CapBnd"], p.status["NoNewPrivs"], p.status["Seccomp"], p.rootRO)
}
