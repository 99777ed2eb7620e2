package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/devcluster"
	"github.com/vacuumops/vacuum-operator/internal/load"
	"github.com/vacuumops/vacuum-operator/internal/localnode"
	"github.com/vacuumops/vacuum-operator/internal/online"
)

// An online run on the dev cluster against a real engine-server process. The dev cluster has
// no kube-controller-manager yet, so the server runs beside it (on an address of the local
// node's pod range, which an EndpointSlice may carry) and this test writes the Service's
// EndpointSlice as the EndpointSlice controller would; the load is package load, in process.

const onlinePassword = "e2e-online-secret"

// engineServer is a running engine-server on a pod-range address.
type engineServer struct {
	addr string // IP:5432
	cmd  *exec.Cmd
}

func startEngineServer() *engineServer {
	GinkgoHelper()
	By("building engine-server and starting it on an address of the pod range")
	Expect(devcluster.Build(suiteCtx, repoRoot, binDir, "engine-server")).To(Succeed())
	h, err := localnode.HoldAddress()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(h.Release)
	Expect(h.Loopback).To(BeFalse(), "the pod range cannot be routed here (root or CAP_NET_ADMIN): no EndpointSlice could carry %s", h.IP)
	dir := GinkgoT().TempDir()
	users := filepath.Join(dir, "users")
	Expect(os.WriteFile(users, []byte("vacuum:"+onlinePassword+"\napp:"+onlinePassword+"\n"), 0o600)).To(Succeed())
	s := &engineServer{addr: net.JoinHostPort(h.IP, "5432")}
	s.cmd = exec.Command(filepath.Join(binDir, "engine-server"), "serve", "--init", "--data", filepath.Join(dir, "data"),
		"--listen", s.addr, "--auth", "scram", "--users-file", users, "--database-name", "shop", "--buffer-pool", "16Mi")
	s.cmd.Stdout, s.cmd.Stderr = GinkgoWriter, GinkgoWriter
	Expect(s.cmd.Start()).To(Succeed())
	DeferCleanup(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		_ = s.cmd.Wait()
	})
	Eventually(func() error {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return s
}

// conn is a session as app; application names starting with vacuum-runner are not foreground.
func (s *engineServer) conn(applicationName string) *pgx.Conn {
	GinkgoHelper()
	c, err := pgx.Connect(suiteCtx, fmt.Sprintf("postgres://app:%s@%s/shop?sslmode=disable&application_name=%s", onlinePassword, s.addr, applicationName))
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// publish makes the Service shop-db, its EndpointSlice naming the server's address, and the
// credentials Secret.
func (s *engineServer) publish(ns string) {
	GinkgoHelper()
	host, _, err := net.SplitHostPort(s.addr)
	Expect(err).NotTo(HaveOccurred())
	Expect(cluster.Client.Create(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-db-vacuum"},
		StringData: map[string]string{"username": "vacuum", "password": onlinePassword}})).To(Succeed())
	Expect(cluster.Client.Create(suiteCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-db"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "postgres", Port: 5432, TargetPort: intstr.FromInt32(5432)}}}})).To(Succeed())
	Expect(cluster.Client.Create(suiteCtx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "shop-db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "shop-db"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("postgres"), Port: ptr.To(int32(5432)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	})).To(Succeed())
}

// onlineRunOf is a hand-made online run of the table orders.
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

var _ = Describe("An online run against the engine server", func() {
	It("vacuums beside the load, shows the foreground the server measured, follows a patched throttle and is cancelled on the server when deleted", func() {
		ns := newNamespace()
		srv := startEngineServer()
		srv.publish(ns)
		check := srv.conn("vacuum-runner-e2e")
		_, err := check.Exec(suiteCtx, "CREATE TABLE orders (id bigint PRIMARY KEY, n bigint NOT NULL, pad bytea)")
		Expect(err).NotTo(HaveOccurred())
		_, err = check.Exec(suiteCtx, "INSERT INTO orders SELECT g, 0, '\\x"+fmt.Sprintf("%0400d", 0)+"'::bytea FROM generate_series(1, 20000) g")
		Expect(err).NotTo(HaveOccurred())
		_, err = check.Exec(suiteCtx, "UPDATE orders SET n = n + 0")
		Expect(err).NotTo(HaveOccurred())

		By("running the load beside it")
		var (
			mu   sync.Mutex
			last load.Report
		)
		loadCtx, stopLoad := context.WithCancel(suiteCtx)
		defer stopLoad()
		loaded := make(chan load.Report, 1)
		target := online.Target{Address: srv.addr, Database: "shop", User: "app", SSLMode: online.SSLDisable}
		pw := filepath.Join(GinkgoT().TempDir(), "pw")
		Expect(os.WriteFile(pw, []byte(onlinePassword), 0o600)).To(Succeed())
		target.PasswordFile = pw
		go func() {
			defer GinkgoRecover()
			rep, err := load.Run(loadCtx, load.Config{Target: target, Table: "orders", Rows: 20000, Rate: 100, UpdatePercent: 50,
				Connections: 2, ReportEvery: 200 * time.Millisecond, OnReport: func(r load.Report) { mu.Lock(); last = r; mu.Unlock() }})
			Expect(err).NotTo(HaveOccurred())
			loaded <- rep
		}()
		updates := func() int64 { mu.Lock(); defer mu.Unlock(); return last.Total.Updates }
		Eventually(updates).WithTimeout(20 * time.Second).Should(BeNumerically(">", 50))
		time.Sleep(2 * time.Second) // a baseline of load
		updatesBefore := updates()

		// 1 cost unit per 100 ms: about 10 pages a second, minutes for the table's ~1,200
		// pages unless re-throttled.
		slow := costThrottle(100*time.Millisecond, 1)
		run := onlineRunOf(ns, "live", slow)
		Expect(cluster.Client.Create(suiteCtx, run)).To(Succeed())
		waitPhase(run, vacuumv1alpha1.RunRunning, 2*time.Minute)
		var scanned []int64
		Eventually(func() int {
			if t := getRun(run).Status.Totals; t != nil && (len(scanned) == 0 || t.PagesScanned > scanned[len(scanned)-1]) {
				scanned = append(scanned, t.PagesScanned)
			}
			return len(scanned)
		}).WithTimeout(30*time.Second).WithPolling(500*time.Millisecond).Should(BeNumerically(">=", 3), "progress moving in status")
		Eventually(func() string { return getRun(run).Status.Foreground.P99 }).WithTimeout(10 * time.Second).ShouldNot(BeEmpty())
		fg := getRun(run).Status.Foreground
		Expect(fg.BaselineP99).NotTo(BeEmpty(), "a baseline taken before the vacuum, under load")
		Expect(fg.P99VsBaseline).To(MatchRegexp(`^[0-9]+\.[0-9]x$`))

		By("comparing status.foreground with the server's own window: a burst alone in it")
		stopLoad()
		rep := <-loaded
		Expect(rep.Total.Failed).To(BeZero(), "failed foreground statements: %s", rep.LastError)
		time.Sleep(11 * time.Second) // the view's 10 s window empties
		app := srv.conn("e2e-burst")
		for i := range 200 {
			var n int64
			Expect(app.QueryRow(suiteCtx, "SELECT n FROM orders WHERE id = $1", int64(i+1)).Scan(&n)).To(Succeed())
		}
		time.Sleep(2500 * time.Millisecond) // a progress poll and a status write after the burst
		var count, p50, p99 int64
		Expect(check.QueryRow(suiteCtx, "SELECT count, p50_us, p99_us FROM vacuumops_statement_latency WHERE kind = 'all'").
			Scan(&count, &p50, &p99)).To(Succeed())
		Expect(count).To(BeEquivalentTo(200))
		Expect(getRun(run).Status.Phase).To(Equal(vacuumv1alpha1.RunRunning), "the run is still running: its status is current")
		var want vacuumv1alpha1.VacuumRunStatus
		want.SetForeground(count, 20, p50, p99, 0, 0)
		got := getRun(run).Status.Foreground
		Expect(got.P50).To(Equal(want.Foreground.P50), "status p50 against the server's all row")
		Expect(got.P99).To(Equal(want.Foreground.P99), "status p99 against the server's all row")
		Expect(got.StatementsPerSecond).To(BeEquivalentTo(20), "200 statements in the 10 s window")

		By("patching the throttle: the server-side VACUUM's configured rate follows within 10 s")
		Expect(scalarOf(check, "SELECT count(*) FROM pg_stat_progress_vacuum")).To(BeEquivalentTo(1), "the run's VACUUM is on the server")
		kubectlRun("patch", "vacuumrun", "live", "-n", ns, "--type=merge", "-p", `{"spec":{"throttle":{"costDelay":"50ms","costLimit":4}}}`)
		patched := time.Now()
		Eventually(func(g Gomega) {
			// Still throttled (80 units/s), so the VACUUM is there to be read.
			var delay, limit int64
			g.Expect(check.QueryRow(suiteCtx, "SELECT cost_delay_us, cost_limit FROM pg_stat_progress_vacuum").Scan(&delay, &limit)).To(Succeed())
			g.Expect([]int64{delay, limit}).To(Equal([]int64{50000, 4}), "cost_delay_us and cost_limit after the patch")
		}).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("the server-side VACUUM took the patched throttle %.1fs after kubectl patch\n", time.Since(patched).Seconds())
		done := waitPhase(run, vacuumv1alpha1.RunSucceeded, 2*time.Minute)
		Expect(done.Status.Server.ThrottleApplies).To(Equal("Immediately"))
		dead := scalarOf(check, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'orders'")
		after := rep.Total.Updates - updatesBefore
		GinkgoWriter.Printf("n_dead_tup %d after the run; %d updates committed since before the run was created\n", dead, after)
		Expect(dead).To(BeNumerically("<=", after), "dead tuples left are at most the updates after the vacuum's cutoff")

		By("deleting a running online run: its VACUUM leaves the server")
		_, err = check.Exec(suiteCtx, "UPDATE orders SET n = n + 1")
		Expect(err).NotTo(HaveOccurred())
		second := onlineRunOf(ns, "deleted", slow)
		Expect(cluster.Client.Create(suiteCtx, second)).To(Succeed())
		Eventually(func() int64 { return scalarOf(check, "SELECT count(*) FROM pg_stat_progress_vacuum") }).
			WithTimeout(2 * time.Minute).Should(BeEquivalentTo(1))
		Expect(cluster.Client.Delete(suiteCtx, second)).To(Succeed())
		Eventually(func() int64 {
			return scalarOf(check, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query ILIKE 'vacuum%'")
		}).WithTimeout(30 * time.Second).Should(BeZero())
		Eventually(func() bool {
			return apierrors.IsNotFound(cluster.Client.Get(suiteCtx, client.ObjectKeyFromObject(second), &vacuumv1alpha1.VacuumRun{}))
		}).
			WithTimeout(30 * time.Second).Should(BeTrue())
	})
})
