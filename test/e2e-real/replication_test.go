package e2ereal

import (
	"context"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/test/e2eutil"
)

// secretValue is key of Secret ns/name.
func secretValue(ctx context.Context, ns, name, key string) string {
	GinkgoHelper()
	var s corev1.Secret
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
	Expect(s.Data).To(HaveKey(key), "Secret %s/%s", ns, name)
	return string(s.Data[key])
}

// clusterIPAddr is Service ns/name's ClusterIP with port 5432, which the host reaches through
// kube-proxy's rules.
func clusterIPAddr(ctx context.Context, ns, name string) string {
	GinkgoHelper()
	var svc corev1.Service
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc)).To(Succeed())
	Expect(svc.Spec.ClusterIP).NotTo(BeEmpty(), "Service %s/%s has no ClusterIP", ns, name)
	return net.JoinHostPort(svc.Spec.ClusterIP, "5432")
}

// The same story as the dev cluster's spec of the pair (test/e2e), told with e2eutil's helpers,
// here with real containers, the kubelet's Service variables pointing at ClusterIPs, and
// PostgreSQL 15's pgbench on the host reaching the primary through kube-proxy.
var _ = Describe("The primary and standby samples on the real cluster", func() {
	It("stream pgbench's writes through the primary's ClusterIP to a read-only standby whose tables end equal to the primary's, and the online run sample Succeeds showing the standby's lag", func(ctx SpecContext) {
		ns := newNamespace(ctx, "e2e-real-repl")
		By("local PVs for both StatefulSets' claims, owned by the servers' user")
		bindEmptyLocalVolume(ctx, ns, "data-orders-db-0")
		bindEmptyLocalVolume(ctx, ns, "data-orders-db-standby-0")

		By("applying the pair (two StatefulSets, their Services and Secrets) with kubectl, with the lane's image")
		env.kubectlRun(ctx, sampleWithLaneImage("engine_server_replication.yaml"), "apply", "-n", ns, "-f", "-")
		env.kubectlRun(ctx, nil, "-n", ns, "rollout", "status", "statefulset/orders-db", "--timeout=180s")
		primaryAddr, standbyAddr := clusterIPAddr(ctx, ns, "orders-db"), clusterIPAddr(ctx, ns, "orders-db-standby")
		vacuumUser := secretValue(ctx, ns, "orders-db-vacuum", "username")
		vacuumPassword := secretValue(ctx, ns, "orders-db-vacuum", "password")
		appPassword := e2eutil.UsersFilePassword(secretValue(ctx, ns, "orders-db-users", "users"), "app")
		primary := e2eutil.Connect(ctx, primaryAddr, "orders", vacuumUser, vacuumPassword, e2eutil.Wait{Timeout: time.Minute, Poll: 500 * time.Millisecond})

		By("pgbench -i on the primary through " + primaryAddr + " (no vacuum, so the run has every page to scan)")
		_, err := e2eutil.Pgbench(ctx, primaryAddr, "orders", "app", appPassword, "-i", "-s", "1", "-I", "dtgp")
		Expect(err).NotTo(HaveOccurred())

		By("the standby, started from the primary's base backup, serves read-only queries through " + standbyAddr)
		// It may have started before the primary listened, failed its base backup and be in
		// the kubelet's restart back-off: the wait covers one or two restarts.
		standby := e2eutil.ConnectStandbyWithAccounts(ctx, func() string { return standbyAddr }, "orders", vacuumUser, vacuumPassword,
			e2eutil.PgbenchAccountsPerScale, e2eutil.Wait{Timeout: 3 * time.Minute, Poll: time.Second})
		e2eutil.ExpectReadOnlyStandby(ctx, standby)

		By("pgbench's tpcb-like writes on the primary while the online run sample vacuums it")
		// The load outlasts the run (about 15 s at the sample's throttle, plus its pod's start)
		// and commits often enough that some of the run's once-a-second polls find WAL the
		// standby has not replayed yet: at 50 a second, every poll of one run found it caught up.
		bench := e2eutil.PgbenchInBackground(ctx, primaryAddr, "orders", "app", appPassword, "-n", "-c", "2", "-j", "1", "-T", "40", "-R", "200")
		time.Sleep(2 * time.Second) // some updates before the vacuum starts
		env.kubectlRun(ctx, sampleWithLaneImage("vacuum_v1alpha1_vacuumrun_replication.yaml"), "apply", "-n", ns, "-f", "-")
		done := watchRun(ctx, ns, "orders-db-online", vacuumv1alpha1.RunSucceeded, 3*time.Minute).run
		if st, ct := done.Status.StartTime, done.Status.CompletionTime; st != nil && ct != nil {
			GinkgoWriter.Printf("the online run took %s: %+v\n", ct.Sub(st.Time), done.Status.Totals)
		}
		e2eutil.ExpectReplicationOfOneStandby(done.Status.Replication)
		e2eutil.ExpectPgbenchSucceeded(bench, time.Minute)

		By("the standby's tables equal the primary's, row for row")
		e2eutil.ExpectPgbenchTablesEqual(ctx, primary, standby, e2eutil.Wait{Timeout: time.Minute, Poll: 500 * time.Millisecond})
	})
})
