// Command manager runs the vacuum-operator: the VacuumPolicy and VacuumRun controllers, with
// leader election, health probes and Prometheus metrics.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strings"
	"time"
	_ "time/tzdata" // the image built without Docker has no /usr/share/zoneinfo; a policy's timeZone needs this

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/controllers"
)

// options are the manager's flags.
type options struct {
	metricsAddr            string
	metricsSecure          bool
	probeAddr              string
	leaderElect            bool
	namespace              string
	keySecret              string
	runnerImage            string
	allowedImages          []string
	allowedPriorityClasses []string
	watchNamespaces        []string
	workers                int
	progressInterval       time.Duration
	logLevel               int
	windowSeconds          bool
	pprofAddr              string
	kubeAPIQPS             float64
	kubeAPIBurst           int
}

// Defaults of the manager's client of the API server. No client-side rate limit, as
// controller-runtime configures its clients on SIG API Machinery's advice
// (kubernetes-sigs/controller-runtime#3119): the
// API server's Priority and Fairness queues and sheds the manager's requests by its flow
// schema, while a client-side token bucket only makes the manager's own reconciles wait
// (client-go's old 20 QPS and 30 of burst would hold a fleet that needs hundreds of
// requests a second in a queue of seconds). --kube-api-qps sets a ceiling where wanted.
const (
	defaultKubeAPIQPS   = -1
	defaultKubeAPIBurst = 0
)

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address the Prometheus metrics endpoint binds to (0 disables it)")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"serve /metrics over HTTPS, each request authenticated (TokenReview) and authorized (SubjectAccessReview: GET /metrics, "+
			"as ClusterRole metrics-reader grants); false serves plain HTTP to anyone who reaches the port")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the /healthz and /readyz probes bind to")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader among managers, so one reconciles at a time")
	fs.StringVar(&o.namespace, "namespace", envOr("POD_NAMESPACE", "vacuum-operator-system"),
		"the manager's own namespace: its key Secret and leader-election Lease live there")
	fs.StringVar(&o.keySecret, "key-secret-name", controllers.DefaultKeySecretName, "the Secret holding the manager's run-token key")
	fs.StringVar(&o.runnerImage, "runner-image", envOr("RUNNER_IMAGE", "ghcr.io/vacuumops/vacuum-operator:latest"),
		"the vacuum-runner image used when a policy names none")
	fs.Func("allowed-runner-images", "comma-separated images a run may name in spec.runner.image besides --runner-image (default: none)",
		func(v string) error {
			o.allowedImages = splitList(v)
			return nil
		})
	fs.Func("allowed-priority-classes", "comma-separated PriorityClasses a run may name in spec.runner.priorityClassName (default: none)",
		func(v string) error {
			o.allowedPriorityClasses = splitList(v)
			return nil
		})
	fs.Func("watch-namespaces", "comma-separated namespaces the manager watches and acts in (default: all); "+
		"with a namespaced install (config/namespaced) its RBAC covers only these", func(v string) error {
		o.watchNamespaces = splitList(v)
		return nil
	})
	fs.DurationVar(&o.progressInterval, "progress-interval", controllers.DefaultProgressInterval, "how often a running pod's /progress is polled")
	fs.IntVar(&o.workers, "workers", controllers.DefaultWorkers,
		"how many runs, and how many policies, are reconciled at once; no reconcile waits on a runner pod")
	fs.IntVar(&o.logLevel, "v", 0, "log verbosity (0 = info, higher = more)")
	fs.BoolVar(&o.windowSeconds, "window-schedule-seconds", false,
		"for tests: spec.window.schedule may have a leading seconds field (six fields), so windows can open seconds apart")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", defaultKubeAPIQPS,
		"requests per second the manager's client may send the API server on average; -1 sets no client-side limit "+
			"and leaves the pacing to the API server's Priority and Fairness")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", defaultKubeAPIBurst,
		"requests the client may send at once above --kube-api-qps (default: twice --kube-api-qps); only with a --kube-api-qps above 0")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		"for profiling: a loopback address (127.0.0.1:PORT, [::1]:PORT, localhost:PORT) serving net/http/pprof's /debug/pprof/ (default: off)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := loopbackOnly(o.pprofAddr); err != nil {
		return o, fmt.Errorf("--pprof-bind-address: %w", err)
	}
	if o.workers < 1 {
		return o, fmt.Errorf("--workers must be at least 1, got %d", o.workers)
	}
	if o.progressInterval <= 0 {
		return o, fmt.Errorf("--progress-interval must be positive, got %s", o.progressInterval)
	}
	if err := checkRateLimit(&o); err != nil {
		return o, err
	}
	return o, nil
}

// checkRateLimit refuses a client rate limit client-go would read otherwise than written
// (0 selects client-go's own 5 QPS; a burst below the rate never reaches it) and fills in a
// burst of twice the rate when none is given.
func checkRateLimit(o *options) error {
	switch {
	case o.kubeAPIQPS == -1:
		if o.kubeAPIBurst != 0 {
			return fmt.Errorf("--kube-api-burst=%d needs a --kube-api-qps above 0 (it is -1: no client-side limit)", o.kubeAPIBurst)
		}
		return nil
	case o.kubeAPIQPS <= 0:
		return fmt.Errorf("--kube-api-qps must be -1 (no client-side limit) or above 0, got %g", o.kubeAPIQPS)
	case o.kubeAPIBurst == 0:
		o.kubeAPIBurst = int(math.Ceil(2 * o.kubeAPIQPS))
	case float64(o.kubeAPIBurst) < o.kubeAPIQPS:
		return fmt.Errorf("--kube-api-burst=%d is below --kube-api-qps=%g", o.kubeAPIBurst, o.kubeAPIQPS)
	}
	return nil
}

// restConfig is the manager's client configuration: the kubeconfig or in-cluster one, with
// the rate limit of the flags.
func restConfig(o options) (*rest.Config, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("load the API server's configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	return cfg, nil
}

// loopbackOnly refuses an address that is not a loopback one: the profiles show the
// manager's memory, Secrets it has read included, so they are never served beyond the host.
func loopbackOnly(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address", addr)
	}
	return nil
}

// splitList reads a comma-separated flag value, ignoring blanks.
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// metricsOptions serves /metrics as kubebuilder's scaffold does: with --metrics-secure, over
// HTTPS (a self-signed certificate made at start) behind controller-runtime's authentication
// and authorization filter.
func metricsOptions(o options) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.metricsSecure}
	if o.metricsSecure {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(2)
	}
	level := slog.Level(-o.logLevel)
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})))
	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := vacuumv1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	// Request latency and the client-side rate limiter's wait, beside controller-runtime's
	// default rest_client_requests_total: where a slow reconcile spends its time.
	metrics.RegisterRESTClientMetrics(metrics.MetricRequestLatency, metrics.MetricRateLimiterLatency)
	cfg, err := restConfig(o)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(o),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "vacuum-operator.vacuumops.io",
		LeaderElectionNamespace: o.namespace,
		Cache:                   controllers.CacheOptions(o.watchNamespaces),
		// The manager never lists or watches Secrets: reads of its key go to the API server.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: secretsOnly}},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	key, err := controllers.EnsureManagerKey(ctx, mgr.GetAPIReader(), mgr.GetClient(), o.namespace, o.keySecret)
	if err != nil {
		return err
	}
	recorder := mgr.GetEventRecorder("vacuum-operator")
	m := controllers.NewMetrics(metrics.Registry)
	if err := (&controllers.PolicyReconciler{
		Client: mgr.GetClient(), Scheme: scheme, Recorder: recorder, Workers: o.workers, Metrics: m,
		WindowScheduleSeconds: o.windowSeconds,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up policy controller: %w", err)
	}
	if err := (&controllers.RunReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: scheme, Recorder: recorder,
		Key: key, RunnerImage: o.runnerImage, AllowedImages: o.allowedImages, ProgressInterval: o.progressInterval,
		AllowedPriorityClasses: o.allowedPriorityClasses,
		Workers:                o.workers,
		Metrics:                m,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up run controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.Info("starting manager", "namespace", o.namespace, "watchNamespaces", o.watchNamespaces, "runnerImage", o.runnerImage,
		"progressInterval", o.progressInterval, "workers", o.workers, "kubeAPIQPS", o.kubeAPIQPS, "kubeAPIBurst", o.kubeAPIBurst)
	return mgr.Start(ctx)
}
