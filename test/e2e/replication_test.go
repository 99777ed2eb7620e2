package e2e

import (
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/test/e2eutil"
)

// The primary and standby pair of config/samples on the dev cluster, applied with kubectl as
// written: the standby takes its base backup from the primary through the primary Service's
// variables, streams and replays its WAL and answers read-only queries, and the online run
// sample against the primary shows the standby's lag in its status. The real-cluster lane
// runs the same samples (test/e2e-real); both use e2eutil's helpers for the pair.

var _ = Describe("The primary and standby samples on the dev cluster", func() {
	It("stream pgbench's writes to a read-only standby whose tables end equal to the primary's, and the online run sample Succeeds showing the standby's lag", func() {
		needEndpoints()
		ns := newNamespace()
		By("applying the pair (two StatefulSets, their Services and Secrets) with kubectl as written")
		kubectlRun("apply", "-n", ns, "-f", samplePath("engine_server_replication.yaml"))
		primaryAddr := net.JoinHostPort(podOf(ns, "orders-db").Status.PodIP, "5432")
		vacuumUser := secretValue(ns, "orders-db-vacuum", "username")
		vacuumPassword := secretValue(ns, "orders-db-vacuum", "password")
		appPassword := e2eutil.UsersFilePassword(secretValue(ns, "orders-db-users", "users"), "app")
		primary := e2eutil.Connect(suiteCtx, primaryAddr, "orders", vacuumUser, vacuumPassword, e2eutil.Wait{Timeout: time.Minute, Poll: 200 * time.Millisecond})

		By("pgbench -i on the primary (no vacuum, so the run has every page to scan)")
		_, err := e2eutil.Pgbench(suiteCtx, primaryAddr, "orders", "app", appPassword, "-i", "-s", "1", "-I", "dtgp")
		Expect(err).NotTo(HaveOccurred())

		By("the standby, started from the primary's base backup, serves read-only queries")
		// It may have started before the primary's endpoint was ready (no Service variables
		// then), failed and been restarted: its address is the pod's as it runs now.
		standbyAddr := func() string { return net.JoinHostPort(podOf(ns, "orders-db-standby").Status.PodIP, "5432") }
		standby := e2eutil.ConnectStandbyWithAccounts(suiteCtx, standbyAddr, "orders", vacuumUser, vacuumPassword,
			e2eutil.PgbenchAccountsPerScale, e2eutil.Wait{Timeout: 2 * time.Minute, Poll: 500 * time.Millisecond})
		e2eutil.ExpectReadOnlyStandby(suiteCtx, standby)

		By("pgbench's tpcb-like writes on the primary while the online run sample vacuums it")
		// The load outlasts the run (about 15 s at the sample's throttle, plus its pod's start)
		// and commits often enough that some of the run's once-a-second polls find WAL the
		// standby has not replayed yet: at 50 a second, every poll of one run found it caught up.
		bench := e2eutil.PgbenchInBackground(suiteCtx, primaryAddr, "orders", "app", appPassword, "-n", "-c", "2", "-j", "1", "-T", "40", "-R", "200")
		time.Sleep(2 * time.Second) // some updates before the vacuum starts
		kubectlRun("apply", "-n", ns, "-f", samplePath("vacuum_v1alpha1_vacuumrun_replication.yaml"))
		run := &vacuumv1alpha1.VacuumRun{}
		Expect(cluster.Client.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "orders-db-online"}, run)).To(Succeed())
		done := waitPhase(run, vacuumv1alpha1.RunSucceeded, 2*time.Minute)
		if st, ct := done.Status.StartTime, done.Status.CompletionTime; st != nil && ct != nil {
			GinkgoWriter.Printf("the online run took %s: %+v\n", ct.Sub(st.Time), done.Status.Totals)
		}
		e2eutil.ExpectReplicationOfOneStandby(done.Status.Replication)
		e2eutil.ExpectPgbenchSucceeded(bench, time.Minute)

		By("the standby's tables equal the primary's, row for row")
		e2eutil.ExpectPgbenchTablesEqual(suiteCtx, primary, standby, e2eutil.Wait{Timeout: time.Minute, Poll: 500 * time.Millisecond})
	})
})
