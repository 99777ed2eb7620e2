package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
)

// kubectlWait runs the README's `kubectl wait` recipe and returns its exit code.
func kubectlWait(ns, obj, condition, timeout string) int {
	GinkgoHelper()
	cmd := exec.CommandContext(suiteCtx, filepath.Join(assets, "kubectl"), "-n", ns, "wait", obj,
		"--for=condition="+condition, "--timeout="+timeout)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	err := cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode()
	}
	Expect(err).NotTo(HaveOccurred())
	return 0
}

// describeWaitRecipes adds the README's kubectl wait recipes to the ordered install
// container, after install.yaml: as a container of its own, which Ginkgo may run first, the
// CRDs it applied made the helm install refuse them (not owned by the release).
func describeWaitRecipes() {
	It("runs the README's kubectl wait recipes: each outcome of a run waited for, the others time out", func() {
		By("serving the CRDs")
		kubectl(nil, "apply", "--server-side", "--force-conflicts", "-f", "config/crd/bases")
		waitEstablished("crd/vacuumpolicies.vacuum.vacuumops.io", "crd/vacuumruns.vacuum.vacuumops.io")
		ns := "team-wait"
		Expect(client.IgnoreAlreadyExists(k8sClient.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
		now := metav1.NewTime(time.Now())
		ends := map[string]func(*vacuumv1alpha1.VacuumRunStatus, int64){
			vacuumv1alpha1.ConditionComplete: func(s *vacuumv1alpha1.VacuumRunStatus, g int64) { s.MarkSucceeded(g, now, "done") },
			vacuumv1alpha1.ConditionFailed: func(s *vacuumv1alpha1.VacuumRunStatus, g int64) {
				s.MarkFailed(g, now, vacuumv1alpha1.ReasonBackoffLimitExceeded, "3 attempts failed")
			},
			vacuumv1alpha1.ConditionCancelled: func(s *vacuumv1alpha1.VacuumRunStatus, g int64) { s.MarkCancelled(g, now, "cancelled") },
		}
		// The other outcomes' conditions are False then (TestEveryEndLeavesExactlyOne...
		// checks them): here each kubectl call costs about half a second, so only the
		// recipes themselves run, with a check once that a pending run has not ended.
		first := true
		for outcome, end := range ends {
			name := "ends-" + map[string]string{"Complete": "complete", "Failed": "failed", "Cancelled": "cancelled"}[outcome]
			run := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			run.Spec.Target.PersistentVolumeClaim = "data"
			Expect(k8sClient.Create(suiteCtx, run)).To(Succeed())
			base := run.DeepCopy()
			run.Status.MarkPending(run.Generation, vacuumv1alpha1.ReasonVolumeBusy, "waiting for the volume")
			Expect(k8sClient.Status().Patch(suiteCtx, run, client.MergeFrom(base))).To(Succeed())
			if first {
				Expect(kubectlWait(ns, "vacuumrun/"+name, "Progressing=false", "0s")).NotTo(BeZero(), "a pending run has not ended")
			}

			By("ending a run: " + outcome)
			base = run.DeepCopy()
			end(&run.Status, run.Generation)
			Expect(k8sClient.Status().Patch(suiteCtx, run, client.MergeFrom(base))).To(Succeed())
			Expect(kubectlWait(ns, "vacuumrun/"+name, outcome, "20s")).To(BeZero(), "waiting for %s", outcome)
			if first {
				Expect(kubectlWait(ns, "vacuumrun/"+name, "Progressing=false", "20s")).To(BeZero(), "any end")
				for other := range ends {
					if other != outcome {
						Expect(kubectlWait(ns, "vacuumrun/"+name, other, "0s")).NotTo(BeZero(), "%s after %s", other, outcome)
						break
					}
				}
			}
			first = false
		}
	})
}
