package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
)

// The primary and standby pair of config/samples on the dev cluster, applied with kubectl as
// written: the standby takes its base backup from the primary through the primary Service's
// variables, streams and replays its WAL and answers read-only queries, and the online run
// sample against the primary shows the standby's lag in its status.

// pgbenchTables are pgbench's four tables, each with the columns that order all its rows.
var pgbenchTables = map[string]string{
	"pgbench_accounts": "aid",
	"pgbench_branches": "bid",
	"pgbench_tellers":  "tid",
	"pgbench_history":  "tid, bid, aid, delta, mtime",
}

// usersFilePassword is user's password in the users file of the Secret name (user:password lines).
func usersFilePassword(ns, name, user string) string {
	GinkgoHelper()
	for _, line := range strings.Split(secretValue(ns, name, "users"), "\n") {
		if pw, ok := strings.CutPrefix(line, user+":"); ok {
			return strings.Fields(pw)[0]
		}
	}
	Fail(fmt.Sprintf("no line for %s in Secret %s/%s's users file", user, ns, name))
	return ""
}

// ordersConn is a session to the pair's database orders at addr as user.
func ordersConn(addr, user, password string) *pgx.Conn {
	GinkgoHelper()
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s/orders?sslmode=disable&application_name=e2e-check", addr))
	Expect(err).NotTo(HaveOccurred())
	cfg.User, cfg.Password = user, password
	var c *pgx.Conn
	Eventually(func() error {
		c, err = pgx.ConnectConfig(suiteCtx, cfg)
		return err
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the server at %s accepts sessions", addr)
	DeferCleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// tableRows is every row of table, ordered by order, each as its text.
func tableRows(c *pgx.Conn, table, order string) ([]string, error) {
	rows, err := c.Query(suiteCtx, fmt.Sprintf("SELECT * FROM %s ORDER BY %s", table, order))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("read a row of %s: %w", table, err)
		}
		out = append(out, fmt.Sprint(v...))
	}
	return out, rows.Err()
}

// pgbench runs PostgreSQL 15's pgbench against addr's database orders as app.
func pgbench(ctx context.Context, addr, password string, args ...string) (string, error) {
	tool, err := pgtest.Tool(ctx, "pgbench")
	if err != nil {
		return "", err
	}
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.CommandContext(ctx, tool, append(append([]string{"-h", host, "-p", port, "-U", "app"}, args...), "orders")...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgbench %v: %w\n%s", args, err, out)
	}
	return string(out), nil
}

var _ = Describe("The primary and standby samples on the dev cluster", func() {
	It("stream pgbench's writes to a read-only standby whose tables end equal to the primary's, and the online run sample Succeeds showing the standby's lag", func() {
		needEndpoints()
		ns := newNamespace()
		By("applying the pair (two StatefulSets, their Services and Secrets) with kubectl as written")
		kubectlRun("apply", "-n", ns, "-f", samplePath("engine_server_replication.yaml"))
		primaryAddr := net.JoinHostPort(podOf(ns, "orders-db").Status.PodIP, "5432")
		vacuumUser := secretValue(ns, "orders-db-vacuum", "username")
		vacuumPassword := secretValue(ns, "orders-db-vacuum", "password")
		appPassword := usersFilePassword(ns, "orders-db-users", "app")
		primary := ordersConn(primaryAddr, vacuumUser, vacuumPassword)

		By("pgbench -i on the primary (no vacuum, so the run has every page to scan)")
		_, err := pgbench(suiteCtx, primaryAddr, appPassword, "-i", "-s", "1", "-I", "dtgp")
		Expect(err).NotTo(HaveOccurred())

		By("the standby, started from the primary's base backup, serves read-only queries")
		// It may have started before the primary's endpoint was ready (no Service variables
		// then), failed and been restarted: its address is the pod's as it runs now.
		var standby *pgx.Conn
		Eventually(func(g Gomega) {
			addr := net.JoinHostPort(podOf(ns, "orders-db-standby").Status.PodIP, "5432")
			cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s/orders?sslmode=disable&application_name=e2e-check", addr))
			g.Expect(err).NotTo(HaveOccurred())
			cfg.User, cfg.Password = vacuumUser, vacuumPassword
			ctx, cancel := context.WithTimeout(suiteCtx, 5*time.Second)
			defer cancel()
			c, err := pgx.ConnectConfig(ctx, cfg)
			g.Expect(err).NotTo(HaveOccurred())
			var n int64
			if err := c.QueryRow(ctx, "SELECT count(*) FROM pgbench_accounts").Scan(&n); err != nil || n != 100000 {
				_ = c.Close(context.Background())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(n).To(BeEquivalentTo(100000), "the standby has replayed pgbench -i")
			}
			standby = c
		}).WithTimeout(2 * time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
		DeferCleanup(func() { _ = standby.Close(context.Background()) })
		var recovery bool
		Expect(standby.QueryRow(suiteCtx, "SELECT pg_is_in_recovery()").Scan(&recovery)).To(Succeed())
		Expect(recovery).To(BeTrue())
		_, err = standby.Exec(suiteCtx, "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1")
		var pgErr *pgconn.PgError
		Expect(errors.As(err, &pgErr)).To(BeTrue(), "a write on the standby fails with a server error: %v", err)
		Expect(pgErr.Code).To(Equal("25006"), "read_only_sql_transaction")

		By("pgbench's tpcb-like writes on the primary while the online run sample vacuums it")
		type result struct {
			out string
			err error
		}
		bench := make(chan result, 1)
		go func() {
			defer GinkgoRecover()
			out, err := pgbench(suiteCtx, primaryAddr, appPassword, "-n", "-c", "2", "-j", "1", "-T", "30", "-R", "50")
			bench <- result{out, err}
		}()
		time.Sleep(2 * time.Second) // some updates before the vacuum starts
		kubectlRun("apply", "-n", ns, "-f", samplePath("vacuum_v1alpha1_vacuumrun_replication.yaml"))
		run := &vacuumv1alpha1.VacuumRun{}
		Expect(cluster.Client.Get(suiteCtx, client.ObjectKey{Namespace: ns, Name: "orders-db-online"}, run)).To(Succeed())
		done := waitPhase(run, vacuumv1alpha1.RunSucceeded, 2*time.Minute)
		if st, ct := done.Status.StartTime, done.Status.CompletionTime; st != nil && ct != nil {
			GinkgoWriter.Printf("the online run took %s: %+v\n", ct.Sub(st.Time), done.Status.Totals)
		}
		r := done.Status.Replication
		Expect(r).NotTo(BeNil(), "status.replication of a run against a primary with a standby")
		GinkgoWriter.Printf("status.replication: standbys %d, lag %s, max lag %s\n", r.Standbys, r.Lag, r.MaxLag)
		Expect(r.Standbys).To(BeEquivalentTo(1), "the one standby in pg_stat_replication")
		Expect(r.MaxLagBytes).To(BeNumerically(">", 0), "WAL written on the primary under load was behind on the standby at some poll")
		Expect(r.MaxLagBytes).To(BeNumerically(">=", r.LagBytes))
		for _, lag := range []string{r.ReplayLag, r.MaxReplayLag} {
			_, err := time.ParseDuration(lag)
			Expect(err).NotTo(HaveOccurred(), "replay lag %q is a duration", lag)
		}
		Expect(r.Lag).To(Equal(vacuumv1alpha1.FormatBytes(r.LagBytes) + "/" + r.ReplayLag))
		Expect(r.MaxLag).To(Equal(vacuumv1alpha1.FormatBytes(r.MaxLagBytes) + "/" + r.MaxReplayLag))

		var res result
		Eventually(bench).WithTimeout(time.Minute).Should(Receive(&res))
		Expect(res.err).NotTo(HaveOccurred())
		Expect(res.out).To(ContainSubstring("number of failed transactions: 0"))

		By("the standby's tables equal the primary's, row for row")
		for table, order := range pgbenchTables {
			want, err := tableRows(primary, table, order)
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() ([]string, error) { return tableRows(standby, table, order) }).
				WithTimeout(time.Minute).WithPolling(500*time.Millisecond).Should(Equal(want), "%s on the standby", table)
			if table == "pgbench_history" {
				Expect(len(want)).To(BeNumerically(">", 0), "pgbench committed transactions")
			}
		}
	})
})
