package e2ereal

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// clusterEnv is where the lane's pieces are.
type clusterEnv struct {
	stateDir   string // REALCLUSTER_DIR
	kubectl    string
	kubeconfig string
	ctrSocket  string // the node's containerd (E2E_REAL_CONTAINERD)
	procDir    string // the node's /proc as the host sees it (E2E_REAL_PROC)
	volumes    string // where volumes are made on the host (E2E_REAL_VOLUMES)
	nodeVols   string // the same directory as the node sees it (E2E_REAL_NODE_VOLUMES)
	image      string
	runner     string // vacuum-runner on the host
	repoRoot   string
}

func loadClusterEnv() clusterEnv {
	e := clusterEnv{
		stateDir:   envOr("REALCLUSTER_DIR", "/var/tmp/vacuum-realcluster"),
		kubeconfig: os.Getenv("KUBECONFIG"),
		image:      envOr("E2E_REAL_IMAGE", "vacuum-operator:dev"),
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	Expect(err).NotTo(HaveOccurred())
	e.repoRoot = root
	e.runner = envOr("E2E_REAL_RUNNER", filepath.Join(root, "bin", "vacuum-runner"))
	e.ctrSocket = envOr("E2E_REAL_CONTAINERD", filepath.Join(e.stateDir, "run", "containerd.sock"))
	e.procDir = envOr("E2E_REAL_PROC", "/proc")
	e.volumes = envOr("E2E_REAL_VOLUMES", filepath.Join(e.stateDir, "volumes"))
	e.nodeVols = envOr("E2E_REAL_NODE_VOLUMES", e.volumes)
	Expect(e.kubeconfig).NotTo(BeEmpty(), "KUBECONFIG must name the real cluster's kubeconfig")

	// `up` records the Kubernetes binaries' directory in its env file.
	e.kubectl = "kubectl"
	if f, err := os.Open(filepath.Join(e.stateDir, "env")); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "RC_BIN="); ok {
				e.kubectl = filepath.Join(v, "kubectl")
			}
		}
	}
	_, err = os.Stat(e.runner)
	Expect(err).NotTo(HaveOccurred(), "no vacuum-runner at %s: run `make image-tar`", e.runner)
	return e
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// run runs a command and returns its stdout; it fails the spec with stderr on error.
func run(ctx context.Context, stdin []byte, name string, args ...string) string {
	out, err := tryRun(ctx, stdin, name, args...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return out
}

func tryRun(ctx context.Context, stdin []byte, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\nstderr: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// waitEstablished waits up to a minute until every CRD named is Established, trying kubectl
// wait again while it fails: it fails at once, rather than waiting, on a CRD the API server
// has not yet given any condition (".status.conditions accessor error: <nil>").
func (e clusterEnv) waitEstablished(ctx context.Context, crds ...string) {
	GinkgoHelper()
	args := append([]string{"--kubeconfig", e.kubeconfig, "wait", "--for=condition=Established", "--timeout=10s"}, crds...)
	Eventually(func() error {
		_, err := tryRun(ctx, nil, e.kubectl, args...)
		return err
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}

// kubectl runs the cluster's kubectl.
func (e clusterEnv) kubectlRun(ctx context.Context, stdin []byte, args ...string) string {
	GinkgoHelper()
	return run(ctx, stdin, e.kubectl, append([]string{"--kubeconfig", e.kubeconfig}, args...)...)
}
