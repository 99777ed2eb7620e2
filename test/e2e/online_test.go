package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/load"
)

// An online run on the dev cluster against the samples themselves: config/samples'
// engine-server StatefulSet (its Service shop-db and Secrets) and its load generator
// Deployment, applied with kubectl as the README tells a user, their pods run by the real
// kube-controller-manager's controllers on the local node, the Service's EndpointSlice
// written by its EndpointSlice controller. The local node ignores the sample's readiness
// probe (a pod is Ready once its process runs), so the spec waits for the server's port
// itself before it starts the load.

// samplePath is a file of config/samples.
func samplePath(name string) string { return filepath.Join(repoRoot, "config", "samples", name) }

// podOf waits until one pod labelled app.kubernetes.io/name=app runs, with an address, and
// returns it.
func podOf(ns, app string) *corev1.Pod {
	GinkgoHelper()
	var pod *corev1.Pod
	Eventually(func(g Gomega) {
		var list corev1.PodList
		g.Expect(cluster.Client.List(suiteCtx, &list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": app})).To(Succeed())
		pod = nil
		for i := range list.Items {
			if p := &list.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				pod = p
			}
		}
		g.Expect(pod).NotTo(BeNil(), "a running pod of %s (%d listed)", app, len(list.Items))
	}).WithTimeout(60 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return pod
}

// secretValue reads one key of a Secret the samples made.
func secretValue(ns, name, key string) string {
	GinkgoHelper()
	var s corev1.Secret
	Expect(cluster.Client.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
	Expect(s.Data).To(HaveKey(key), "Secret %s/%s", ns, name)
	return string(s.Data[key])
}

// sampleConn is a session to the sample server as the sample's vacuum role; application names
// starting with vacuum-runner are not counted as foreground.
func sampleConn(ns, addr, applicationName string) *pgx.Conn {
	GinkgoHelper()
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s/shop?sslmode=disable&application_name=%s", addr, applicationName))
	Expect(err).NotTo(HaveOccurred())
	cfg.User = secretValue(ns, "shop-db-vacuum", "username")
	cfg.Password = secretValue(ns, "shop-db-vacuum", "password")
	var c *pgx.Conn
	Eventually(func() error {
		c, err = pgx.ConnectConfig(suiteCtx, cfg)
		return err
	}).WithTimeout(30*time.Second).WithPolling(100*time.Millisecond).Should(Succeed(), "the sample server at %s accepts sessions", addr)
	DeferCleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// finalLoadReport is the final report in a load pod's log (the JSON line with final true).
func finalLoadReport(pod *corev1.Pod) (load.Report, error) {
	path := filepath.Join(cluster.NodeStateDir, "logs", pod.Namespace+"_"+pod.Name+"_load.log")
	b, err := os.ReadFile(path)
	if err != nil {
		return load.Report{}, err
	}
	var final *load.Report
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var r load.Report
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Final {
			final = &r
		}
	}
	if final == nil {
		return load.Report{}, fmt.Errorf("no final report in %s yet", path)
	}
	return *final, nil
}

// onlineRunOf is a hand-made online run of the sample's table orders, through the sample's
// Service and credentials.
func onlineRunOf(ns, name string, th vacuumv1alpha1.Throttle) *vacuumv1alpha1.VacuumRun {
	run := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	run.Spec.Target.Server = &vacuumv1alpha1.ServerTarget{Service: "shop-db", Database: "shop",
		CredentialsSecret: vacuumv1alpha1.CredentialsSecret{Name: "shop-db-vacuum"},
		TLS:               &vacuumv1alpha1.ServerTLS{Mode: vacuumv1alpha1.TLSDisable}}
	run.Spec.Target.Tables = []string{"orders"}
	run.Spec.Throttle = th
	return run
}

func scalarOf(c *pgx.Conn, sql string) int64 {
	GinkgoHelper()
	var v int64
	Expect(c.QueryRow(suiteCtx, sql).Scan(&v)).To(Succeed(), sql)
	return v
}

// foregroundCount is the foreground statements in the server's latency window (its `all`
// row, absent while the window is empty).
func foregroundCount(g Gomega, c *pgx.Conn) int64 {
	var n int64
	err := c.QueryRow(suiteCtx, "SELECT count FROM vacuumops_statement_latency WHERE kind = 'all'").Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0
	}
	g.Expect(err).NotTo(HaveOccurred())
	return n
}

// vacuumThrottle is the running VACUUM's configured cost delay (µs) and cost limit, as the
// server shows them.
func vacuumThrottle(g Gomega, c *pgx.Conn) []int64 {
	var delay, limit int64
	g.Expect(c.QueryRow(suiteCtx, "SELECT cost_delay_us, cost_limit FROM pg_stat_progress_vacuum").Scan(&delay, &limit)).To(Succeed())
	return []int64{delay, limit}
}

var _ = Describe("An online run against the engine-server sample under the sample load", func() {
	It("vacuums beside the load, shows the foreground the server measured, follows a patched throttle and is cancelled on the server when deleted", func() {
		needEndpoints()
		ns := newNamespace()
		By("applying the engine-server sample (StatefulSet, Service shop-db, Secrets) with kubectl")
		kubectlRun("apply", "-n", ns, "-f", samplePath("engine_server.yaml"))
		server := podOf(ns, "shop-db")
		addr := net.JoinHostPort(server.Status.PodIP, "5432")
		check := sampleConn(ns, addr, "vacuum-runner-e2e")

		By("applying the load generator sample: it finds the server through the Service variables")
		kubectlRun("apply", "-n", ns, "-f", samplePath("load_generator.yaml"))
		loader := podOf(ns, "shop-load")
		// The load fills orders (50,000 ids), then sends 200 statements a second, half of
		// them updates (each adds 1 to one row's n: sum(n) is the updates committed).
		Eventually(func(g Gomega) int64 { return foregroundCount(g, check) }).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(BeNumerically(">=", 400), "two seconds of load in the server's window (a baseline)")
		updatesBefore := scalarOf(check, "SELECT sum(n) FROM orders")

		// 1 cost unit per 20 ms (page costs 1/2/20): a minute or more for the table's
		// hundreds of pages, most of them dirtied by the load's updates, unless re-throttled.
		run := onlineRunOf(ns, "live", costThrottle(20*time.Millisecond, 1))
		Expect(cluster.Client.Create(suiteCtx, run)).To(Succeed())
		// The VACUUM takes its removable cutoff when it starts, which is after any look
		// that did not find it in pg_stat_progress_vacuum: sum(n) read just before such a
		// look counts only updates committed before the cutoff.
		beforeCutoff := updatesBefore
		Eventually(func() int64 {
			s := scalarOf(check, "SELECT sum(n) FROM orders")
			n := scalarOf(check, "SELECT count(*) FROM pg_stat_progress_vacuum")
			if n == 0 {
				beforeCutoff = s
			}
			return n
		}).WithTimeout(time.Minute).WithPolling(20*time.Millisecond).Should(BeEquivalentTo(1), "the run's VACUUM on the server")
		waitPhase(run, vacuumv1alpha1.RunRunning, time.Minute)
		var scanned []int64
		Eventually(func() int {
			if t := getRun(run).Status.Totals; t != nil && (len(scanned) == 0 || t.PagesScanned > scanned[len(scanned)-1]) {
				scanned = append(scanned, t.PagesScanned)
			}
			return len(scanned)
		}).WithTimeout(30*time.Second).WithPolling(250*time.Millisecond).Should(BeNumerically(">=", 3), "progress moving in status")
		Eventually(func() string { return getRun(run).Status.Foreground.P99 }).WithTimeout(10 * time.Second).ShouldNot(BeEmpty())
		fg := getRun(run).Status.Foreground
		Expect(fg.BaselineP99).NotTo(BeEmpty(), "a baseline taken before the vacuum, under load")
		Expect(fg.P99VsBaseline).To(MatchRegexp(`^[0-9]+\.[0-9]x$`))

		By("stopping the load (kubectl scale to 0): its final report has no failed statement")
		kubectlRun("scale", "-n", ns, "deployment/shop-load", "--replicas=0")

		By("patching the throttle: the server-side VACUUM's configured rate follows within 10 s")
		// The same 50 units/s in other figures, so the VACUUM is still there afterwards.
		Expect(scalarOf(check, "SELECT count(*) FROM pg_stat_progress_vacuum")).To(BeEquivalentTo(1), "the run's VACUUM is on the server")
		Expect(vacuumThrottle(Default, check)).To(Equal([]int64{20000, 1}))
		kubectlRun("patch", "vacuumrun", "live", "-n", ns, "--type=merge", "-p", `{"spec":{"throttle":{"costDelay":"40ms","costLimit":2}}}`)
		patched := time.Now()
		Eventually(func(g Gomega) []int64 { return vacuumThrottle(g, check) }).
			WithTimeout(10*time.Second).WithPolling(100*time.Millisecond).Should(Equal([]int64{40000, 2}), "cost_delay_us and cost_limit after the patch")
		GinkgoWriter.Printf("the server-side VACUUM took the patched throttle %.1fs after kubectl patch\n", time.Since(patched).Seconds())

		var rep load.Report
		Eventually(func() error {
			var err error
			rep, err = finalLoadReport(loader)
			return err
		}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(rep.Total.Failed).To(BeZero(), "failed foreground statements: %s", rep.LastError)
		Expect(rep.Total.Updates).To(BeNumerically(">", 0))
		updatesAfter := scalarOf(check, "SELECT sum(n) FROM orders")
		Expect(updatesAfter).To(Equal(rep.Total.Updates), "the updates the load reports committed are the table's")

		By("comparing status.foreground with the server's own window: a burst alone in it")
		// The view's 10 s window empties of the load's statements, then holds only the burst.
		Eventually(func(g Gomega) int64 { return foregroundCount(g, check) }).
			WithTimeout(15 * time.Second).WithPolling(200 * time.Millisecond).Should(BeZero())
		app := sampleConn(ns, addr, "e2e-burst")
		for i := range 200 {
			var n int64
			Expect(app.QueryRow(suiteCtx, "SELECT n FROM orders WHERE id = $1", int64(i+1)).Scan(&n)).To(Succeed())
		}
		var count, p50, p99 int64
		Expect(check.QueryRow(suiteCtx, "SELECT count, p50_us, p99_us FROM vacuumops_statement_latency WHERE kind = 'all'").
			Scan(&count, &p50, &p99)).To(Succeed())
		Expect(count).To(BeEquivalentTo(200))
		var want vacuumv1alpha1.VacuumRunStatus
		want.SetForeground(count, 20, p50, p99, 0, 0)
		// A progress poll and a status write after the burst, well inside its window.
		Eventually(func(g Gomega) {
			r := getRun(run)
			g.Expect(r.Status.Phase).To(Equal(vacuumv1alpha1.RunRunning), "the run is still running: its status is current")
			got := r.Status.Foreground
			g.Expect(got.StatementsPerSecond).To(BeEquivalentTo(20), "200 statements in the 10 s window")
			g.Expect(got.P50).To(Equal(want.Foreground.P50), "status p50 against the server's all row")
			g.Expect(got.P99).To(Equal(want.Foreground.P99), "status p99 against the server's all row")
		}).WithTimeout(6 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())

		By("lifting the throttle: the run ends Succeeded, leaving at most the updates committed after its VACUUM's removable cutoff")
		kubectlRun("patch", "vacuumrun", "live", "-n", ns, "--type=merge", "-p", `{"spec":{"throttle":{"costDelay":"0s"}}}`)
		done := waitPhase(run, vacuumv1alpha1.RunSucceeded, time.Minute)
		Expect(done.Status.Server.ThrottleApplies).To(Equal("Immediately"))
		dead := scalarOf(check, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'orders'")
		after := updatesAfter - beforeCutoff
		GinkgoWriter.Printf("n_dead_tup %d after the run; %d updates committed after the vacuum's cutoff, %d since before the run was created\n",
			dead, after, updatesAfter-updatesBefore)
		// The cutoff is the oldest transaction running when the VACUUM started: an update in
		// flight then (at most one per load session, the sample's 4) holds it back past
		// updates that committed before it.
		Expect(dead).To(BeNumerically("<=", after+4), "dead tuples left are at most the updates after the vacuum's cutoff")

		By("deleting a running online run: its VACUUM leaves the server")
		second := onlineRunOf(ns, "deleted", costThrottle(100*time.Millisecond, 1)) // 10 units/s: long enough to delete
		Expect(cluster.Client.Create(suiteCtx, second)).To(Succeed())
		Eventually(func() int64 { return scalarOf(check, "SELECT count(*) FROM pg_stat_progress_vacuum") }).
			WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(BeEquivalentTo(1))
		Expect(cluster.Client.Delete(suiteCtx, second)).To(Succeed())
		Eventually(func() int64 {
			return scalarOf(check, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query ILIKE 'vacuum%'")
		}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(BeZero())
		Eventually(func() bool {
			return apierrors.IsNotFound(cluster.Client.Get(suiteCtx, client.ObjectKeyFromObject(second), &vacuumv1alpha1.VacuumRun{}))
		}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(BeTrue())
	})
})
