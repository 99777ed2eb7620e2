package kubectlvacuum

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// ReadmeBlockFirstLine starts the README's kubectl vacuum command block; test/readme's
// coverage list names this spec for it.
const readmeBlockFirstLine = "go install ./cmd/kubectl-vacuum"

// readmeBlock returns the lines of the README's ```sh block whose first line starts with
// first.
func readmeBlock(first string) []string {
	f, err := os.Open(filepath.Join("..", "..", "README.md"))
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var lines []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case !in && l == "```sh":
			in, lines = true, nil
		case in && l == "```":
			if len(lines) > 0 && strings.HasPrefix(lines[0], first) {
				return lines
			}
			in = false
		case in:
			lines = append(lines, l)
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	Fail("README.md has no ```sh block starting " + first)
	return nil
}

var _ = Describe("The README's kubectl vacuum block", func() {
	It("runs as written on a policy's running run (logs and go install aside, see below)", func() {
		lines := readmeBlock(readmeBlockFirstLine)
		ns := newNamespace()
		ensureClaim(ns, "orders-data")
		p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-lazy"}}
		p.Spec.Target.PersistentVolumeClaim = "orders-data" // no schedule: it runs once, as orders-lazy-once
		Expect(k8sClient.Create(suiteCtx, p)).To(Succeed())
		pod := podOf(ns, "orders-lazy-once")
		ip := freshIP()
		runner := startFakeRunner(ip, getRun(ns, "orders-lazy-once"))
		defer runner.Close()
		setPodStatus(pod, corev1.PodRunning, ip, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
		Eventually(func() string { return getRun(ns, "orders-lazy-once").Status.Table }).WithTimeout(20 * time.Second).Should(Equal("events"))

		for _, line := range lines {
			args := strings.Fields(strings.SplitN(line, "#", 2)[0])
			switch {
			case args[0] == "go":
				// `go install` is run by README_RUN=1 (make test-readme) only: it links a binary.
				if os.Getenv("README_RUN") != "" {
					cmd := exec.Command(args[0], args[1:]...)
					cmd.Dir = filepath.Join("..", "..")
					cmd.Env = append(os.Environ(), "GOBIN="+GinkgoT().TempDir())
					out, err := cmd.CombinedOutput()
					Expect(err).NotTo(HaveOccurred(), "%s: %s", line, out)
				}
				continue
			case args[2] == "logs":
				continue // envtest has no kubelet: test/e2e-real runs `kubectl vacuum logs`
			}
			Expect(args[:2]).To(Equal([]string{"kubectl", "vacuum"}), line)
			if args[2] != "run-now" {
				res := plugin(ns, args[2:]...)
				Expect(res.code).To(Equal(ExitOK), "%s\nstdout: %s\nstderr: %s", line, res.out, res.errOut)
				if args[2] == "status" {
					Expect(res.out).To(MatchRegexp(`(?m)^orders-lazy-once\s+orders-lazy\s+Running\s`))
				}
				continue
			}
			// run-now: the cancel before it ended the active run; play the kubelet for the new one.
			done := make(chan result, 1)
			go func() {
				defer GinkgoRecover()
				done <- plugin(ns, args[2:]...)
			}()
			var runs vacuumv1alpha1.VacuumRunList
			Eventually(func() int {
				Expect(k8sClient.List(suiteCtx, &runs, client.InNamespace(ns))).To(Succeed())
				return len(runs.Items)
			}).WithTimeout(20 * time.Second).Should(Equal(2))
			name := runs.Items[0].Name
			if name == "orders-lazy-once" {
				name = runs.Items[1].Name
			}
			setPodStatus(podOf(ns, name), corev1.PodSucceeded, "", terminated(0, string(golden("summary-succeeded.json"))))
			var res result
			Eventually(done).WithTimeout(30 * time.Second).Should(Receive(&res))
			Expect(res.code).To(Equal(ExitOK), "%s\nstderr: %s", line, res.errOut)
			Expect(res.out).To(Equal("vacuumrun/" + name + "\n"))
		}
		run := getRun(ns, "orders-lazy-once")
		Expect(run.Spec.Cancel).To(BeTrue())
		Expect(run.Spec.Paused).To(BeFalse())
		Expect(*run.Spec.Throttle.CostLimit).To(Equal(int32(400)))
	})
})
