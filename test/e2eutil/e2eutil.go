// Package e2eutil holds what the end-to-end suites (test/e2e on the local dev cluster,
// test/reliability under faults, test/e2e-real on the real-cluster lane) share: running the
// built vacuum-runner on a data directory, finding a run's running pod, reading and waiting
// for its progress, and driving the primary and standby samples (pgbench, the standby's
// read-only face, status.replication). Its helpers assert with Gomega, so they are for
// Ginkgo specs only.
package e2eutil

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
)

// Runner is the built vacuum-runner binary, run under a suite's context.
type Runner struct {
	Ctx context.Context
	Bin string
}

// Run runs the binary with args and returns its standard output; a non-zero exit fails the spec
// with the command's standard error.
func (r Runner) Run(args ...string) []byte {
	ginkgo.GinkgoHelper()
	out, err := exec.CommandContext(r.Ctx, r.Bin, args...).Output()
	var stderr []byte
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "vacuum-runner %v: %s", args, stderr)
	return out
}

// ExpectCheckClean runs `vacuum-runner check --json` on dir and expects no problems.
func (r Runner) ExpectCheckClean(dir string, flags ...string) {
	ginkgo.GinkgoHelper()
	var c struct {
		OK       bool              `json:"ok"`
		Problems []json.RawMessage `json:"problems"`
	}
	args := append([]string{"check", "--data", dir, "--json"}, flags...)
	gomega.Expect(json.Unmarshal(r.Run(args...), &c)).To(gomega.Succeed())
	gomega.Expect(c.OK).To(gomega.BeTrue(), "check found problems: %s", fmt.Sprint(c.Problems))
}

// Wait bounds a wait: how long, and how often to look.
type Wait struct {
	Timeout, Poll time.Duration
}

// RunningPod waits until the run has a pod that is Running with an address and not being
// deleted, and returns it.
func RunningPod(ctx context.Context, c client.Reader, run *vacuumv1alpha1.VacuumRun, w Wait) *corev1.Pod {
	ginkgo.GinkgoHelper()
	var pod *corev1.Pod
	gomega.Eventually(func() error {
		var list corev1.PodList
		if err := c.List(ctx, &list, client.InNamespace(run.Namespace),
			client.MatchingLabels{vacuumv1alpha1.LabelRun: run.Name}); err != nil {
			return err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp == nil {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("no running pod of run %s among %d", run.Name, len(list.Items))
	}).WithTimeout(w.Timeout).WithPolling(w.Poll).Should(gomega.Succeed())
	return pod
}

// TokenSecretName is the name of the Secret a runner pod mounts as its token (the API server
// generates it; the run records it in status.tokenSecret).
func TokenSecretName(pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name == "token" && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	return ""
}

// PinnedClient is an HTTPS client for a runner pod's control port that accepts only the
// certificate in its run's token Secret, as the manager's own client does; each request is
// bounded by timeout.
//
// The certificate is read from the API server once per Secret and kept, so a suite can read a
// runner's progress while the API server is down (the fault suites kill it on purpose).
func PinnedClient(ctx context.Context, c client.Reader, pod *corev1.Pod, timeout time.Duration) (*http.Client, error) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: TokenSecretName(pod)}
	certPEM, ok := runCerts.Load(key)
	if !ok {
		var s corev1.Secret
		if err := c.Get(ctx, key, &s); err != nil {
			return nil, fmt.Errorf("token secret of pod %s: %w", pod.Name, err)
		}
		certPEM, _ = runCerts.LoadOrStore(key, s.Data[runnerwire.TLSCertKey])
	}
	pem, _ := certPEM.([]byte)
	return runnerwire.PinnedClientFromPEM(pem, timeout)
}

// runCerts holds each token Secret's certificate (PEM) by the Secret's namespaced name; a
// Secret's name is generated per run, so an entry never goes stale.
var runCerts sync.Map

// Progress reads a runner pod's GET /progress over its pinned HTTPS control port, each request
// bounded by timeout.
func Progress(ctx context.Context, c client.Reader, pod *corev1.Pod, timeout time.Duration) (runnerwire.Progress, error) {
	hc, err := PinnedClient(ctx, c, pod, timeout)
	if err != nil {
		return runnerwire.Progress{}, err
	}
	p, err := runnerwire.FetchProgress(ctx, hc, pod.Status.PodIP)
	if err != nil {
		return runnerwire.Progress{}, err
	}
	return *p, nil
}

// WaitProgress waits until the pod's progress satisfies cond (what says what it waits for)
// and returns that progress.
func WaitProgress(ctx context.Context, c client.Reader, pod *corev1.Pod, what string, cond func(runnerwire.Progress) bool,
	request time.Duration, w Wait,
) runnerwire.Progress {
	ginkgo.GinkgoHelper()
	var p runnerwire.Progress
	gomega.Eventually(func() error {
		var err error
		if p, err = Progress(ctx, c, pod, request); err != nil {
			return err
		}
		if !cond(p) {
			return fmt.Errorf("progress not yet %s: %+v", what, p)
		}
		return nil
	}).WithTimeout(w.Timeout).WithPolling(w.Poll).Should(gomega.Succeed())
	return p
}
