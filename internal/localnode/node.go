package localnode

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// DefaultNodeName is the Node the local node registers unless told otherwise.
const DefaultNodeName = "vacuum-localnode"

// LabelLocalNode is set to "true" on the Node; the node's taint has the same key.
const LabelLocalNode = "vacuum.vacuumops.io/local-node"

// DefaultSelector selects the pods the local node may run: the operator's.
const DefaultSelector = "app.kubernetes.io/managed-by=vacuum-operator"

// AnyImage as a key of Config.Images maps every image not listed by name.
const AnyImage = "*"

// Config configures a local node.
type Config struct {
	// NodeName is the Node's name (default DefaultNodeName).
	NodeName string
	// Selector picks the pods the node may bind and run (default DefaultSelector).
	Selector labels.Selector
	// Images maps an image reference (its repository, tag and digest ignored, or the full
	// reference, or AnyImage) to a host directory standing for the image's root filesystem:
	// a container command /vacuum-runner runs <dir>/vacuum-runner.
	Images map[string]string
	// StateDir holds the pods' directories and the logs; it is created if needed.
	StateDir string
	// VolumeDir holds the volumes the node provisions for unbound claims (default
	// StateDir/volumes).
	VolumeDir string
	// PodCIDR is the range of the pods' addresses (default: PodCIDREnv if set, else
	// DefaultPodCIDR). Outside 127.0.0.0/8 the node routes it to lo, which needs root (or
	// CAP_NET_ADMIN) on Linux; without that right a default range falls back to
	// LoopbackPodCIDR, whose addresses the API server refuses in EndpointSlices, while a range
	// set here (or in PodCIDREnv) is an error.
	PodCIDR string
	// AddressLockDir holds the locks by which the local nodes of one host share out the pod
	// addresses (default DefaultAddressLockDir()). Nodes given different directories may
	// hand out the same address.
	AddressLockDir string
	// AllPods makes the node run every pod of the cluster, Selector ignored, and register
	// without its NoSchedule taint: the dev cluster's node, the only node there, runs the
	// pods of Deployments and StatefulSets too.
	AllPods bool
	// RestartBackoff is the first back-off before a container of a pod whose restart policy
	// asks for it is started again; it doubles per restart up to 5 minutes, as a kubelet's
	// (default DefaultRestartBackoff).
	RestartBackoff time.Duration
	// EvictionInterval is how often the emptyDir volumes with a sizeLimit of a running pod
	// are measured (default DefaultEvictionInterval); a pod over a limit is evicted.
	EvictionInterval time.Duration
	// Log receives the node's log lines (default: discard).
	Log logr.Logger
}

// DefaultRestartBackoff is a kubelet's first back-off before restarting a container.
const DefaultRestartBackoff = 10 * time.Second

// Node is a running local node. Create it with New, then call Run.
type Node struct {
	cfg    Config
	client client.Client // cached reads of selected pods, direct writes
	reader client.Reader // uncached: secrets, configmaps, PVCs, PVs, fresh pods
	mgr    ctrl.Manager
	ips    *addressPool

	mu    sync.Mutex
	procs map[types.UID]*podProcess
	wg    sync.WaitGroup // one per process watcher

	// life ends when the node stops: watchers still trying to report a pod's end give up
	// then (as a kubelet that is shut down stops reporting).
	life     context.Context
	stopLife context.CancelFunc
	// stopping is closed when the node starts stopping its pods: no container restarts then.
	stopping     chan struct{}
	stoppingOnce sync.Once
}

// New prepares a local node against the API server of rc. It does not contact it yet.
func New(rc *rest.Config, cfg Config) (n *Node, err error) {
	if cfg.NodeName == "" {
		cfg.NodeName = DefaultNodeName
	}
	if cfg.Selector == nil {
		sel, err := labels.Parse(DefaultSelector)
		if err != nil {
			return nil, fmt.Errorf("parse default selector: %w", err)
		}
		cfg.Selector = sel
	}
	if cfg.Selector.Empty() && !cfg.AllPods {
		return nil, errors.New("local node: an empty pod selector would run every pod; name the pods it may run")
	}
	if len(cfg.Images) == 0 {
		return nil, errors.New("local node: no image is mapped to a host directory")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("local node: no state directory")
	}
	if cfg.VolumeDir == "" {
		cfg.VolumeDir = filepath.Join(cfg.StateDir, "volumes")
	}
	if cfg.RestartBackoff <= 0 {
		cfg.RestartBackoff = DefaultRestartBackoff
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "pods"), filepath.Join(cfg.StateDir, "logs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("local node: create %s: %w", d, err)
		}
	}
	if cfg.AddressLockDir == "" {
		dir, err := DefaultAddressLockDir()
		if err != nil {
			return nil, err
		}
		cfg.AddressLockDir = dir
	}
	ips, err := openPodAddresses(&cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if n == nil {
			_ = ips.close()
		}
	}()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("local node: build scheme: %w", err)
	}
	mgr, err := ctrl.NewManager(rc, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 cfg.Log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  podCache(cfg),
	})
	if err != nil {
		return nil, fmt.Errorf("local node: create manager: %w", err)
	}
	node := &Node{cfg: cfg, client: mgr.GetClient(), reader: mgr.GetAPIReader(), mgr: mgr, ips: ips,
		procs: map[types.UID]*podProcess{}}
	node.life, node.stopLife = context.WithCancel(context.Background())
	node.stopping = make(chan struct{})
	err = ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}).
		Named("localnode").
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 2}).
		Complete(node)
	if err != nil {
		return nil, fmt.Errorf("local node: create pod controller: %w", err)
	}
	return node, nil
}

// podCache filters the node's pod cache by its selector, unless it runs every pod.
func podCache(cfg Config) cache.Options {
	if cfg.AllPods {
		return cache.Options{}
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: cfg.Selector}}}
}

// openPodAddresses opens the pod address pool of cfg.PodCIDR (filled in with the default),
// falling back to loopback when a default range cannot be routed.
func openPodAddresses(cfg *Config) (*addressPool, error) {
	explicit := cfg.PodCIDR != "" || os.Getenv(PodCIDREnv) != ""
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = defaultPodCIDR()
	}
	prefix, err := ParsePodCIDR(cfg.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("local node: %w", err)
	}
	pool, err := openAddressPool(cfg.AddressLockDir, prefix)
	if errors.Is(err, errRouteNotPermitted) && !explicit {
		cfg.Log.Info("pods get loopback addresses: the API server refuses them in EndpointSlices, so Services get no endpoints",
			"podCIDR", LoopbackPodCIDR, "reason", err.Error())
		cfg.PodCIDR = LoopbackPodCIDR
		pool, err = openAddressPool(cfg.AddressLockDir, netip.MustParsePrefix(LoopbackPodCIDR))
	}
	if err != nil {
		return nil, fmt.Errorf("local node: %w", err)
	}
	return pool, nil
}

// PodCIDR is the range the node's pods get their addresses from: Config.PodCIDR, or what the
// node fell back to (LoopbackPodCIDR).
func (n *Node) PodCIDR() string { return n.cfg.PodCIDR }

// Loopback reports whether pods get loopback addresses, which no EndpointSlice can carry.
func (n *Node) Loopback() bool { return n.ips.loopback }

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.NodeName }

// Run registers the Node, then binds and runs pods until ctx ends; it then stops every
// process it started (SIGTERM, SIGKILL after 5 s) and releases the pod range (the last node of
// the host using it deletes its route) before returning. A Node from New must be Run once.
func (n *Node) Run(ctx context.Context) error {
	if err := n.register(ctx); err != nil {
		return errors.Join(err, n.ips.close())
	}
	hbCtx, stopHeartbeat := context.WithCancel(ctx)
	defer stopHeartbeat()
	go n.heartbeat(hbCtx)
	err := n.mgr.Start(ctx)
	n.stopAll(5 * time.Second)
	err = errors.Join(err, n.ips.close())
	if err != nil {
		return fmt.Errorf("local node %s: %w", n.cfg.NodeName, err)
	}
	return nil
}

// stopAll terminates every process still running and waits for their watchers.
func (n *Node) stopAll(grace time.Duration) {
	n.stoppingOnce.Do(func() { close(n.stopping) })
	n.mu.Lock()
	for _, p := range n.procs {
		p.terminate(grace)
	}
	n.mu.Unlock()
	// Give the watchers of the processes just stopped one try at reporting their end, then
	// stop the retries of any report the API server does not take.
	waited := make(chan struct{})
	go func() {
		select {
		case <-time.After(grace + reportTimeout):
			n.stopLife()
		case <-waited:
		}
	}()
	n.wg.Wait()
	close(waited)
	n.stopLife()
}

// isStopping reports whether the node is stopping its pods.
func (n *Node) isStopping() bool {
	select {
	case <-n.stopping:
		return true
	default:
		return false
	}
}

// podDir is a pod's private directory on the host.
func (n *Node) podDir(pod *corev1.Pod) string {
	return filepath.Join(n.cfg.StateDir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// logPath is where a container's stdout and stderr go.
func (n *Node) logPath(pod *corev1.Pod, container string) string {
	return filepath.Join(n.cfg.StateDir, "logs", fmt.Sprintf("%s_%s_%s.log", pod.Namespace, pod.Name, container))
}
