package devcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Controllers are the kube-controller-manager controllers the dev cluster runs: what
// Deployments, StatefulSets, their ReplicaSets and pods, Services' EndpointSlices and owner
// references need. No scheduler runs: the local node binds every pod itself.
var Controllers = []string{
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"endpointslice-controller",
	"garbage-collector-controller",
}

// KubeBinary is the path of a Kubernetes binary (kube-controller-manager, kube-proxy, ...)
// built by hack/setup-k8s-binaries.sh: in assetsDir when it is there, else built into the
// shared cache first (minutes when cold).
func KubeBinary(ctx context.Context, repoRoot, assetsDir, name string) (string, error) {
	p := filepath.Join(assetsDir, name)
	if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
		return p, nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "hack", "setup-k8s-binaries.sh"), name)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/setup-k8s-binaries.sh %s: %w", name, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return filepath.Join(strings.TrimSpace(lines[len(lines)-1]), name), nil
}

// startControllerManager starts kube-controller-manager against the cluster's kubeconfig
// with Controllers, no leader election and no serving port; its log is
// logs/kube-controller-manager.log.
func startControllerManager(ctx context.Context, c *Cluster) (*childProcess, error) {
	bin, err := KubeBinary(ctx, c.opts.RepoRoot, c.AssetsDir, "kube-controller-manager")
	if err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	c.ControllerManagerLog = filepath.Join(c.StateDir, "logs", "kube-controller-manager.log")
	return startChild("kube-controller-manager", bin, []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--controllers=" + strings.Join(Controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	}, nil, c.ControllerManagerLog)
}
