package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/vacuumops/vacuum-operator/internal/devcluster"
)

// One dev cluster for the whole suite; each scenario works in a namespace of its own with a
// volume of its own.
var (
	cluster  *devcluster.Cluster
	repoRoot string
	binDir   string
	runner   string // the vacuum-runner binary the pods run
	kubectl  string
	suiteCtx context.Context
	cancel   context.CancelFunc
)

func TestE2E(t *testing.T) {
	if os.Getenv("E2E_SKIP") != "" {
		t.Skip("E2E_SKIP is set")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "End-to-end suite (local dev cluster)")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(GinkgoLogr)
	suiteCtx, cancel = context.WithCancel(context.Background())
	var err error
	repoRoot, err = devcluster.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	// Binaries of the code under test, in a directory of the suite's own (bin/ may hold an
	// older build).
	binDir = filepath.Join(GinkgoT().TempDir(), "bin")
	By("building manager, vacuum-runner and engine-server (the image's binaries, for the local node)")
	Expect(devcluster.Build(suiteCtx, repoRoot, binDir, "manager", "vacuum-runner", "engine-server")).To(Succeed())
	runner = filepath.Join(binDir, "vacuum-runner")
	By("starting the dev cluster")
	cluster, err = devcluster.Start(suiteCtx, devcluster.Options{
		RepoRoot: repoRoot, BinDir: binDir, StateDir: filepath.Join(GinkgoT().TempDir(), "cluster"),
		ManagerArgs: []string{"--progress-interval=1s", "--window-schedule-seconds"}, Log: GinkgoWriter, NodeLog: GinkgoLogr,
		RestartBackoff: time.Second,
	})
	Expect(err).NotTo(HaveOccurred())
	kubectl, err = devcluster.Kubectl(cluster.AssetsDir)
	Expect(err).NotTo(HaveOccurred())
	Eventually(cluster.ManagerRunning).WithTimeout(5 * time.Second).Should(BeTrue())
	Expect(cluster.ControllerManagerRunning()).To(BeTrue(), "kube-controller-manager exited; see %s", cluster.ControllerManagerLog)
})

var _ = AfterSuite(func() {
	if cluster != nil {
		if os.Getenv("E2E_SHOW_LOGS") != "" {
			dumpLogs()
		}
		Expect(cluster.Stop()).To(Succeed())
	}
	if cancel != nil {
		cancel()
	}
})

// dumpLogs writes the tail of the manager's log to the Ginkgo output.
func dumpLogs() {
	b, err := os.ReadFile(cluster.ManagerLog)
	if err != nil {
		return
	}
	if len(b) > 20000 {
		b = b[len(b)-20000:]
	}
	GinkgoWriter.Printf("--- manager log (tail) ---\n%s\n", b)
}

var _ = AfterEach(func() {
	if CurrentSpecReport().Failed() && cluster != nil {
		dumpLogs()
	}
})
