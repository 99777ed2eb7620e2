// Package devcluster starts the local dev cluster, for development and tests only: envtest's
// kube-apiserver and etcd (built by hack/setup-envtest.sh), the CRDs from config/crd/bases, a
// kubeconfig a person can use, the real kube-controller-manager (same build) with the
// deployment, replicaset, statefulset, endpointslice and garbage-collector controllers, a
// local node (internal/localnode) that runs every pod of the cluster as a local process (the
// operator's, and those of Deployments and StatefulSets, restart policy honoured, claims of
// volumeClaimTemplates provisioned on the host), and the manager as a separate process built
// from ./cmd/manager, unchanged, pointed at that kubeconfig. No scheduler runs: the node binds
// the pods itself. No kube-proxy runs: the node points the Service environment variables at a
// ready endpoint.
//
// Root (or CAP_NET_ADMIN) on Linux is needed for the pods' addresses to be routable ones
// (Cluster.PodCIDR); without it they are loopback addresses, which the API server refuses in
// EndpointSlices, so Services have no endpoints (Cluster.Loopback; Start says so).
//
// Invariants:
//   - Everything Start started, Stop stops, in reverse order: the manager (SIGTERM, SIGKILL
//     after 10 s), kube-controller-manager (so no controller recreates pods), the local node
//     (which stops its pods and releases its pod range), the control plane. A failed Start
//     stops what it had started before returning.
//   - State lives under Options.StateDir (a fresh temp dir by default, removed by Stop unless
//     Options.KeepState): kubeconfig, node/ (pod dirs, logs and provisioned volumes),
//     logs/manager.log and logs/kube-controller-manager.log.
//   - The manager's metrics and probe endpoints bind to 127.0.0.1 on free ports, so they never
//     collide with runner pods listening on their own addresses (see internal/localnode).
//   - Runner pods use the image RunnerImage, which the local node maps to Options.BinDir (the
//     locally built vacuum-runner), and so is SampleImage, the samples' name of the same image:
//     a container command /X runs BinDir/X, so an app of that image (the engine server's
//     StatefulSet, command /engine-server) needs BinDir/engine-server built too, which
//     Options.Build does.
package devcluster
