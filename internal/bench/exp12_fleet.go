package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"gonum.org/v1/plot/plotter"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/controllers"
	"github.com/vacuumops/vacuum-operator/internal/devcluster"
	"github.com/vacuumops/vacuum-operator/internal/engine"
	"github.com/vacuumops/vacuum-operator/internal/managerstat"
)

// Experiment 12: the operator at fleet scale. The dev cluster's control plane (envtest's
// kube-apiserver and etcd, kube-controller-manager's garbage collector) and its local node,
// which runs runner pods as real vacuum-runner processes on tiny volumes; the manager as a
// separate process built from ./cmd/manager, started afresh for each fleet size. N
// VacuumPolicies on staggered "@every" schedules (created evenly over one period, so their
// ticks are spread over it), measured from outside: reconcile latency from
// controller-runtime's histograms and API requests from client-go's counters (both scraped
// from the manager's /metrics), Go heap (after a forced GC, through --pprof-bind-address)
// and RSS and CPU from /proc, and each tick's delay to its run's pod from the objects.

const (
	fleetTable         = "exp12_fleet"
	fleetRequestsTable = "exp12_requests"
	fleetAPITable      = "exp12_apiserver_requests"
	fleetNoNodeLabel   = "bench.vacuumops.io/no-such-node"
	reconcileMetric    = "controller_runtime_reconcile_time_seconds"
	requestsMetric     = "rest_client_requests_total"
	queueMetric        = "workqueue_queue_duration_seconds"
	depthMetric        = "workqueue_depth"
	latencyMetric      = "rest_client_request_duration_seconds"
	limiterMetric      = "rest_client_rate_limiter_duration_seconds"
	heapMetric         = "go_memstats_heap_alloc_bytes"
	apiserverMetric    = "apiserver_request_total"
	fleetRows          = 300 // rows of the tiny volume's one table
)

// Goals of the issue, at the largest fleet.
const (
	fleetGoalReconcileMs   = 50
	fleetGoalKiBPerPolicy  = 50
	fleetGoalTickToPodSecs = 2
)

// fleetColumns are the columns of the experiment's main table (the first is the label).
var fleetColumns = []string{"fleet", "policies", "real_pod_policies", "seconds", "runs", "pods",
	"policy_reconciles", "policy_p50_ms", "policy_p99_ms", "run_reconciles", "run_p50_ms", "run_p99_ms",
	"requests", "requests_per_run", "heap_idle_mib", "heap_mib", "heap_kib_per_policy",
	"rss_idle_mib", "rss_mib", "rss_kib_per_policy", "cpu_s", "cpu_ms_per_run", "cpu_cores",
	"tick_to_run_p99_s", "tick_to_pod_ts_p99_s", "tick_to_pod_p50_s", "tick_to_pod_p99_s", "tick_to_pod_max_s", "no_pod_runs",
	"policy_queue_mean_ms", "run_queue_mean_ms", "policy_depth_max", "run_depth_max",
	"request_mean_ms", "request_p99_ms", "limiter_p99_ms", "control_plane_cores",
	"ticks_per_s", "apiserver_cores", "etcd_cores", "node_cores"}

// fleetLabel is the table row of a fleet of n policies.
func fleetLabel(n int) string { return strconv.Itoa(n) }

// fleetRateLabel is the table row of a fleet of n policies on a period other than the
// sizes' FleetPeriod ("1000@1m40s"); rows labelled so are left out of the curve and the goals.
func fleetRateLabel(n int, period time.Duration) string { return fmt.Sprintf("%d@%s", n, period) }

// isRateRow says whether a row of the fleet table is one of FleetRatePeriods'.
func isRateRow(row []string) bool { return len(row) > 0 && strings.Contains(row[0], "@") }

// fleetSample is what is read of the manager at one moment.
type fleetSample struct {
	at   time.Time
	m    managerstat.Sample
	proc managerstat.Proc
	cp   managerstat.Proc // the control plane: kube-apiserver and etcd together
	// each of the control plane's processes, in controlPlaneNames' order, and this process
	// (the local node, its runner processes once waited for, the experiment's watches)
	cpEach []managerstat.Proc
	self   managerstat.Proc
}

// controlPlaneNames are the processes whose CPU is the control plane's: where a reconcile
// that waits on the API server spends its time.
var controlPlaneNames = []string{"kube-apiserver", "etcd"}

// fleetManager is a manager process of the experiment.
type fleetManager struct {
	cmd                  *exec.Cmd
	done                 chan struct{}
	metrics, pprof, prob string
	cpPids               []int // the control plane's processes (children of this one)
}

// fleetSeen is when the experiment's watch first saw a run and its pod.
type fleetSeen struct {
	mu   sync.Mutex
	tick map[string]time.Time // run -> its scheduled tick
	pod  map[string]time.Time // run -> first sight of its pod
	podC map[string]time.Time // run -> its pod's creationTimestamp
}

func runFleet(ctx context.Context, r *runner) (*Section, error) {
	sz, err := fleetSizesFromEnv(r.sz)
	if err != nil {
		return nil, err
	}
	saved := r.sz
	r.sz = sz
	defer func() { r.sz = saved }()
	// envtest logs through controller-runtime's logger, which complains (with a stack) when
	// nobody has set one.
	ctrllog.SetLogger(logr.Discard())
	repo, err := devcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(r.work, "fleet-bin")
	start := time.Now()
	if err := fleetBinaries(ctx, repo, bin, "manager", "vacuum-runner"); err != nil {
		return nil, err
	}
	r.logf("  built manager and vacuum-runner in %s", time.Since(start).Round(time.Millisecond))
	tmpl := filepath.Join(r.work, "fleet-template")
	if err := fleetVolume(ctx, filepath.Join(bin, "vacuum-runner"), tmpl); err != nil {
		return nil, err
	}
	c, err := devcluster.Start(ctx, devcluster.Options{RepoRoot: repo, BinDir: bin, NoManager: true,
		StateDir: filepath.Join(r.work, "fleet-cluster")})
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Stop() }()
	sec := &Section{Title: fleetText.title, Claim: fleetText.claim, Setup: fleetSetup(sz)}
	tb := NewTable(fleetTable, 1, fleetColumns...)
	// API requests per run by HTTP method (a list is a GET): which requests a run costs.
	tbReq := NewTable(fleetRequestsTable, 2, "fleet", "method", "policies", "requests", "requests_per_run")
	// Every client's requests as kube-apiserver counted them, by verb and resource: which
	// objects and which status writes a run costs.
	tbAPI := NewTable(fleetAPITable, 3, "fleet", "verb", "resource", "requests", "requests_per_run")
	sec.Tables = append(sec.Tables, tb, tbReq, tbAPI)
	tbs := fleetTables{main: tb, req: tbReq, api: tbAPI}
	for i, n := range sz.FleetScales {
		last := i == len(sz.FleetScales)-1
		var periods []time.Duration
		if last {
			periods = append(periods, sz.FleetRatePeriods...)
		}
		for _, p := range append(periods, sz.FleetPeriod) {
			if err := r.fleetOnce(ctx, c, bin, tmpl, n, p, last && p == sz.FleetPeriod, tbs); err != nil {
				return nil, fmt.Errorf("%d policies every %s: %w", n, p, err)
			}
		}
	}
	if err := r.fleetPlots(sec, tb); err != nil {
		return nil, err
	}
	sec.Findings, sec.Rules, sec.Verdict, err = fleetFindings(tablesOf(sec.Tables))
	if err != nil {
		return nil, err
	}
	sec.Caveats = []string{
		"Reconcile quantiles are estimated from controller-runtime's buckets (5, 10, 25, 50, 100 ms, ...) as " +
			"histogram_quantile does, linearly within a bucket: a p99 of 37 ms means 'in (25, 50] ms'.",
		sentence("At most %d policies of a fleet get real runner pods (every k-th policy, so they are spread over the "+
			"period): the local node runs each as a vacuum-runner process, and on the project's 2-core machine "+
			"more would measure the node, not the manager. The other policies' runner pods name a node "+
			"label no node has (spec.runner.nodeSelector), so they stay Pending until podStartTimeoutSeconds "+
			"(%d s) fails their run: the manager does the same work per tick for them (run, token Secret, volume "+
			"Lease, pod, its end, the policy's status) except polling a running pod's progress.",
			sz.FleetRealPods, fleetPodStartTimeout(sz)),
		"Tick to pod is measured twice: by the pod's creationTimestamp, whose whole seconds the API server " +
			"sets (tick_to_run_p99_s is the run's, the same way), and by when the experiment's own watch first " +
			"saw the pod (tick_to_pod_*, milliseconds, an upper bound: it includes the watch's delivery). A " +
			"tick whose run or pod did not exist at the end counts with the delay up to the end (no_pod_runs).",
		sentence("%s counts every client's requests as kube-apiserver's %s counts them (the manager's, the local "+
			"node's pod status writes and events, the garbage collector's, the experiment's own watches), over the "+
			"window after the last policy is created, divided by the runs whose tick fell in that window; "+
			"rows under 0.01 a run and watches are left out.", fleetAPITable, apiserverMetric),
		"Memory per policy is the growth over the idle manager (0 policies, caches synced), divided by the " +
			"policies: heap after a forced GC (/debug/pprof/heap?gc=1, then go_memstats_heap_alloc_bytes), and RSS, " +
			"which a Go process rarely gives back, so its growth is an upper bound of what the fleet costs. " +
			"At the smallest fleet the growth can be smaller than what the idle heap moves between two samples, " +
			"so its figure per policy can even be negative: only the largest fleet's decides the goal.",
	}
	return sec, nil
}

// fleetPodStartTimeout is the podStartTimeoutSeconds of the policies without real pods: half
// a period, so each tick finds its last run ended.
func fleetPodStartTimeout(sz Sizes) int64 { return max(int64(sz.FleetPeriod/time.Second)/2, 1) }

// fleetVolume makes the tiny data directory every real pod's volume is a copy of.
func fleetVolume(ctx context.Context, runner, dir string) error {
	for _, args := range [][]string{
		{"init", "--data", dir},
		{"bloat", "--data", dir, "--table", "t", "--rows", strconv.Itoa(fleetRows), "--payload-bytes", "40",
			"--dead-fraction", "0.2", "--indexes", "1"},
	} {
		if out, err := exec.CommandContext(ctx, runner, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("vacuum-runner %s: %w: %s", args[0], err, out)
		}
	}
	return nil
}

// fleetTables are the experiment's tables.
type fleetTables struct{ main, req, api *Table }

// fleetOnce measures a fleet of n policies on schedules of the given period with a fresh
// manager, and adds its rows. Unless last, it deletes the fleet afterwards, so the next
// manager's caches hold only its own.
func (r *runner) fleetOnce(ctx context.Context, c *devcluster.Cluster, bin, tmpl string, n int, period time.Duration, last bool, tbs fleetTables) error {
	sz := r.sz
	ns, label := fmt.Sprintf("fleet-%d", n), fleetLabel(n)
	if period != sz.FleetPeriod {
		ns, label = fmt.Sprintf("fleet-%d-%ds", n, int64(period/time.Second)), fleetRateLabel(n, period)
	}
	if err := devcluster.EnsureNamespace(ctx, c.Client, ns); err != nil {
		return err
	}
	every := max(1, n/max(sz.FleetRealPods, 1)) // every k-th policy gets a real pod
	realPod := func(i int) bool { return i%every == 0 }
	realCount := 0
	for i := range n {
		if realPod(i) {
			realCount++
		}
	}
	start := time.Now()
	if err := r.fleetVolumes(ctx, c, ns, tmpl, n, realPod); err != nil {
		return err
	}
	r.logf("  %d policies: %d volumes (%d real) in %s", n, n, realCount, time.Since(start).Round(time.Millisecond))
	m, err := startFleetManager(ctx, bin, c.Kubeconfig, filepath.Join(r.work, fmt.Sprintf("manager-%s.log", label)), sz.FleetSettle)
	if err != nil {
		return err
	}
	defer m.stop()
	seen := &fleetSeen{tick: map[string]time.Time{}, pod: map[string]time.Time{}, podC: map[string]time.Time{}}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	werr := make(chan error, 2)
	go func() { werr <- watchFleet(wctx, c, ns, &vacuumv1alpha1.VacuumRunList{}, seen) }()
	go func() { werr <- watchFleet(wctx, c, ns, &corev1.PodList{}, seen) }()
	s0, err := m.sample(ctx, true)
	if err != nil {
		return err
	}
	for i := range n {
		at := s0.at.Add(period * time.Duration(i) / time.Duration(n))
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		if err := c.Client.Create(ctx, fleetPolicy(sz, ns, i, realPod(i), period)); err != nil {
			return fmt.Errorf("create policy %d: %w", i, err)
		}
	}
	s1, err := m.sample(ctx, false)
	if err != nil {
		return err
	}
	api1, err := apiserverMetrics(ctx, c)
	if err != nil {
		return err
	}
	r.logf("  %s policies created in %s", label, s1.at.Sub(s0.at).Round(time.Millisecond))
	prof := make(chan error, 2)
	go func() { prof <- m.profile(ctx, label, sz.FleetWindow-time.Second) }()
	go func() { prof <- apiserverProfile(ctx, c, label, sz.FleetWindow-time.Second) }()
	depth := make(chan map[string]float64, 1)
	go func() { depth <- m.maxDepth(wctx, time.Second) }()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-werr:
		return fmt.Errorf("watch: %w", err)
	case <-time.After(sz.FleetWindow):
	}
	s2, err := m.sample(ctx, true)
	if err != nil {
		return err
	}
	api2, err := apiserverMetrics(ctx, c)
	if err != nil {
		return err
	}
	for range 2 {
		if err := <-prof; err != nil {
			return err
		}
	}
	stopWatch()
	if err := fleetRow(tbs.main, label, n, realCount, period, s0, s1, s2, seen, <-depth); err != nil {
		return err
	}
	if err := fleetRequests(tbs.req, label, n, s0, s2, seen); err != nil {
		return err
	}
	if err := fleetAPIRequests(tbs.api, label, api1, api2, seen.ticksIn(s1.at, s2.at)); err != nil {
		return err
	}
	// The whole exposition at the end, beside the manager's log, for what the table leaves out.
	if err := download(ctx, m.metrics, filepath.Join(r.work, fmt.Sprintf("manager-%s.metrics", label))); err != nil {
		return err
	}
	r.logf("  %s policies: %s", label, fleetRowText(tbs.main))
	r.logf("  %s policies: CPU seconds over the window: %s", label, fleetCPUText(s1, s2))
	if last {
		return nil
	}
	return r.fleetDelete(ctx, c, ns, n)
}

// fleetVolumes creates each policy's claim: a copy of tmpl for a real pod, an empty
// directory no pod ever mounts for the others.
func (r *runner) fleetVolumes(ctx context.Context, c *devcluster.Cluster, ns, tmpl string, n int, realPod func(int) bool) error {
	base := filepath.Join(r.work, "fleet-volumes", ns)
	empty := filepath.Join(base, "unused")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			dir := empty
			if realPod(i) {
				dir = filepath.Join(base, strconv.Itoa(i))
				if err := engine.CopyDataDir(tmpl, dir); err != nil {
					return fmt.Errorf("copy volume %d: %w", i, err)
				}
			}
			return devcluster.CreateVolume(gctx, c.Client, ns, fleetClaim(i), dir)
		})
	}
	return g.Wait()
}

func fleetClaim(i int) string { return fmt.Sprintf("data-%d", i) }

// fleetPolicy is policy i of a fleet: a lazy vacuum of its own claim every period. A pod
// that never starts fails its run after the same time whatever the period (half of the
// sizes' FleetPeriod), so a fleet on a longer period still ends its runs within the window.
func fleetPolicy(sz Sizes, ns string, i int, realPod bool, period time.Duration) *vacuumv1alpha1.VacuumPolicy {
	p := &vacuumv1alpha1.VacuumPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p-%d", i)}}
	p.Spec.Schedule = fmt.Sprintf("@every %s", period)
	p.Spec.Target.PersistentVolumeClaim = fleetClaim(i)
	p.Spec.Mode = vacuumv1alpha1.VacuumModeLazy
	p.Spec.BackoffLimit = 0
	if !realPod {
		p.Spec.Runner.NodeSelector = map[string]string{fleetNoNodeLabel: "true"}
		p.Spec.PodStartTimeoutSeconds = ptr.To(fleetPodStartTimeout(sz))
	}
	return p
}

// watchFleet records when runs (their ticks) and pods (their runs) of ns first appear,
// watching again from where it was if the API server ends the watch.
func watchFleet(ctx context.Context, c *devcluster.Cluster, ns string, list client.ObjectList, seen *fleetSeen) error {
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		return err
	}
	rv := ""
	for ctx.Err() == nil {
		w, err := wc.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		for ev := range w.ResultChan() {
			now := time.Now()
			obj, ok := ev.Object.(client.Object)
			if !ok || ev.Type == watch.Error {
				continue
			}
			rv = obj.GetResourceVersion()
			if ev.Type != watch.Added {
				continue
			}
			seen.add(obj, now)
		}
		w.Stop()
	}
	return nil
}

func (s *fleetSeen) add(obj client.Object, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch o := obj.(type) {
	case *vacuumv1alpha1.VacuumRun:
		if t, err := time.Parse(time.RFC3339, o.Annotations[vacuumv1alpha1.AnnotationScheduledTime]); err == nil {
			s.tick[o.Name] = t
			s.podC[o.Name+"/run"] = o.CreationTimestamp.Time
		}
	case *corev1.Pod:
		run := o.Labels[vacuumv1alpha1.LabelRun]
		if _, ok := s.pod[run]; run != "" && !ok {
			s.pod[run] = now
			s.podC[run] = o.CreationTimestamp.Time
		}
	}
}

// ticksIn is how many of the runs seen were of ticks in [from, to].
func (s *fleetSeen) ticksIn(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.tick {
		if !t.Before(from) && !t.After(to) {
			n++
		}
	}
	return n
}

// delays are, over the runs of the fleet's ticks: tick to run creation (whole seconds), tick
// to pod creation (whole seconds) and tick to the watch's first sight of the pod; a run or
// pod that did not exist at end counts as end minus tick.
func (s *fleetSeen) delays(end time.Time) (run, podTS, podSeen []time.Duration, noPod int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, tick := range s.tick {
		if created, ok := s.podC[name+"/run"]; ok {
			run = append(run, created.Sub(tick))
		}
		seen, ok := s.pod[name]
		if !ok {
			noPod++
			podTS, podSeen = append(podTS, end.Sub(tick)), append(podSeen, end.Sub(tick))
			continue
		}
		podTS, podSeen = append(podTS, s.podC[name].Sub(tick)), append(podSeen, seen.Sub(tick))
	}
	for _, d := range [][]time.Duration{run, podTS, podSeen} {
		slices.Sort(d)
	}
	return run, podTS, podSeen, noPod
}

// startFleetManager starts bin/manager against kubeconfig, metrics over plain HTTP and pprof
// on free loopback ports, and waits until it is ready and its controllers have started, then
// settle more.
func startFleetManager(ctx context.Context, bin, kubeconfig, logPath string, settle time.Duration) (*fleetManager, error) {
	cpPids, err := childProcesses(controlPlaneNames)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, 3)
	for i := range addrs {
		a, err := freeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(filepath.Join(bin, "manager"),
		"--metrics-bind-address="+addrs[0], "--metrics-secure=false", "--pprof-bind-address="+addrs[1],
		"--health-probe-bind-address="+addrs[2], "--namespace="+devcluster.ManagerNamespace,
		"--runner-image="+devcluster.RunnerImage)
	cmd.Args = append(cmd.Args, strings.Fields(os.Getenv(FleetManagerArgsEnv))...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start manager: %w", err)
	}
	m := &fleetManager{cmd: cmd, done: make(chan struct{}), metrics: "http://" + addrs[0] + "/metrics",
		pprof: "http://" + addrs[1] + "/debug/pprof/heap?gc=1", prob: "http://" + addrs[2] + "/readyz", cpPids: cpPids}
	go func() { _ = cmd.Wait(); close(m.done) }()
	// Ready, and both controllers started: then the idle baseline.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s, err := managerstat.Scrape(ctx, m.metrics)
		if err == nil && hasController(s, "vacuumpolicy") && hasController(s, "vacuumrun") && httpOK(ctx, m.prob) {
			// The controllers report their workers when they start, before their caches
			// have synced; the caches of a cluster without policies sync in milliseconds.
			time.Sleep(settle)
			return m, nil
		}
		select {
		case <-m.done:
			return nil, fmt.Errorf("manager exited before it was ready; its log: %s", logPath)
		case <-ctx.Done():
			m.stop()
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, fmt.Errorf("manager not ready after 2 minutes (last scrape: %v); its log: %s", err, logPath)
		}
	}
}

// hasController reports whether controller c has reported its workers (it has started).
func hasController(s managerstat.Sample, c string) bool {
	f, ok := s["controller_runtime_max_concurrent_reconciles"]
	if !ok {
		return false
	}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == c {
				return true
			}
		}
	}
	return false
}

// freeLoopbackAddr is a 127.0.0.1 address with a port free right now.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func httpOK(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// sample scrapes the manager (after a forced GC when gc, so the heap is the live one) and
// reads its /proc accounting.
func (m *fleetManager) sample(ctx context.Context, gc bool) (fleetSample, error) {
	if gc && !httpOK(ctx, m.pprof) {
		return fleetSample{}, errors.New("manager: the forced GC of /debug/pprof/heap?gc=1 failed")
	}
	s, err := managerstat.Scrape(ctx, m.metrics)
	if err != nil {
		return fleetSample{}, err
	}
	p, err := managerstat.ReadProc(m.cmd.Process.Pid)
	if err != nil {
		return fleetSample{}, err
	}
	var cp managerstat.Proc
	var each []managerstat.Proc
	for _, pid := range m.cpPids {
		q, err := managerstat.ReadProc(pid)
		if err != nil {
			return fleetSample{}, fmt.Errorf("control plane: %w", err)
		}
		cp.CPU += q.CPU
		cp.RSSBytes += q.RSSBytes
		each = append(each, q)
	}
	self, err := readSelfCPU()
	if err != nil {
		return fleetSample{}, err
	}
	return fleetSample{at: time.Now(), m: s, proc: p, cp: cp, cpEach: each, self: self}, nil
}

// maxDepth scrapes the manager every interval until ctx ends and returns the deepest each
// controller's work queue was (workqueue_depth, by controller name).
func (m *fleetManager) maxDepth(ctx context.Context, every time.Duration) map[string]float64 {
	out := map[string]float64{}
	for {
		if s, err := managerstat.Scrape(ctx, m.metrics); err == nil {
			for _, c := range []string{"vacuumpolicy", "vacuumrun"} {
				out[c] = max(out[c], s.Sum(depthMetric, managerstat.Labels{"name": c}))
			}
		}
		select {
		case <-ctx.Done():
			return out
		case <-time.After(every):
		}
	}
}

// childProcesses are the pids of this process's children named one of names (their
// /proc/<pid>/stat command), in the order of names: envtest starts kube-apiserver and etcd
// as direct children.
func childProcesses(names []string) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var pids []int
	byName := map[string]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // it exited meanwhile
		}
		open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(b[end+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(self) || !slices.Contains(names, string(b[open+1:end])) {
			continue
		}
		byName[string(b[open+1:end])] = pid
	}
	for _, name := range names {
		if pid, ok := byName[name]; ok {
			pids = append(pids, pid)
		}
	}
	if len(pids) != len(names) {
		return nil, fmt.Errorf("found %d of the control plane's %d processes %v among this process's children", len(pids), len(names), names)
	}
	return pids, nil
}

// FleetScalesEnv (policies of each fleet, comma-separated) and FleetPeriodEnv (a duration)
// replace the experiment's fleets and their schedules' period, for a diagnostic run that
// varies the offered load (ticks per second are policies over the period); unset, the sizes'
// own apply, and the report's setup names whichever ran.
// FleetRatePeriodsEnv (durations, comma-separated, or "none") replaces the longer periods
// the largest fleet is also measured on.
const (
	FleetScalesEnv      = "VACBENCH_FLEET_SCALES"
	FleetPeriodEnv      = "VACBENCH_FLEET_PERIOD"
	FleetRatePeriodsEnv = "VACBENCH_FLEET_RATE_PERIODS"
)

// fleetSizesFromEnv is sz with FleetScalesEnv and FleetPeriodEnv applied.
func fleetSizesFromEnv(sz Sizes) (Sizes, error) {
	if v := os.Getenv(FleetScalesEnv); v != "" {
		var scales []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return sz, fmt.Errorf("%s=%q: want positive policy counts separated by commas", FleetScalesEnv, v)
			}
			scales = append(scales, n)
		}
		sz.FleetScales = scales
	}
	if v := os.Getenv(FleetPeriodEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return sz, fmt.Errorf("%s=%q: want a duration of a second or more", FleetPeriodEnv, v)
		}
		sz.FleetPeriod = d
	}
	if v := os.Getenv(FleetRatePeriodsEnv); v != "" {
		sz.FleetRatePeriods = nil
		if strings.TrimSpace(v) != "none" {
			for _, f := range strings.Split(v, ",") {
				d, err := time.ParseDuration(strings.TrimSpace(f))
				if err != nil || d < time.Second || d == sz.FleetPeriod {
					return sz, fmt.Errorf("%s=%q: want durations of a second or more other than the period %s, "+
						"separated by commas, or none", FleetRatePeriodsEnv, v, sz.FleetPeriod)
				}
				sz.FleetRatePeriods = append(sz.FleetRatePeriods, d)
			}
		}
	}
	return sz, nil
}

// FleetManagerArgsEnv holds extra flags for the experiment's manager, split at spaces (for
// an A/B of a manager setting such as --workers); unset, the manager runs with its defaults.
const FleetManagerArgsEnv = "VACBENCH_FLEET_MANAGER_ARGS"

// FleetProfileEnv names a directory that receives the manager's CPU profile over each
// fleet's measured window and its heap profile at the end (cpu-N.pprof, heap-N.pprof), for
// `go tool pprof`; unset, no profile is taken.
const FleetProfileEnv = "VACBENCH_FLEET_PPROF_DIR"

// profile saves the manager's CPU profile over d and then its heap profile, when
// FleetProfileEnv is set.
func (m *fleetManager) profile(ctx context.Context, label string, d time.Duration) error {
	dir := os.Getenv(FleetProfileEnv)
	if dir == "" {
		return nil
	}
	base := strings.TrimSuffix(m.pprof, "heap?gc=1")
	for _, p := range []struct{ url, file string }{
		{fmt.Sprintf("%sprofile?seconds=%d", base, max(int(d/time.Second), 1)), fmt.Sprintf("cpu-%s.pprof", label)},
		{base + "heap", fmt.Sprintf("heap-%s.pprof", label)},
	} {
		if err := download(ctx, p.url, filepath.Join(dir, p.file)); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
	}
	return nil
}

// apiserverProfile saves kube-apiserver's CPU profile over d (its /debug/pprof, on by
// default, read with the cluster's admin credentials) as apiserver-cpu-N.pprof, when
// FleetProfileEnv is set: where the control plane's share of the machine goes.
func apiserverProfile(ctx context.Context, c *devcluster.Cluster, label string, d time.Duration) error {
	dir := os.Getenv(FleetProfileEnv)
	if dir == "" {
		return nil
	}
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return fmt.Errorf("apiserver profile: %w", err)
	}
	url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(c.Config.Host, "/"), max(int(d/time.Second), 1))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("apiserver profile: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("apiserver profile: %s: %s", url, resp.Status)
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("apiserver-cpu-%s.pprof", label)))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("apiserver profile: %w", err)
	}
	return f.Close()
}

// apiserverMetrics scrapes kube-apiserver's /metrics with the cluster's admin credentials.
func apiserverMetrics(ctx context.Context, c *devcluster.Cluster) (managerstat.Sample, error) {
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	url := strings.TrimSuffix(c.Config.Host, "/") + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("apiserver metrics: %s: %s", url, resp.Status)
	}
	s, err := managerstat.Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	return s, nil
}

// readSelfCPU is this process's CPU and that of its children it has waited for (the local
// node's runner processes that have exited), from /proc/self/stat.
func readSelfCPU() (managerstat.Proc, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return managerstat.Proc{}, err
	}
	end := strings.LastIndexByte(string(b), ')')
	if end < 0 {
		return managerstat.Proc{}, errors.New("/proc/self/stat: no command")
	}
	f := strings.Fields(string(b[end+1:]))
	// utime, stime, cutime, cstime are fields 14-17 of stat; f starts at field 3.
	if len(f) < 15 {
		return managerstat.Proc{}, fmt.Errorf("/proc/self/stat: %d fields", len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:15] {
		t, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return managerstat.Proc{}, fmt.Errorf("/proc/self/stat: %w", err)
		}
		ticks += t
	}
	return managerstat.Proc{CPU: time.Duration(ticks) * time.Second / 100}, nil
}

// procCores is the cores control-plane process i (in controlPlaneNames' order) used between
// s1 and s2.
func procCores(s1, s2 fleetSample, i int) float64 {
	if i >= len(s1.cpEach) || i >= len(s2.cpEach) {
		return 0
	}
	return (s2.cpEach[i].CPU - s1.cpEach[i].CPU).Seconds() / s2.at.Sub(s1.at).Seconds()
}

// fleetCPUText is where the machine's CPU went between s1 and s2, in cores: the manager, each
// of the control plane's processes, and this process with its waited-for children.
func fleetCPUText(s1, s2 fleetSample) string {
	secs := s2.at.Sub(s1.at).Seconds()
	cores := func(a, b managerstat.Proc) string { return fmt.Sprintf("%.2f", (b.CPU-a.CPU).Seconds()/secs) }
	parts := []string{"manager " + cores(s1.proc, s2.proc)}
	for i, name := range controlPlaneNames {
		if i < len(s1.cpEach) && i < len(s2.cpEach) {
			parts = append(parts, name+" "+cores(s1.cpEach[i], s2.cpEach[i]))
		}
	}
	parts = append(parts, "node and runners "+cores(s1.self, s2.self))
	return fmt.Sprintf("cores over %.0f s: %s", secs, strings.Join(parts, ", "))
}

// download saves url's body to path.
func download(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// stop sends SIGTERM, SIGKILL to the process group after 10 s.
func (m *fleetManager) stop() {
	select {
	case <-m.done:
		return
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
	}
}

// fleetDelete deletes the fleet's n policies and waits until their runs and pods are gone
// too (the garbage collector deletes them, the manager releases their finalizers), so the
// next fleet's manager starts with empty caches. It waits 2 minutes, or 300 ms a policy
// where that is longer: a fleet of 1,000 leaves over a thousand runs to finalize.
func (r *runner) fleetDelete(ctx context.Context, c *devcluster.Cluster, ns string, n int) error {
	limit := max(2*time.Minute, time.Duration(n)*300*time.Millisecond)
	start := time.Now()
	if err := c.Client.DeleteAllOf(ctx, &vacuumv1alpha1.VacuumPolicy{}, client.InNamespace(ns)); err != nil {
		return fmt.Errorf("delete the policies of %s: %w", ns, err)
	}
	for {
		var runs vacuumv1alpha1.VacuumRunList
		var pods corev1.PodList
		if err := c.Client.List(ctx, &runs, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := c.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{controllers.LabelManagedBy: controllers.ManagedBy}); err != nil {
			return err
		}
		if len(runs.Items)+len(pods.Items) == 0 {
			r.logf("  %s deleted in %s", ns, time.Since(start).Round(time.Millisecond))
			return nil
		}
		if time.Since(start) > limit {
			return fmt.Errorf("%s: %d runs and %d pods left %s after its policies were deleted", ns, len(runs.Items), len(pods.Items), limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// fleetRow adds the row of a fleet of n policies, measured by samples s0 (idle, before the
// policies), s1 (all created) and s2 (the end).
func fleetRow(tb *Table, label string, n, realCount int, period time.Duration, s0, s1, s2 fleetSample, seen *fleetSeen, depth map[string]float64) error {
	quant := func(ctrl string) (count, p50, p99 float64, err error) {
		h2, err := s2.m.Histogram(reconcileMetric, managerstat.Labels{"controller": ctrl})
		if err != nil {
			return 0, 0, 0, err
		}
		h0, _ := s0.m.Histogram(reconcileMetric, managerstat.Labels{"controller": ctrl})
		h, err := h2.Sub(h0)
		if err != nil {
			return 0, 0, 0, err
		}
		if h.Count == 0 {
			return 0, 0, 0, fmt.Errorf("controller %s reconciled nothing", ctrl)
		}
		return h.Count, 1000 * h.Quantile(0.5), 1000 * h.Quantile(0.99), nil
	}
	pc, p50, p99, err := quant("vacuumpolicy")
	if err != nil {
		return err
	}
	rc, r50, r99, err := quant("vacuumrun")
	if err != nil {
		return err
	}
	// What a reconcile waits on: its turn in the work queue, the API server's answers, and
	// the client-side rate limiter (no series at all when the client has none).
	between := func(name string, sel managerstat.Labels) managerstat.Histogram {
		h2, err := s2.m.Histogram(name, sel)
		if err != nil {
			return managerstat.Histogram{}
		}
		h0, _ := s0.m.Histogram(name, sel)
		if h, err := h2.Sub(h0); err == nil {
			return h
		}
		return managerstat.Histogram{}
	}
	meanMs := func(h managerstat.Histogram) float64 {
		if h.Count == 0 {
			return 0
		}
		return 1000 * h.Sum / h.Count
	}
	p99Ms := func(h managerstat.Histogram) float64 {
		if h.Count == 0 {
			return 0
		}
		return 1000 * h.Quantile(0.99)
	}
	pq := between(queueMetric, managerstat.Labels{"name": "vacuumpolicy"})
	rq := between(queueMetric, managerstat.Labels{"name": "vacuumrun"})
	lat := between(latencyMetric, nil)
	lim := between(limiterMetric, nil)
	cpCores := (s2.cp.CPU - s1.cp.CPU).Seconds() / s2.at.Sub(s1.at).Seconds()
	runD, podTS, podSeen, noPod := seen.delays(s2.at)
	runs := len(podSeen)
	if runs == 0 {
		return errors.New("no schedule tick made a run")
	}
	pods := runs - noPod
	req := s2.m.Sum(requestsMetric, nil) - s0.m.Sum(requestsMetric, nil)
	heap0, heap2 := s0.m.Sum(heapMetric, nil), s2.m.Sum(heapMetric, nil)
	rss0, rss2 := float64(s0.proc.RSSBytes), float64(s2.proc.RSSBytes)
	cpu := (s2.proc.CPU - s0.proc.CPU).Seconds()
	steady := s2.at.Sub(s1.at).Seconds()
	cores := (s2.proc.CPU - s1.proc.CPU).Seconds() / steady
	fn := float64(n)
	return tb.Add([]string{label}, fn, float64(realCount), s2.at.Sub(s0.at).Seconds(), float64(runs), float64(pods),
		pc, p50, p99, rc, r50, r99,
		req, req/float64(runs), heap0/(1<<20), heap2/(1<<20), (heap2-heap0)/1024/fn,
		rss0/(1<<20), rss2/(1<<20), (rss2-rss0)/1024/fn, cpu, 1000*cpu/float64(runs), cores,
		secs(percentileOr(runD, 0.99)), secs(percentile(podTS, 0.99)), secs(percentile(podSeen, 0.5)), secs(percentile(podSeen, 0.99)),
		secs(podSeen[len(podSeen)-1]), float64(noPod),
		meanMs(pq), meanMs(rq), depth["vacuumpolicy"], depth["vacuumrun"],
		meanMs(lat), p99Ms(lat), p99Ms(lim), cpCores,
		fn/period.Seconds(), procCores(s1, s2, 0), procCores(s1, s2, 1),
		(s2.self.CPU-s1.self.CPU).Seconds()/steady)
}

// fleetRequests adds the fleet's API requests per run by HTTP method.
func fleetRequests(tb *Table, label string, n int, s0, s2 fleetSample, seen *fleetSeen) error {
	_, _, podSeen, _ := seen.delays(s2.at)
	runs := float64(max(len(podSeen), 1))
	for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		sel := managerstat.Labels{"method": method}
		req := s2.m.Sum(requestsMetric, sel) - s0.m.Sum(requestsMetric, sel)
		if err := tb.Add([]string{label, method}, float64(n), req, req/runs); err != nil {
			return err
		}
	}
	return nil
}

// fleetAPIRequests adds the requests kube-apiserver served between a1 and a2, by verb and
// resource (with its group when not the core one, and its subresource), per run of the
// window: every row of at least 0.01 a run, watches left out, the most requested first.
func fleetAPIRequests(tb *Table, label string, a1, a2 managerstat.Sample, runs int) error {
	count := func(s managerstat.Sample) map[[2]string]float64 {
		out := map[[2]string]float64{}
		f, ok := s[apiserverMetric]
		if !ok {
			return out
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["verb"] == "WATCH" || l["resource"] == "" {
				continue
			}
			res := l["resource"]
			if g := l["group"]; g != "" {
				res += "." + g
			}
			if sub := l["subresource"]; sub != "" {
				res += "/" + sub
			}
			out[[2]string{l["verb"], res}] += m.GetCounter().GetValue()
		}
		return out
	}
	if runs == 0 {
		return errors.New("apiserver requests: no tick in the window")
	}
	before, after := count(a1), count(a2)
	type row struct {
		key [2]string
		n   float64
	}
	var rows []row
	for k, v := range after {
		if d := v - before[k]; d/float64(runs) >= 0.01 {
			rows = append(rows, row{k, d})
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("apiserver requests: no %s series moved over the window", apiserverMetric)
	}
	slices.SortFunc(rows, func(a, b row) int {
		if a.n != b.n {
			return int(math.Copysign(1, b.n-a.n))
		}
		return strings.Compare(a.key[1]+a.key[0], b.key[1]+b.key[0])
	})
	for _, r := range rows {
		if err := tb.Add([]string{label, r.key[0], r.key[1]}, r.n, r.n/float64(runs)); err != nil {
			return err
		}
	}
	return nil
}

func percentileOr(s []time.Duration, q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	return percentile(s, q)
}

func secs(d time.Duration) float64 { return math.Max(d.Seconds(), 0) }

// fleetRowText is the last row of tb, for the log.
func fleetRowText(tb *Table) string {
	row := tb.Rows[len(tb.Rows)-1]
	out := ""
	for i, h := range tb.Header[1:] {
		out += h + "=" + row[i+1] + " "
	}
	return out
}

func (r *runner) fleetPlots(sec *Section, tb *Table) error {
	c := &cells{ts: tablesOf([]*Table{tb})}
	xy := func(col string) plotter.XYs {
		var out plotter.XYs
		for _, row := range fleetCurve(c) {
			out = append(out, plotter.XY{X: c.num(fleetTable, row, "policies"), Y: c.num(fleetTable, row, col)})
		}
		return out
	}
	goal := func(y float64) plotter.XYs {
		pts := xy("policies")
		return plotter.XYs{{X: pts[0].X, Y: y}, {X: pts[len(pts)-1].X, Y: y}}
	}
	lps := []LinePlot{
		{File: "exp12_reconcile_p99.png", Title: "Reconcile latency p99 by fleet size", X: "VacuumPolicies", Y: "ms",
			LogX: true, LegendLeft: true, Series: []Series{
				{Name: "vacuumpolicy p99", XY: xy("policy_p99_ms")}, {Name: "vacuumrun p99", XY: xy("run_p99_ms")},
				{Name: "vacuumpolicy p50", XY: xy("policy_p50_ms")}, {Name: "vacuumrun p50", XY: xy("run_p50_ms")},
				{Name: "goal (p99)", XY: goal(fleetGoalReconcileMs), Dashed: true}}},
		{File: "exp12_memory_per_policy.png", Title: "Manager memory per policy by fleet size", X: "VacuumPolicies", Y: "KiB per policy",
			LogX: true, LegendLeft: true, Series: []Series{
				{Name: "Go heap (live)", XY: xy("heap_kib_per_policy")}, {Name: "RSS", XY: xy("rss_kib_per_policy")},
				{Name: "goal", XY: goal(fleetGoalKiBPerPolicy), Dashed: true}}},
	}
	if c.err != nil {
		return c.err
	}
	for _, lp := range lps {
		f, err := lp.Save(r.cfg.OutDir)
		if err != nil {
			return err
		}
		sec.Plots = append(sec.Plots, baseName(f))
	}
	return nil
}

// fleetCurve are the rows of the fleets on the sizes' FleetPeriod, the curve by fleet size.
func fleetCurve(c *cells) [][]string {
	var out [][]string
	for _, row := range c.rows(fleetTable, "") {
		if !isRateRow(row) {
			out = append(out, row)
		}
	}
	return out
}

// fleetRates are the largest fleet's rows on FleetRatePeriods and big, its row on the
// sizes' period, ordered by ticks a second: the offered load against what it cost.
func fleetRates(c *cells, big []string) [][]string {
	out := [][]string{big}
	for _, row := range c.rows(fleetTable, "") {
		if isRateRow(row) && c.num(fleetTable, row, "policies") == c.num(fleetTable, big, "policies") {
			out = append(out, row)
		}
	}
	slices.SortStableFunc(out, func(a, b []string) int {
		return int(math.Copysign(1, c.num(fleetTable, a, "ticks_per_s")-c.num(fleetTable, b, "ticks_per_s")))
	})
	return out
}

// fleetLargest is the row of the largest fleet on the sizes' period.
func fleetLargest(c *cells) []string {
	var best []string
	for _, row := range fleetCurve(c) {
		if best == nil || c.num(fleetTable, row, "policies") > c.num(fleetTable, best, "policies") {
			best = row
		}
	}
	return best
}

func fleetHeadline(ts tables) (string, error) {
	c := &cells{ts: ts}
	big := fleetLargest(c)
	if c.err != nil {
		return "", c.err
	}
	num := func(col string) float64 { return c.num(fleetTable, big, col) }
	var curve []string
	for _, row := range fleetCurve(c) {
		curve = append(curve, sentence("%.0f: %.1f/%.1f ms, %.1f KiB", c.num(fleetTable, row, "policies"),
			c.num(fleetTable, row, "policy_p99_ms"), c.num(fleetTable, row, "run_p99_ms"), c.num(fleetTable, row, "heap_kib_per_policy")))
	}
	s := sentence("At %.0f policies (%.0f with real runner pods, %.0f runs): reconcile p99 %.1f ms (policies) and %.1f ms (runs), "+
		"goal %d; %.1f KiB of live heap per policy (%.1f KiB of RSS), goal %d; tick to pod p99 %.2f s, goal %d; "+
		"%.1f API requests and %.1f ms of manager CPU per run. Curve (policies: p99 policy/run, heap per policy): %s.",
		num("policies"), num("real_pod_policies"), num("runs"), num("policy_p99_ms"), num("run_p99_ms"), fleetGoalReconcileMs,
		num("heap_kib_per_policy"), num("rss_kib_per_policy"), fleetGoalKiBPerPolicy, num("tick_to_pod_p99_s"), fleetGoalTickToPodSecs,
		num("requests_per_run"), num("cpu_ms_per_run"), joinComma(curve))
	if rates := fleetRates(c, big); len(rates) > 1 {
		var at []string
		for _, row := range rates {
			at = append(at, sentence("%.1f: %.2f s", c.num(fleetTable, row, "ticks_per_s"), c.num(fleetTable, row, "tick_to_pod_p99_s")))
		}
		s += sentence(" Tick to pod p99 at %.0f policies by ticks a second offered: %s.", num("policies"), joinComma(at))
	}
	return s, c.err
}

// fleetFindings states the goals at the largest fleet and how each figure grew with it.
func fleetFindings(ts tables) ([]string, []Rule, *Verdict, error) {
	c := &cells{ts: ts}
	big := fleetLargest(c)
	rows := fleetCurve(c)
	if c.err != nil {
		return nil, nil, nil, c.err
	}
	num := func(row []string, col string) float64 { return c.num(fleetTable, row, col) }
	p99 := max(num(big, "policy_p99_ms"), num(big, "run_p99_ms"))
	mem := num(big, "heap_kib_per_policy")
	tick := num(big, "tick_to_pod_p99_s")
	rules := []Rule{
		{Statement: sentence("both controllers' reconcile p99 under %d ms at the largest fleet", fleetGoalReconcileMs),
			Holds: p99 < fleetGoalReconcileMs, Then: sentence("Reconcile p99 goal met (%.1f ms).", p99),
			Else: sentence("Reconcile p99 goal not met: %.1f ms.", p99)},
		{Statement: sentence("live heap per policy under %d KiB at the largest fleet", fleetGoalKiBPerPolicy),
			Holds: mem < fleetGoalKiBPerPolicy, Then: sentence("Memory goal met (%.1f KiB per policy).", mem),
			Else: sentence("Memory goal not met: %.1f KiB per policy.", mem)},
		{Statement: sentence("tick-to-pod p99 under %d s at the largest fleet", fleetGoalTickToPodSecs),
			Holds: tick < fleetGoalTickToPodSecs, Then: sentence("Tick-to-pod goal met (%.2f s).", tick),
			Else: sentence("Tick-to-pod goal not met: %.2f s.", tick)},
	}
	var findings []string
	if len(rows) >= 2 {
		first, last := rows[0], rows[len(rows)-1]
		grow := num(last, "policies") / num(first, "policies")
		findings = append(findings, sentence("From %.0f to %.0f policies (x%.0f): API requests per run %.1f -> %.1f, "+
			"manager CPU per run %.1f -> %.1f ms, heap per policy %.1f -> %.1f KiB, policy reconcile p50 %.1f -> %.1f ms. "+
			"A per-run figure that stays flat while the fleet grows is linear cost; one that grows with the fleet is not.",
			num(first, "policies"), num(last, "policies"), grow, num(first, "requests_per_run"), num(last, "requests_per_run"),
			num(first, "cpu_ms_per_run"), num(last, "cpu_ms_per_run"), num(first, "heap_kib_per_policy"), num(last, "heap_kib_per_policy"),
			num(first, "policy_p50_ms"), num(last, "policy_p50_ms")))
	}
	// Whose the curve is: the offered load against what the machine has. The control plane
	// shares the machine with the manager and the local node; when their cores come close to
	// all of it, the queue waits are the machine's, and fewer workers or more would not move them.
	used := num(big, "control_plane_cores") + num(big, "cpu_cores") + num(big, "node_cores")
	findings = append(findings, sentence("At %.0f policies the offered load was %.1f ticks a second; over the window the "+
		"control plane used %.2f cores (kube-apiserver %.2f, etcd %.2f), the manager %.2f and the local node with its "+
		"runners %.2f: %.2f of the machine's %d. A reconcile waited %.0f ms (policies) and %.0f ms (runs) on average in its "+
		"work queue (deepest %.0f and %.0f) and %.1f ms on average for each API request (p99 %.1f ms).",
		num(big, "policies"), num(big, "ticks_per_s"), num(big, "control_plane_cores"), num(big, "apiserver_cores"),
		num(big, "etcd_cores"), num(big, "cpu_cores"), num(big, "node_cores"), used, runtime.NumCPU(),
		num(big, "policy_queue_mean_ms"), num(big, "run_queue_mean_ms"), num(big, "policy_depth_max"),
		num(big, "run_depth_max"), num(big, "request_mean_ms"), num(big, "request_p99_ms")))
	findings = append(findings, fleetRateFindings(c, big)...)
	outcome := "met"
	for _, r := range rules {
		if !r.Holds {
			outcome = "not met"
		}
	}
	v := &Verdict{Field: sentence("goal at the largest fleet: p99 reconcile < %d ms, < %d KiB per policy, tick to pod p99 < %d s",
		fleetGoalReconcileMs, fleetGoalKiBPerPolicy, fleetGoalTickToPodSecs),
		Run:     sentence("%.0f policies: p99 %.1f ms, %.1f KiB per policy, tick to pod p99 %.2f s", num(big, "policies"), p99, mem, tick),
		Outcome: outcome, Why: "the figures of the largest fleet against the goals"}
	return findings, rules, v, c.err
}

// fleetRateFindings put the largest fleet's rows side by side by the ticks a second they
// offered: where tick to pod p99 passes the goal (the knee, between the highest rate that
// met it and the lowest that did not), and what real fleets of that size offer.
func fleetRateFindings(c *cells, big []string) []string {
	rates := fleetRates(c, big)
	n := c.num(fleetTable, big, "policies")
	var at []string
	carried, over := -1.0, -1.0
	for _, row := range rates {
		num := func(col string) float64 { return c.num(fleetTable, row, col) }
		tps, tick := num("ticks_per_s"), num("tick_to_pod_p99_s")
		at = append(at, sentence("%.1f ticks a second (%s): tick to pod p50 %.2f s and p99 %.2f s, reconcile p99 %.1f/%.1f ms, "+
			"run queue wait %.0f ms on average, kube-apiserver %.2f cores", tps, row[0], num("tick_to_pod_p50_s"), tick,
			num("policy_p99_ms"), num("run_p99_ms"), num("run_queue_mean_ms"), num("apiserver_cores")))
		switch {
		case tick < fleetGoalTickToPodSecs:
			carried = max(carried, tps)
		case over < 0 || tps < over:
			over = tps
		}
	}
	if len(rates) < 2 {
		return nil
	}
	knee := "no rate measured met it"
	switch {
	case carried >= 0 && over >= 0 && carried < over:
		knee = sentence("the knee lies between %.1f (met) and %.1f ticks a second (not met)", carried, over)
	case carried >= 0 && over < 0:
		knee = sentence("every rate measured met it, up to %.1f ticks a second", carried)
	case carried >= 0:
		knee = sentence("met at %.1f ticks a second but not at %.1f, a lower rate: this run's noise is larger than the difference", carried, over)
	}
	return []string{
		sentence("At %.0f policies by offered load: %s. Tick to pod p99 under %d s: %s.", n, strings.Join(at, "; "),
			fleetGoalTickToPodSecs, knee),
		sentence("What a real fleet of %.0f databases offers, spread evenly: hourly vacuums %.2f ticks a second, daily ones %.3f; "+
			"the same fleet with every schedule on one cron minute (say \"0 2 * * *\") offers all %.0f ticks at once, "+
			"which these rows do not measure.", n, n/3600, n/86400, n),
	}
}

func fleetSetup(sz Sizes) []string {
	out := []string{
		sentence("fleets of %v VacuumPolicies, one namespace each, a fresh manager process for each (./cmd/manager, "+
			"--workers default, metrics over plain HTTP on loopback)", sz.FleetScales),
		sentence("schedule \"@every %s\" each, created evenly over one period so the ticks are spread; measured for %s after the last is created",
			sz.FleetPeriod, sz.FleetWindow),
		sentence("at most %d policies of a fleet with real runner pods (lazy VACUUM of a %d-row table with one index, a copy of one "+
			"tiny data directory each), the others with pods no node runs", sz.FleetRealPods, fleetRows),
		"control plane: envtest's kube-apiserver and etcd, kube-controller-manager's garbage collector; the dev cluster's local node",
	}
	if len(sz.FleetRatePeriods) > 0 && len(sz.FleetScales) > 0 {
		n := sz.FleetScales[len(sz.FleetScales)-1]
		var labels []string
		for _, p := range sz.FleetRatePeriods {
			labels = append(labels, fleetRateLabel(n, p))
		}
		out = append(out, sentence("the largest fleet also on the longer periods %v, each measured before its %s row the same way "+
			"(rows %s): the same %d policies offering fewer ticks a second; their pods that never start fail after "+
			"the same %d s", sz.FleetRatePeriods, sz.FleetPeriod, strings.Join(labels, ", "), n, fleetPodStartTimeout(sz)))
	}
	if args := os.Getenv(FleetManagerArgsEnv); args != "" {
		out = append(out, sentence("manager flags added by %s: %s", FleetManagerArgsEnv, args))
	}
	return out
}

var fleetText = struct{ title, claim string }{
	title: "The operator at fleet scale",
	claim: "A platform team runs the operator for hundreds of databases. What the manager costs as the fleet grows: " +
		"reconcile latency per controller, API requests per run, memory and CPU per policy, and the delay from a " +
		"schedule tick to its run's pod, at 10, 100 and 1,000 policies.",
}
