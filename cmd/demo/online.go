package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/devcluster"
)

// The online part's samples: the engine server (StatefulSet, Service shop-db, Secrets), its
// load generator, and the online policy.
const (
	engineServerSample = "config/samples/engine_server.yaml"
	loadSample         = "config/samples/load_generator.yaml"
	onlinePolicySample = "config/samples/vacuum_v1alpha1_vacuumpolicy_online.yaml"
	// onlineRows is the sample load's --rows: the demo fills and bloats orders to that size
	// before the load starts (the load then finds it filled).
	onlineRows = 50000
)

// onlineDemo applies the engine-server sample, bloats its table orders, starts the sample
// load beside it and runs the online policy once (its schedule dropped, its throttle slowed
// so the run lasts long enough to watch), showing the live table with the foreground's
// columns. It returns the run, ended, and the highest foreground p99 its status showed while
// it ran.
func onlineDemo(ctx context.Context, c *devcluster.Cluster, root string, out io.Writer, live bool,
	step func(string, ...any)) (*vacuumv1alpha1.VacuumRun, *vacuumv1alpha1.ForegroundStatus, error) {
	if c.Loopback {
		return nil, nil, fmt.Errorf("the local node's pods have loopback addresses here (routing %s needs root), so the Service shop-db can have no endpoints: run the demo as root for its online part", c.PodCIDR)
	}
	step("the online part: applying %s (the engine server as a StatefulSet behind the Service shop-db)", engineServerSample)
	if err := kubectlApply(ctx, c, root, engineServerSample); err != nil {
		return nil, nil, err
	}
	addr, err := serverAddress(ctx, c.Client)
	if err != nil {
		return nil, nil, err
	}
	conn, err := connectSample(ctx, c.Client, addr)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	step("server shop-db-0 on %s; filling orders with %d rows, two dead versions each", addr, onlineRows)
	if err := bloatOrders(ctx, conn); err != nil {
		return nil, nil, err
	}
	step("applying %s: point lookups and updates at 200/s through the Service", loadSample)
	if err := kubectlApply(ctx, c, root, loadSample); err != nil {
		return nil, nil, err
	}
	if err := waitLoad(ctx, conn); err != nil {
		return nil, nil, err
	}
	step("the load runs; the online policy %s, once now, throttled to 200 cost units/s", onlinePolicySample)
	p, err := onlinePolicy(filepath.Join(root, onlinePolicySample))
	if err != nil {
		return nil, nil, err
	}
	p.Namespace = namespace
	if err := c.Client.Create(ctx, p); err != nil {
		return nil, nil, fmt.Errorf("create policy %s: %w", p.Name, err)
	}
	runs, peak, err := watchRunsPeak(ctx, c.Client, namespace, []string{p.Name}, out, live)
	if err != nil {
		return nil, nil, err
	}
	return &runs[0], peak, nil
}

// onlinePolicy is the online sample policy to run once now: no schedule (a policy without one
// runs once, as <name>-once), and a slower throttle than the nightly sample's, so that the
// demo's small table takes seconds rather than milliseconds.
func onlinePolicy(path string) (*vacuumv1alpha1.VacuumPolicy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var p vacuumv1alpha1.VacuumPolicy
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&p); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	p.Spec.Schedule, p.Spec.TimeZone = "", ""
	p.Spec.Throttle.CostDelay = &metav1.Duration{Duration: 10 * time.Millisecond}
	p.Spec.Throttle.CostLimit = ptr.To(int32(2))
	return &p, nil
}

// kubectlApply applies the files with kubectl in the demo's namespace.
func kubectlApply(ctx context.Context, c *devcluster.Cluster, root string, files ...string) error {
	args := []string{"apply", "-n", namespace}
	for _, f := range files {
		args = append(args, "-f", filepath.Join(root, f))
	}
	return kubectl(ctx, c, args...)
}

// serverAddress waits for the pod shop-db-0 to run and returns its PostgreSQL address.
func serverAddress(ctx context.Context, c client.Client) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var pod corev1.Pod
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "shop-db-0"}, &pod)
		if err == nil && pod.Status.Phase == corev1.PodRunning && pod.Status.PodIP != "" {
			return net.JoinHostPort(pod.Status.PodIP, "5432"), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("pod shop-db-0 is not running: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// connectSample connects as the sample's vacuum role (Secret shop-db-vacuum), retrying while
// the server starts. Its application name is not counted as foreground.
func connectSample(ctx context.Context, c client.Client, addr string) (*pgx.Conn, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "shop-db-vacuum"}, &s); err != nil {
		return nil, fmt.Errorf("read Secret shop-db-vacuum: %w", err)
	}
	cfg, err := pgx.ParseConfig("postgres://" + addr + "/shop?sslmode=disable&application_name=vacuum-runner-demo")
	if err != nil {
		return nil, err
	}
	cfg.User, cfg.Password = string(s.Data["username"]), string(s.Data["password"])
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil || time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("connect to the sample server at %s: %w", addr, err)
			}
			return conn, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// bloatOrders creates the load's table as the load would and leaves two dead versions of
// every row, before the load starts (so no update of the demo's waits on the load's).
func bloatOrders(ctx context.Context, conn *pgx.Conn) error {
	for _, sql := range []string{
		"CREATE TABLE orders (id bigint PRIMARY KEY, n bigint NOT NULL)",
		fmt.Sprintf("INSERT INTO orders SELECT g, 0 FROM generate_series(1, %d) g", onlineRows),
		"UPDATE orders SET n = n",
		"UPDATE orders SET n = n",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("%s: %w", sql, err)
		}
	}
	return nil
}

// waitLoad waits until the server's foreground window holds five seconds of the load (the
// baseline the run takes before its first VACUUM).
func waitLoad(ctx context.Context, conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var n int64
		_ = conn.QueryRow(ctx, "SELECT count FROM vacuumops_statement_latency WHERE kind = 'all'").Scan(&n)
		if n >= 1000 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the load's statements did not reach the server: %w", ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// printForeground compares the foreground's p99 before the vacuum (the run's baseline) with
// the highest its status showed during it.
func printForeground(out io.Writer, run *vacuumv1alpha1.VacuumRun, peak *vacuumv1alpha1.ForegroundStatus) {
	f := run.Status.Foreground
	if f == nil || f.BaselineP99 == "" || peak == nil {
		_, _ = fmt.Fprintf(out, "Foreground of %s: no figures (the server reported none)\n\n", run.Name)
		return
	}
	_, _ = fmt.Fprintf(out, "Foreground of %s (the server's own latency of its other sessions, over 10 s windows):\n", run.Name)
	_, _ = fmt.Fprintf(out, "  p99 before the vacuum: %s\n", f.BaselineP99)
	_, _ = fmt.Fprintf(out, "  p99 during it, at most: %s (%s the baseline; p50 %s, %d statements/s)\n\n",
		peak.P99, dash(peak.P99VsBaseline), dash(peak.P50), peak.StatementsPerSecond)
}
