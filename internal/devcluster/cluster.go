package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	vacuumv1alpha1 "github.com/vacuumops/vacuum-operator/api/v1alpha1"
	"github.com/vacuumops/vacuum-operator/internal/localnode"
)

// RunnerImage is the image the dev cluster's manager gives runner pods; the local node maps
// it to Options.BinDir.
const RunnerImage = "localhost/vacuum-operator:dev"

// SampleImage is the image config/samples and `make image-tar` name (the engine server's
// StatefulSet, the load generator); the local node maps it to Options.BinDir too, so the
// samples apply to the dev cluster unchanged.
const SampleImage = "vacuum-operator:dev"

// ManagerNamespace is where the dev cluster's manager keeps its key Secret.
const ManagerNamespace = "vacuum-operator-system"

// Options configure a dev cluster. Only RepoRoot is required.
type Options struct {
	// RepoRoot is the repository (CRDs, hack/setup-envtest.sh, ./cmd/manager).
	RepoRoot string
	// BinDir holds manager and vacuum-runner (default RepoRoot/bin).
	BinDir string
	// Build builds ./cmd/manager, ./cmd/vacuum-runner and ./cmd/engine-server (the samples'
	// server) into BinDir first.
	Build bool
	// StateDir holds the kubeconfig, the node's state and the logs (default: a new temp dir).
	StateDir string
	// KeepState keeps StateDir after Stop (a temp dir is removed otherwise).
	KeepState bool
	// NoManager starts no manager (for tests that play it themselves).
	NoManager bool
	// ManagerArgs are appended to the manager's flags (e.g. --progress-interval=1s).
	ManagerArgs []string
	// RestartBackoff is the local node's first back-off before it restarts a container
	// (default: a kubelet's 10 s).
	RestartBackoff time.Duration
	// Log receives progress lines (default: discard).
	Log io.Writer
	// NodeLog receives the local node's structured log (default: discard).
	NodeLog logr.Logger
}

// Cluster is a running dev cluster.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig for this cluster.
	Kubeconfig string
	// Config is the same credentials as a rest.Config.
	Config *rest.Config
	// Client is a client with the core and vacuum API types.
	Client client.Client
	// StateDir is the cluster's state directory; NodeStateDir the local node's.
	StateDir, NodeStateDir string
	// AssetsDir holds kube-apiserver, etcd and (usually) kubectl.
	AssetsDir string
	// ManagerLog is the manager's log file; ControllerManagerLog kube-controller-manager's.
	ManagerLog, ControllerManagerLog string
	// PodCIDR is the range of the local node's pod addresses; Loopback is true when it fell
	// back to loopback addresses (not root), which no EndpointSlice can carry.
	PodCIDR  string
	Loopback bool

	opts        Options
	env         *envtest.Environment
	stopNode    context.CancelFunc
	nodeDone    chan error
	manager     *childProcess
	controllers *childProcess
	tempDir     bool
}

// Scheme has the core and vacuum API types.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := vacuumv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Start builds (if asked) and starts the control plane, the local node and the manager.
// On error everything already started is stopped.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.RepoRoot == "" {
		return nil, errors.New("devcluster: no repository root")
	}
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.RepoRoot, "bin")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	c = &Cluster{opts: o}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	if c.StateDir = o.StateDir; c.StateDir == "" {
		if c.StateDir, err = os.MkdirTemp("", "vacuum-devcluster-"); err != nil {
			return c, fmt.Errorf("devcluster: state dir: %w", err)
		}
		c.tempDir = true
	}
	if err := os.MkdirAll(filepath.Join(c.StateDir, "logs"), 0o700); err != nil {
		return c, fmt.Errorf("devcluster: %w", err)
	}
	if o.Build {
		_, _ = fmt.Fprintln(o.Log, "building manager, vacuum-runner and engine-server into", o.BinDir)
		if err := Build(ctx, o.RepoRoot, o.BinDir, "manager", "vacuum-runner", "engine-server"); err != nil {
			return c, err
		}
	}
	if c.AssetsDir, err = AssetsDir(ctx, o.RepoRoot); err != nil {
		return c, err
	}
	if err := c.startControlPlane(); err != nil {
		return c, err
	}
	_, _ = fmt.Fprintln(o.Log, "control plane up; kubeconfig:", c.Kubeconfig)
	if c.controllers, err = startControllerManager(ctx, c); err != nil {
		return c, err
	}
	_, _ = fmt.Fprintln(o.Log, "kube-controller-manager started ("+strings.Join(Controllers, ", ")+"); log:", c.ControllerManagerLog)
	if err := c.startNode(); err != nil {
		return c, err
	}
	if c.Loopback {
		_, _ = fmt.Fprintln(o.Log, "local node: pods get loopback addresses ("+c.PodCIDR+"): routing a pod range needs root (or CAP_NET_ADMIN) on Linux; "+
			"the API server refuses loopback addresses in EndpointSlices, so Services have no endpoints and online runs cannot resolve their server")
	} else {
		_, _ = fmt.Fprintln(o.Log, "local node: pod addresses from", c.PodCIDR)
	}
	if err := EnsureNamespace(ctx, c.Client, ManagerNamespace); err != nil {
		return c, err
	}
	if o.NoManager {
		return c, nil
	}
	if c.manager, err = startManager(c, o); err != nil {
		return c, err
	}
	_, _ = fmt.Fprintln(o.Log, "manager started; log:", c.ManagerLog)
	return c, nil
}

// startControlPlane starts etcd and kube-apiserver with the CRDs installed and writes the
// kubeconfig.
func (c *Cluster) startControlPlane() error {
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	c.env = &envtest.Environment{
		BinaryAssetsDirectory: c.AssetsDir,
		CRDDirectoryPaths:     []string{filepath.Join(c.opts.RepoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	if c.Config, err = c.env.Start(); err != nil {
		c.env = nil
		return fmt.Errorf("devcluster: start control plane from %s: %w", c.AssetsDir, err)
	}
	c.Kubeconfig = filepath.Join(c.StateDir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, c.env.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("devcluster: write kubeconfig: %w", err)
	}
	if c.Client, err = client.New(c.Config, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("devcluster: client: %w", err)
	}
	return nil
}

// startNode starts the local node in this process.
func (c *Cluster) startNode() error {
	c.NodeStateDir = filepath.Join(c.StateDir, "node")
	n, err := localnode.New(c.Config, localnode.Config{
		Images:   map[string]string{RunnerImage: c.opts.BinDir, SampleImage: c.opts.BinDir},
		StateDir: c.NodeStateDir,
		AllPods:  true, // the only node: it runs the pods of Deployments and StatefulSets too
		Log:      c.opts.NodeLog,

		RestartBackoff: c.opts.RestartBackoff,
	})
	if err != nil {
		return err
	}
	c.PodCIDR, c.Loopback = n.PodCIDR(), n.Loopback()
	ctx, cancel := context.WithCancel(context.Background())
	c.stopNode, c.nodeDone = cancel, make(chan error, 1)
	go func() { c.nodeDone <- n.Run(ctx) }()
	return nil
}

// Stop stops the manager, the local node and the control plane, and removes a temporary
// state dir unless KeepState. It returns the first error met but always stops everything.
func (c *Cluster) Stop() error {
	var errs []error
	if c.manager != nil {
		errs = append(errs, c.manager.stop(10*time.Second))
		c.manager = nil
	}
	// Before the node, so no controller recreates the pods the node stops.
	if c.controllers != nil {
		errs = append(errs, c.controllers.stop(10*time.Second))
		c.controllers = nil
	}
	if c.stopNode != nil {
		c.stopNode()
		errs = append(errs, <-c.nodeDone)
		c.stopNode = nil
	}
	if c.env != nil {
		errs = append(errs, c.env.Stop())
		c.env = nil
	}
	if c.tempDir && !c.opts.KeepState {
		errs = append(errs, os.RemoveAll(c.StateDir))
	}
	return errors.Join(errs...)
}
