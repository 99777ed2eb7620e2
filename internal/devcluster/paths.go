package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// RepoRoot finds the repository root (the directory holding go.mod) from the working
// directory upward.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or above: run from inside the repository")
		}
		dir = parent
	}
}

// AssetsDir is the directory of kube-apiserver, etcd and kubectl: KUBEBUILDER_ASSETS if
// set, else what hack/setup-envtest.sh prints (it builds them the first time, ~10 min).
func AssetsDir(ctx context.Context, repoRoot string) (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot, "hack", "setup-envtest.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/setup-envtest.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Kubectl is the kubectl built by hack/setup-envtest.sh beside kube-apiserver, else the
// first kubectl on PATH.
func Kubectl(assetsDir string) (string, error) {
	p := filepath.Join(assetsDir, "kubectl")
	if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
		return p, nil
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("no kubectl in %s nor on PATH", assetsDir)
	}
	return p, nil
}

// Build builds the named commands (./cmd/NAME) into binDir, in one go build (one
// invocation compiles the packages they share once and links them in parallel).
func Build(ctx context.Context, repoRoot, binDir string, names ...string) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", binDir, err)
	}
	if len(names) == 0 {
		return nil
	}
	args := []string{"build", "-o", binDir + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, "./cmd/"+name)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
