package readme

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// block is one fenced ```sh block of README.md.
type block struct {
	line  int // of its first command
	lines []string
}

func (b block) first() string { return b.lines[0] }

// shBlocks returns README.md's ```sh blocks: its command blocks.
func shBlocks(t *testing.T) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur == nil && l == "```sh":
			cur = &block{line: n + 1}
		case cur != nil && l == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// coverage says, for each command block (by its first line), which test runs it, or why none
// does. Blocks that invoke `make test` or `.ci/run` are exempt: they are the test suite.
var coverage = map[string]string{
	"export GOTOOLCHAIN=go1.27.3   # go.mod's toolchain; make, .ci/run and hack/ scripts set it themselves": "exempt: invokes make test (its make demo is the e2e suite's own path)",
	"make image-tar                                  # bin/vacuum-operator.tar, tagged vacuum-operator:dev": "TestReadmeKindQuickstartOnKind (make test-e2e-kind) and TestReadmeKindQuickstartOnTheRealClusterLane",
	"kubectl create namespace vacuum-demo": "TestReadmeKindQuickstartOnKind (make test-e2e-kind) and TestReadmeKindQuickstartOnTheRealClusterLane",
	"sudo make test-e2e-real     # image-tar, up, test/e2e-real, always down (fails on any host leftover)":                                                         "exempt: make test-e2e-real is the real-cluster lane .ci/run runs; make demo-real is run by TestReadmeKindQuickstartOnTheRealClusterLane (hack/realcluster/demo on the same cluster)",
	"go build -o bin/vacuum-runner ./cmd/vacuum-runner":                                                                                                            "TestReadmeLaptopCommandsRun",
	"kubectl wait vacuumrun/orders-once --for=condition=Complete --timeout=2h    # succeeded":                                                                      "test/install's \"runs the README's kubectl wait recipes\": the run recipes (Complete, Failed, Cancelled, Progressing=false) with the real kubectl on runs the spec ends; not the LastRunSucceeded line (that suite runs no manager)",
	"go install ./cmd/kubectl-vacuum          # or: go install github.com/vacuumops/vacuum-operator/cmd/kubectl-vacuum@latest (with $(go env GOPATH)/bin on PATH)": "internal/kubectlvacuum's \"The README's kubectl vacuum block\": every kubectl vacuum line in-process against envtest with the manager running (go install only with README_RUN=1); the logs line by test/e2e-real's kubectl vacuum spec on the real-cluster lane",
}

// TestEveryReadmeCommandBlockIsRunByATestOrListedExempt fails when the README gains a command
// block that no test runs, or loses one the list still names.
func TestEveryReadmeCommandBlockIsRunByATestOrListedExempt(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range shBlocks(t) {
		seen[b.first()] = true
		if _, ok := coverage[b.first()]; !ok {
			t.Errorf("README.md:%d: the command block starting %q is run by no test: run it in test/readme "+
				"and add it to coverage (or, if it invokes make test or .ci/run, list it as exempt)", b.line, b.first())
		}
	}
	for first, how := range coverage {
		if !seen[first] {
			t.Errorf("coverage names a README command block %q (%s) that README.md no longer has", first, how)
		}
	}
}

// blockStarting returns the command block whose first line is first.
func blockStarting(t *testing.T, first string) block {
	t.Helper()
	for _, b := range shBlocks(t) {
		if b.first() == first {
			return b
		}
	}
	t.Fatalf("README.md has no command block starting %q", first)
	return block{}
}

// runScript runs script with bash -euo pipefail in the repository root and fails the test on a
// non-zero exit, with its output.
func runScript(t *testing.T, env []string, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = repoRoot(t)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n--- script:\n%s\n--- output:\n%s", err, script, out)
	}
	return string(out)
}

// TestReadmeLaptopCommandsRun runs "The runner on a laptop" as written, with /tmp/vol and
// bin/vacuum-runner moved into the test's temporary directory. Set README_RUN=1 (make
// test-readme): it bloats 200,000 rows, too long for make test's budget.
func TestReadmeLaptopCommandsRun(t *testing.T) {
	if os.Getenv("README_RUN") == "" {
		t.Skip("set README_RUN=1 (make test-readme) to run the README's laptop commands")
	}
	b := blockStarting(t, "go build -o bin/vacuum-runner ./cmd/vacuum-runner")
	tmp := t.TempDir()
	script := strings.Join(b.lines, "\n")
	script = strings.ReplaceAll(script, "/tmp/vol", filepath.Join(tmp, "vol"))
	script = strings.ReplaceAll(script, "bin/vacuum-runner", filepath.Join(tmp, "vacuum-runner"))
	out := runScript(t, nil, script)
	for _, want := range []string{"orders", "tuples:", "removed"} {
		if !strings.Contains(strings.ToLower(out), want) {
			t.Errorf("the laptop commands' output does not mention %q:\n%s", want, out)
		}
	}
}

// TestReadmeKindQuickstartOnTheRealClusterLane runs "Quickstart on kind" on the real-cluster
// lane (hack/realcluster), because this machine has no Docker and so no kind. Every README line
// runs as written except these, whose substitutes are marked in the script:
//   - `kind create cluster` and `kind load image-archive bin/vacuum-operator.tar`: the lane's
//     `hack/realcluster/up --image bin/vacuum-operator.tar` (a real kubelet, containerd and runc,
//     with the image imported);
//   - kind's default storage class: a local PersistentVolume pre-bound to the claim the README
//     makes, on a directory owned by the image's user;
//   - `kubectl` is the lane's kubectl with its kubeconfig.
//
// Then `make demo-real`'s body (hack/realcluster/demo) runs on the same cluster. Root on Linux
// only, and only with README_REAL=1 (make test-readme-real); the lane's host paths are fixed, so
// run it under the lane's lock.
func TestReadmeKindQuickstartOnTheRealClusterLane(t *testing.T) {
	if os.Getenv("README_REAL") == "" || os.Geteuid() != 0 {
		t.Skip("set README_REAL=1 and run as root (make test-readme-real) to run the quickstart on the real-cluster lane")
	}
	deploy := blockStarting(t, "make image-tar                                  # bin/vacuum-operator.tar, tagged vacuum-operator:dev")
	data := blockStarting(t, "kubectl create namespace vacuum-demo")
	if len(deploy.lines) != 4 || !strings.HasPrefix(deploy.lines[1], "kind create cluster") ||
		!strings.HasPrefix(deploy.lines[2], "kind load image-archive") || !strings.HasPrefix(deploy.lines[3], "make deploy") {
		t.Fatalf("README.md:%d: the quickstart's first block changed; update the substitutions of this test:\n%s",
			deploy.line, strings.Join(deploy.lines, "\n"))
	}
	script := `
source hack/realcluster/lib.sh
` + deploy.lines[0] + `
# Substitutes README: ` + deploy.lines[1] + `
# and README: ` + deploy.lines[2] + `
hack/realcluster/up --image bin/vacuum-operator.tar >/dev/null
trap 'hack/realcluster/down' EXIT
rc_load_env
export KUBECONFIG=$RC_KUBECONFIG KUBECTL=$RC_BIN/kubectl PATH=$RC_BIN:$PATH
kubectl() { "$RC_BIN/kubectl" --kubeconfig "$RC_KUBECONFIG" "$@"; }
` + deploy.lines[3] + `
# Substitutes kind's default storage class: a local volume pre-bound to the README's claim.
vol=$RC_DIR/volumes/readme-orders-data
rm -rf "$vol"; mkdir -p "$vol"; chown 65532:65532 "$vol"
node=$(kubectl get nodes -o jsonpath='{.items[0].metadata.labels.kubernetes\.io/hostname}')
kubectl apply -f - <<PV
apiVersion: v1
kind: PersistentVolume
metadata: {name: readme-orders-data}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  local: {path: $vol}
  claimRef: {namespace: vacuum-demo, name: orders-data}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$node]}]
PV
` + strings.Join(data.lines, "\n") + `
kubectl -n vacuum-demo get vr orders-lazy-once -o jsonpath='{.status.phase} {.status.totals.tuplesRemoved}{"\n"}'
# make demo-real's body on the same cluster, in a namespace of its own making.
kubectl delete namespace vacuum-demo --wait=true --timeout=300s
kubectl delete pv readme-orders-data --wait=true
hack/realcluster/demo
`
	out := runScript(t, nil, script)
	if !strings.Contains(out, "Succeeded") {
		t.Errorf("the quickstart's run did not report Succeeded:\n%s", out)
	}
	t.Log(out)
}

// TestReadmeKindQuickstartOnKind runs "Quickstart on kind" on a kind cluster, every line as
// written: `make image-tar`, `kind create cluster`, `kind load image-archive`, `make deploy`,
// then the data pod on kind's default storage class and the lazy sample until its run
// Succeeded. One thing is added to what a user with kind types: this machine reaches no
// registry, so `kind create cluster` is given `--image` of the node image hack/kind/node-image
// builds here (a shell function named kind adds it; every other kind command passes through).
// Root on Linux only, with README_KIND=1 and the environment of `hack/kind/up --prepare-only`
// (make test-e2e-kind provides both); the cluster is left up for the lane's next step and its
// `hack/kind/down`.
func TestReadmeKindQuickstartOnKind(t *testing.T) {
	if os.Getenv("README_KIND") == "" || os.Geteuid() != 0 {
		t.Skip("set README_KIND=1 and run as root (make test-e2e-kind) to run the quickstart on kind")
	}
	image := os.Getenv("KIND_NODE_IMAGE")
	if image == "" {
		t.Fatal("KIND_NODE_IMAGE is not set: run through make test-e2e-kind (hack/kind/up --prepare-only prints it)")
	}
	deploy := blockStarting(t, "make image-tar                                  # bin/vacuum-operator.tar, tagged vacuum-operator:dev")
	data := blockStarting(t, "kubectl create namespace vacuum-demo")
	if len(deploy.lines) != 4 || !strings.HasPrefix(deploy.lines[1], "kind create cluster") {
		t.Fatalf("README.md:%d: the quickstart's first block changed; update this test:\n%s",
			deploy.line, strings.Join(deploy.lines, "\n"))
	}
	script := `
# The README's kind, with the node image built here for "kind create cluster".
kind() {
  if [[ ${1:-} == create && ${2:-} == cluster ]]; then command kind "$@" --image "$KIND_NODE_IMAGE"
  else command kind "$@"; fi
}
` + strings.Join(deploy.lines, "\n") + `
` + strings.Join(data.lines, "\n") + `
kubectl -n vacuum-demo get vr orders-lazy-once -o jsonpath='{.status.phase} {.status.totals.tuplesRemoved}{"\n"}'
kubectl -n vacuum-demo get pvc orders-data -o jsonpath='{.spec.storageClassName} {.status.phase}{"\n"}'
`
	out := runScript(t, nil, script)
	if !strings.Contains(out, "Succeeded") {
		t.Errorf("the quickstart's run did not report Succeeded:\n%s", out)
	}
	if !strings.Contains(out, "standard Bound") {
		t.Errorf("the claim was not bound by kind's default storage class (standard):\n%s", out)
	}
	t.Log(out)
}
