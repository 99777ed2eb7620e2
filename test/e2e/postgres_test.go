package e2e

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/localnode"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
)

// An online run of a real PostgreSQL 15 (Debian's postgresql-15, /usr/lib/postgresql/15/bin)
// through the operator. The local node runs every process as its own user, root here, which
// PostgreSQL refuses, and it has no runAsUser; so the server is a host process (package
// pgtest: user nobody, SCRAM passwords, autovacuum off) on an address of the local node's pod
// range, behind a Service without a selector whose EndpointSlice this spec writes, as a user
// does for a database outside the cluster.

// postgresBehindService starts PostgreSQL 15 on a pod-range address and publishes it as
// Service pg of ns (port 5432) with the superuser's credentials in Secret pg-vacuum. It
// returns a session as the superuser.
func postgresBehindService(ns string) *pgx.Conn {
	GinkgoHelper()
	h, err := localnode.HoldAddress()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(h.Release)
	Expect(h.Loopback).To(BeFalse(), "the pod range cannot be routed here (root or CAP_NET_ADMIN): no EndpointSlice could carry %s", h.IP)
	By("starting PostgreSQL 15 on " + h.IP + " (a host process, user nobody)")
	srv, err := pgtest.Start(suiteCtx, "listen_addresses=127.0.0.1,"+h.IP)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(srv.Stop)
	// The runner pod reaches the server on the pod address: SCRAM from the pod range too.
	hba := filepath.Join(srv.Dir(), "data", "pg_hba.conf")
	f, err := os.OpenFile(hba, os.O_APPEND|os.O_WRONLY, 0)
	Expect(err).NotTo(HaveOccurred())
	_, err = f.WriteString("host all all " + cluster.PodCIDR + " scram-sha-256\n")
	Expect(err).NotTo(HaveOccurred())
	Expect(f.Close()).To(Succeed())
	conn, err := srv.Connect(suiteCtx, "postgres")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(suiteCtx, "SELECT pg_reload_conf()")
	Expect(err).NotTo(HaveOccurred())

	Expect(cluster.Client.Create(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg-vacuum"},
		StringData: map[string]string{"username": pgtest.Superuser, "password": pgtest.Password}})).To(Succeed())
	Expect(cluster.Client.Create(suiteCtx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "postgres", Port: 5432, TargetPort: intstr.FromInt32(int32(srv.Port))}}}})).To(Succeed())
	Expect(cluster.Client.Create(suiteCtx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "pg-1", Labels: map[string]string{discoveryv1.LabelServiceName: "pg"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("postgres"), Port: ptr.To(int32(srv.Port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{h.IP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	})).To(Succeed())
	return conn
}

// postgresRunOf is an online run of table bloat in database postgres behind Service pg.
func postgresRunOf(ns, name string, th vacuumv1alpha1.Throttle) *vacuumv1alpha1.VacuumRun {
	run := &vacuumv1alpha1.VacuumRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	run.Spec.Target.Server = &vacuumv1alpha1.ServerTarget{Service: "pg", Database: "postgres",
		CredentialsSecret: vacuumv1alpha1.CredentialsSecret{Name: "pg-vacuum"},
		TLS:               &vacuumv1alpha1.ServerTLS{Mode: vacuumv1alpha1.TLSDisable}}
	run.Spec.Target.Tables = []string{"bloat"}
	run.Spec.Throttle = th
	return run
}

var _ = Describe("An online run against PostgreSQL 15", func() {
	It("takes a bloated table's dead tuples to 0 with live progress from pg_stat_progress_vacuum, and says a resumed run starts at block 0", func() {
		needEndpoints()
		ns := newNamespace()
		pg := postgresBehindService(ns)
		_, err := pg.Exec(suiteCtx, `CREATE TABLE bloat (id int PRIMARY KEY, pad text NOT NULL);
			INSERT INTO bloat SELECT g, repeat('x', 100) FROM generate_series(1, 60000) g;
			DELETE FROM bloat WHERE id % 2 = 0`)
		Expect(err).NotTo(HaveOccurred())
		var pages int64
		Expect(pg.QueryRow(suiteCtx, "SELECT pg_relation_size('bloat') / current_setting('block_size')::int").Scan(&pages)).To(Succeed())
		// Each query is a transaction of its own, so it reads the statistics afresh.
		deadTuples := func(g Gomega) int64 {
			var n int64
			g.Expect(pg.QueryRow(suiteCtx, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'bloat'").Scan(&n)).To(Succeed())
			return n
		}
		Eventually(deadTuples).WithTimeout(10 * time.Second).Should(BeEquivalentTo(30000))

		// 3 cost units per 10 ms (page costs 1/2/20): the pages are in shared buffers and
		// already dirty (no checkpoint since the DELETE), so about a unit each, 300 pages a
		// second, seconds for the heap's two passes.
		run := postgresRunOf(ns, "lazy", costThrottle(10*time.Millisecond, 3))
		Expect(cluster.Client.Create(suiteCtx, run)).To(Succeed())
		waitPhase(run, vacuumv1alpha1.RunRunning, time.Minute)
		var scanned []int64
		Eventually(func() int {
			r := getRun(run)
			if r.Status.Phase.IsFinal() {
				StopTrying("the run ended before its progress was seen moving: " + string(r.Status.Phase)).Now()
			}
			if t := r.Status.Totals; t != nil && t.PagesScanned > 0 && (len(scanned) == 0 || t.PagesScanned > scanned[len(scanned)-1]) {
				scanned = append(scanned, t.PagesScanned)
			}
			return len(scanned)
		}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(BeNumerically(">=", 2), "progress from pg_stat_progress_vacuum moving in status")
		GinkgoWriter.Printf("pages scanned seen in status: %v of %d\n", scanned, pages)
		done := waitPhase(run, vacuumv1alpha1.RunSucceeded, time.Minute)
		Expect(done.Status.Server.Version).To(HavePrefix("PostgreSQL 15"))
		Expect(done.Status.Server.ThrottleApplies).To(Equal("NextTable"))
		Expect(done.Status.Foreground).To(BeNil(), "PostgreSQL keeps no latency histogram: no foreground")
		Expect(done.Status.Totals.PagesScanned).To(BeNumerically(">=", pages))
		Eventually(deadTuples).WithTimeout(10*time.Second).Should(BeZero(), "n_dead_tup after the run")

		By("a run that asks to resume: PostgreSQL starts its tables at block 0, and the status says so")
		resumed := postgresRunOf(ns, "resumed", vacuumv1alpha1.Throttle{})
		resumed.Spec.Resume = true
		Expect(cluster.Client.Create(suiteCtx, resumed)).To(Succeed())
		r := waitPhase(resumed, vacuumv1alpha1.RunSucceeded, time.Minute)
		Expect(r.Status.Message).To(ContainSubstring("cannot resume a vacuum: every table started at block 0"))
		GinkgoWriter.Printf("resumed run's message: %s\n", r.Status.Message)
	})
})
