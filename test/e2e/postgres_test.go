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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/localnode"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
	"github.com/vacuumops/vacuum-operator/internal/runner/runnerwire"
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
	// The cleartext role's line comes first (pg_hba.conf's first match wins): a server that
	// asks that role for a cleartext password, for the runner to refuse.
	_, err = f.WriteString("host all " + pgtest.CleartextUser + " " + cluster.PodCIDR + " password\n" +
		"host all all " + cluster.PodCIDR + " scram-sha-256\n")
	Expect(err).NotTo(HaveOccurred())
	Expect(f.Close()).To(Succeed())
	conn, err := srv.Connect(suiteCtx, "postgres")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(suiteCtx, "SELECT pg_reload_conf()")
	Expect(err).NotTo(HaveOccurred())

	Expect(cluster.Client.Create(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg-vacuum"},
		StringData: map[string]string{"username": pgtest.Superuser, "password": pgtest.Password}})).To(Succeed())
	Expect(cluster.Client.Create(suiteCtx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pg-cleartext"},
		StringData: map[string]string{"username": pgtest.CleartextUser, "password": pgtest.Password}})).To(Succeed())
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
	It("takes a bloated table's dead tuples to 0 with live progress, says a resumed run starts at block 0, shrinks a table with Full, "+
		"cancels the backend of a deleted run, and refuses what PostgreSQL 15 cannot honour and a cleartext password", func() {
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

		By("a Full run: pg_relation_size shrinks, the row count stays, progress from pg_stat_progress_cluster in status")
		// An index on an expression made slow (a millisecond a row) once the index exists
		// makes the rebuild of the 6,000 live rows last several of the runner's polls.
		_, err = pg.Exec(suiteCtx, `CREATE TABLE wide (id int PRIMARY KEY, pad text NOT NULL);
			INSERT INTO wide SELECT g, repeat('y', 200) FROM generate_series(1, 12000) g;
			DELETE FROM wide WHERE id % 2 = 0;
			CREATE FUNCTION slow(int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT $1';
			CREATE INDEX wide_slow ON wide (slow(id));
			CREATE OR REPLACE FUNCTION slow(int) RETURNS int IMMUTABLE LANGUAGE plpgsql
				AS $$ BEGIN PERFORM pg_sleep(0.001); RETURN $1; END $$`)
		Expect(err).NotTo(HaveOccurred())
		sizeBefore, rows := scalarOf(pg, "SELECT pg_relation_size('wide')"), scalarOf(pg, "SELECT count(*) FROM wide")
		full := postgresRunOf(ns, "full", vacuumv1alpha1.Throttle{})
		full.Spec.Mode = vacuumv1alpha1.VacuumModeFull
		full.Spec.Target.Tables = []string{"wide"}
		Expect(cluster.Client.Create(suiteCtx, full)).To(Succeed())
		clusterPhases := map[string]bool{string(runnerwire.PhaseRewritingHeap): true, string(runnerwire.PhaseRebuildingIndexes): true}
		var seen []string
		Eventually(func() bool {
			r := getRun(full)
			if p := r.Status.VacuumPhase; clusterPhases[p] && (len(seen) == 0 || seen[len(seen)-1] != p) {
				seen = append(seen, p)
			}
			return r.Status.Phase.IsFinal()
		}).WithTimeout(2 * time.Minute).WithPolling(100 * time.Millisecond).Should(BeTrue())
		done = waitPhase(full, vacuumv1alpha1.RunSucceeded, time.Second)
		GinkgoWriter.Printf("Full: phases from pg_stat_progress_cluster seen in status %v\n", seen)
		Expect(seen).NotTo(BeEmpty(), "a phase of pg_stat_progress_cluster in status while the Full run ran")
		sizeAfter := scalarOf(pg, "SELECT pg_relation_size('wide')")
		GinkgoWriter.Printf("Full: pg_relation_size %d -> %d, %d rows\n", sizeBefore, sizeAfter, rows)
		Expect(sizeAfter).To(BeNumerically("<=", sizeBefore*6/10), "VACUUM FULL of a half-deleted table shrinks it to about half")
		Expect(scalarOf(pg, "SELECT count(*) FROM wide")).To(Equal(rows), "VACUUM FULL keeps every live row")
		Expect(done.Status.Totals.PagesRemoved).To(Equal((sizeBefore - sizeAfter) / 8192))

		By("deleting a running run: the runner's SIGTERM cancels its backend, no VACUUM is left in pg_stat_activity")
		_, err = pg.Exec(suiteCtx, "UPDATE bloat SET pad = pad")
		Expect(err).NotTo(HaveOccurred())
		slow := postgresRunOf(ns, "deleted", costThrottle(100*time.Millisecond, 1)) // 10 units/s: hours for this table
		Expect(cluster.Client.Create(suiteCtx, slow)).To(Succeed())
		activeVacuums := func() int64 {
			return scalarOf(pg, "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query ILIKE 'vacuum%'")
		}
		Eventually(func() int64 { return scalarOf(pg, "SELECT count(*) FROM pg_stat_progress_vacuum") }).
			WithTimeout(time.Minute).WithPolling(100 * time.Millisecond).Should(BeEquivalentTo(1))
		Expect(activeVacuums()).To(BeEquivalentTo(1))
		Expect(cluster.Client.Delete(suiteCtx, slow)).To(Succeed())
		Eventually(activeVacuums).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(BeZero())
		Eventually(func() bool {
			return apierrors.IsNotFound(cluster.Client.Get(suiteCtx, client.ObjectKeyFromObject(slow), &vacuumv1alpha1.VacuumRun{}))
		}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(BeTrue())
		Eventually(deadTuples).WithTimeout(10*time.Second).Should(BeNumerically(">", 0), "the cancelled VACUUM did not finish the table")
		vacuums := scalarOf(pg, "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'bloat'")

		By("a written byte-rate limit or ringSize fails at once with BadInput naming the field and the server; a server asking for a cleartext password is refused")
		byteRate := postgresRunOf(ns, "byte-rate", vacuumv1alpha1.Throttle{MaxWriteBytesPerSecond: ptr.To(resource.MustParse("8Mi"))})
		ring := postgresRunOf(ns, "ring", vacuumv1alpha1.Throttle{})
		ring.Spec.RingSize = ptr.To(resource.MustParse("256Ki"))
		cleartext := postgresRunOf(ns, "cleartext", vacuumv1alpha1.Throttle{})
		cleartext.Spec.Target.Server.CredentialsSecret.Name = "pg-cleartext"
		refused := []struct {
			run       *vacuumv1alpha1.VacuumRun
			reason    string
			say, also string
		}{
			{byteRate, vacuumv1alpha1.ReasonBadInput, "maxWriteBytesPerSecond", "PostgreSQL 15"},
			{ring, vacuumv1alpha1.ReasonBadInput, "ringSize", "PostgreSQL 15"},
			{cleartext, "", "server requested password authentication", "scram-sha-256"},
		}
		for _, c := range refused { // all at once: each fails on its own
			Expect(cluster.Client.Create(suiteCtx, c.run)).To(Succeed())
		}
		for _, c := range refused {
			r := waitPhase(c.run, vacuumv1alpha1.RunFailed, time.Minute)
			cond := meta.FindStatusCondition(r.Status.Conditions, vacuumv1alpha1.ConditionFailed)
			Expect(cond).NotTo(BeNil())
			GinkgoWriter.Printf("%s: %s: %s\n", c.run.Name, cond.Reason, r.Status.Message)
			if c.reason != "" {
				Expect(cond.Reason).To(Equal(c.reason))
			}
			Expect(r.Status.Message).To(And(ContainSubstring(c.say), ContainSubstring(c.also)))
		}
		Expect(scalarOf(pg, "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'bloat'")).To(Equal(vacuums),
			"the refused runs vacuumed nothing")
	})
})
