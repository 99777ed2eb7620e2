// Package devcluster starts the local dev cluster, for development and tests only: envtest's
// kube-apiserver and etcd (built by hack/setup-envtest.sh), the CRDs from config/crd/bases, a
// kubeconfig a person can use, a local node (internal/localnode) that runs the operator's
// pods as local processes, and the manager as a separate process built from ./cmd/manager,
// unchanged, pointed at that kubeconfig.
//
// Invariants:
//   - Everything Start started, Stop stops, in reverse order: the manager (SIGTERM, SIGKILL
//     after 10 s), the local node (which stops its pods), the control plane. A failed Start
//     stops what it had started before returning.
//   - State lives under Options.StateDir (a fresh temp dir by default, removed by Stop unless
//     Options.KeepState): kubeconfig, node/ (pod dirs and logs), logs/manager.log.
//   - The manager's metrics and probe endpoints bind to 127.0.0.1 on free ports, so they never
//     collide with runner pods listening on their own addresses (see internal/localnode).
//   - Runner pods use the image RunnerImage, which the local node maps to Options.BinDir (the
//     locally built vacuum-runner).
package devcluster
