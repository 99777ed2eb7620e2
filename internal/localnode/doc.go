// Package localnode is a development and test stand-in for a kubelet: the "local node" of the
// local dev cluster (see internal/devcluster). It is never part of a real deployment.
//
// It registers one Ready Node, binds the pods it is allowed to run (those matching its label
// selector, by default the operator's app.kubernetes.io/managed-by=vacuum-operator; no
// scheduler runs beside envtest's API server) and plays kubelet for them: the container's
// command runs as a local process, the image's filesystem being a host directory (the
// locally built binaries).
//
// Invariants:
//   - A pod runs only if it is bound to this node AND matches the selector. The node's pod
//     cache is filtered by the selector: it never sees, binds or runs any other pod. It binds
//     an unbound selected pod whose nodeSelector fits its labels.
//   - One container per pod, no init containers, restart policy treated as Never: the shape
//     of the operator's runner pods. Other shapes fail with a message that says so.
//   - Each running pod has its own loopback address 127.0.0.x (x from 2 to 254), so several
//     pods can listen on the same port. An address returns to the pool when the process ends.
//     The pool is the host's: a pod's address is held by a flock in Config.AddressLockDir
//     (default under the user's cache directory), so the local nodes of two suites running
//     at once never hand out the same address.
//   - Without root or mount namespaces, every volumeMount's mountPath (and the termination
//     message path) is rewritten to its host directory wherever it appears as a path in the
//     args, the command and the env values (as a whole path component run, e.g. inside a JSON
//     argument "dataDir":"/data"). The working directory is the pod's own directory.
//   - Host layout under Config.StateDir:
//     pods/<namespace>_<name>_<uid>/ (0700): volumes/<name>/ for secret, configMap and
//     emptyDir volumes (files 0600), termination-log, pid (the process id, for tests);
//     logs/<namespace>_<name>_<container>.log: the process's stdout and stderr.
//   - Deleting a pod (deletionTimestamp set) sends SIGTERM to the process group, SIGKILL after
//     the grace period, then, once the process has ended, deletes the pod with grace 0 as a
//     kubelet does. Stopping the node kills every process it started.
//   - Status written back: phase Pending -> Running -> Succeeded/Failed, podIP(s), hostIP,
//     conditions (PodScheduled, Initialized, ContainersReady, Ready), the container state
//     (waiting, running with startedAt, terminated with exitCode, reason, message = the
//     termination message file, at most 4096 bytes, startedAt/finishedAt).
package localnode
