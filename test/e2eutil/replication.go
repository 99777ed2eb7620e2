package e2eutil

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
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/pgtest"
)

// What the specs of the primary and standby samples (config/samples/engine_server_replication.yaml)
// share on every cluster they run on: pgbench against the pair, the standby's read-only face,
// the online run's status.replication, and the standby's tables compared with the primary's.

// PgbenchTables are pgbench's four tables, each with the columns that order all its rows.
var PgbenchTables = map[string]string{
	"pgbench_accounts": "aid",
	"pgbench_branches": "bid",
	"pgbench_tellers":  "tid",
	"pgbench_history":  "tid, bid, aid, delta, mtime",
}

// PgbenchAccountsPerScale is how many rows pgbench -i puts in pgbench_accounts per unit of -s.
const PgbenchAccountsPerScale = 100000

// UsersFilePassword is user's password in an engine server's users file (user:password lines,
// a replication marker optionally after the password).
func UsersFilePassword(users, user string) string {
	ginkgo.GinkgoHelper()
	for _, line := range strings.Split(users, "\n") {
		if pw, ok := strings.CutPrefix(line, user+":"); ok {
			return strings.Fields(pw)[0]
		}
	}
	ginkgo.Fail(fmt.Sprintf("no line for %s in the users file", user))
	return ""
}

// PgConfig is a session's configuration for database db at addr as user, without TLS, with
// application_name e2e-check.
func PgConfig(addr, db, user, password string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s/%s?sslmode=disable&application_name=e2e-check", addr, db))
	if err != nil {
		return nil, fmt.Errorf("session configuration for %s: %w", addr, err)
	}
	cfg.User, cfg.Password = user, password
	return cfg, nil
}

// Connect opens a session to database db at addr as user, retrying until the server accepts
// one within w, and closes it when the spec ends.
func Connect(ctx context.Context, addr, db, user, password string, w Wait) *pgx.Conn {
	ginkgo.GinkgoHelper()
	cfg, err := PgConfig(addr, db, user, password)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var c *pgx.Conn
	gomega.Eventually(func() error {
		c, err = pgx.ConnectConfig(ctx, cfg)
		return err
	}).WithTimeout(w.Timeout).WithPolling(w.Poll).Should(gomega.Succeed(), "the server at %s accepts sessions", addr)
	ginkgo.DeferCleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// ConnectStandbyWithAccounts waits within w until the standby at addr() (asked again at each
// try: a restarted pod has a new address) accepts a session to db and has replayed pgbench -i
// (pgbench_accounts holds accounts rows), and returns that session, closed when the spec ends.
func ConnectStandbyWithAccounts(ctx context.Context, addr func() string, db, user, password string, accounts int64, w Wait) *pgx.Conn {
	ginkgo.GinkgoHelper()
	var standby *pgx.Conn
	gomega.Eventually(func(g gomega.Gomega) {
		cfg, err := PgConfig(addr(), db, user, password)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := pgx.ConnectConfig(tctx, cfg)
		g.Expect(err).NotTo(gomega.HaveOccurred())
		var n int64
		if err := c.QueryRow(tctx, "SELECT count(*) FROM pgbench_accounts").Scan(&n); err != nil || n != accounts {
			_ = c.Close(context.Background())
			g.Expect(err).NotTo(gomega.HaveOccurred())
			g.Expect(n).To(gomega.Equal(accounts), "the standby has replayed pgbench -i")
		}
		standby = c
	}).WithTimeout(w.Timeout).WithPolling(w.Poll).Should(gomega.Succeed())
	ginkgo.DeferCleanup(func() { _ = standby.Close(context.Background()) })
	return standby
}

// ExpectReadOnlyStandby asserts that the session's server is a standby: pg_is_in_recovery()
// is true and a write to pgbench_branches fails with 25006 (read_only_sql_transaction).
func ExpectReadOnlyStandby(ctx context.Context, standby *pgx.Conn) {
	ginkgo.GinkgoHelper()
	var recovery bool
	gomega.Expect(standby.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovery)).To(gomega.Succeed())
	gomega.Expect(recovery).To(gomega.BeTrue(), "pg_is_in_recovery() on the standby")
	_, err := standby.Exec(ctx, "UPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1")
	var pgErr *pgconn.PgError
	gomega.Expect(errors.As(err, &pgErr)).To(gomega.BeTrue(), "a write on the standby fails with a server error: %v", err)
	gomega.Expect(pgErr.Code).To(gomega.Equal("25006"), "read_only_sql_transaction")
}

// Pgbench runs PostgreSQL 15's pgbench (Debian's, installed by pgtest when missing and root)
// against database db at addr as user, and returns its output.
func Pgbench(ctx context.Context, addr, db, user, password string, args ...string) (string, error) {
	tool, err := pgtest.Tool(ctx, "pgbench")
	if err != nil {
		return "", err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("pgbench against %q: %w", addr, err)
	}
	cmd := exec.CommandContext(ctx, tool, append(append([]string{"-h", host, "-p", port, "-U", user}, args...), db)...)
	cmd.Env = append(os.Environ(), "PGPASSWORD="+password, "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgbench %v against %s: %w\n%s", args, addr, err, out)
	}
	return string(out), nil
}

// PgbenchResult is what a pgbench run in the background returned.
type PgbenchResult struct {
	Out string
	Err error
}

// PgbenchInBackground starts Pgbench in a goroutine and returns the channel its result arrives on.
func PgbenchInBackground(ctx context.Context, addr, db, user, password string, args ...string) <-chan PgbenchResult {
	res := make(chan PgbenchResult, 1)
	go func() {
		defer ginkgo.GinkgoRecover()
		out, err := Pgbench(ctx, addr, db, user, password, args...)
		res <- PgbenchResult{out, err}
	}()
	return res
}

// ExpectPgbenchSucceeded waits within timeout for a background pgbench's result and asserts
// that it ran without a failed transaction.
func ExpectPgbenchSucceeded(res <-chan PgbenchResult, timeout time.Duration) {
	ginkgo.GinkgoHelper()
	var r PgbenchResult
	gomega.Eventually(res).WithTimeout(timeout).Should(gomega.Receive(&r))
	gomega.Expect(r.Err).NotTo(gomega.HaveOccurred())
	gomega.Expect(r.Out).To(gomega.ContainSubstring("number of failed transactions: 0"))
}

// TableRows is every row of table, ordered by order, each as its text.
func TableRows(ctx context.Context, c *pgx.Conn, table, order string) ([]string, error) {
	rows, err := c.Query(ctx, fmt.Sprintf("SELECT * FROM %s ORDER BY %s", table, order))
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

// ExpectPgbenchTablesEqual waits within w until each of pgbench's tables on the standby equals
// the primary's row for row, and asserts that pgbench committed transactions (its history is
// not empty).
func ExpectPgbenchTablesEqual(ctx context.Context, primary, standby *pgx.Conn, w Wait) {
	ginkgo.GinkgoHelper()
	for table, order := range PgbenchTables {
		want, err := TableRows(ctx, primary, table, order)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Eventually(func() ([]string, error) { return TableRows(ctx, standby, table, order) }).
			WithTimeout(w.Timeout).WithPolling(w.Poll).Should(gomega.Equal(want), "%s on the standby", table)
		if table == "pgbench_history" {
			gomega.Expect(want).NotTo(gomega.BeEmpty(), "pgbench committed transactions")
		}
	}
}

// ExpectReplicationOfOneStandby asserts what an online run of a primary with one streaming
// standby under writes shows in status.replication: the standby counted, a lag in bytes seen
// at some poll, replay lags that parse as durations, and the printed forms made of them.
func ExpectReplicationOfOneStandby(r *vacuumv1alpha1.ReplicationStatus) {
	ginkgo.GinkgoHelper()
	gomega.Expect(r).NotTo(gomega.BeNil(), "status.replication of a run against a primary with a standby")
	ginkgo.GinkgoWriter.Printf("status.replication: standbys %d, lag %s, max lag %s\n", r.Standbys, r.Lag, r.MaxLag)
	gomega.Expect(r.Standbys).To(gomega.BeEquivalentTo(1), "the one standby in pg_stat_replication")
	gomega.Expect(r.MaxLagBytes).To(gomega.BeNumerically(">", 0), "WAL written on the primary under load was behind on the standby at some poll")
	gomega.Expect(r.MaxLagBytes).To(gomega.BeNumerically(">=", r.LagBytes))
	for _, lag := range []string{r.ReplayLag, r.MaxReplayLag} {
		_, err := time.ParseDuration(lag)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "replay lag %q is a duration", lag)
	}
	gomega.Expect(r.Lag).To(gomega.Equal(vacuumv1alpha1.FormatBytes(r.LagBytes) + "/" + r.ReplayLag))
	gomega.Expect(r.MaxLag).To(gomega.Equal(vacuumv1alpha1.FormatBytes(r.MaxLagBytes) + "/" + r.MaxReplayLag))
}
