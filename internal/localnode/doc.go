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
//     an unbound selected pod whose nodeSelector fits its labels. With Config.AllPods (the dev
//     cluster's only node) every pod is selected and the Node has no taint.
//   - One container per pod, no init containers. Other shapes fail with a message that says so.
//   - The restart policy is honoured as a kubelet does: with Always (or OnFailure after a
//     non-zero exit) an ended container starts again in the same pod, on the same address and
//     volumes, after a back-off (Config.RestartBackoff, 10 s by default, doubling to 5 min),
//     the pod Running but not Ready meanwhile (CrashLoopBackOff), restartCount and
//     lastState in its status. With Never, or OnFailure after exit 0, the pod ends Succeeded
//     or Failed. A pod evicted or being deleted is never restarted.
//   - A claim that is not bound (no spec.volumeName) and has no storageClassName, or
//     StorageClass, is provisioned when a pod first uses it (as a WaitForFirstConsumer
//     provisioner): a hostPath PersistentVolume pvc-<claim uid> in Config.VolumeDir, claimRef
//     and volumeName set, both marked Bound. A StatefulSet's volumeClaimTemplates get theirs
//     this way. A claim of another class (or "") waits for a volume made for it.
//   - Each running pod has its own address, in podIP and podIPs, so several pods can listen on
//     the same port: from Config.PodCIDR (default 10.213.0.0/24, or VACUUM_LOCALNODE_POD_CIDR),
//     .2 upward. The node makes that range local to the host with one route in the kernel's
//     local table (`local 10.213.0.0/24 dev lo proto 213`), so the addresses bind like
//     loopback ones and are reachable only from this host, yet the API server accepts them in
//     EndpointSlices (it refuses 127.0.0.0/8 there). Routing needs root or CAP_NET_ADMIN on
//     Linux; without it a default range falls back to 127.0.0.2-254, and then no Service can
//     have endpoints (the dev cluster says so when it starts). An address returns to the pool
//     when the process ends. The pool is the host's: a pod's address is held by a flock in
//     Config.AddressLockDir (default under the user's cache directory), so the local nodes of
//     two suites running at once never hand out the same address; every node of a range holds
//     a shared lock on it, and the last to stop deletes the route (a route left by a node that
//     died is taken over by the next one and deleted when that one stops). HoldAddress (and
//     package localnodetest) gives a test an address of the range for a server of its own.
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
//   - An emptyDir volume with a sizeLimit is measured every Config.EvictionInterval (1 s):
//     its files' blocks plus the files the pod's process unlinked there and keeps open. Over
//     the limit, the pod is evicted as a kubelet evicts it: SIGKILL, phase Failed, reason
//     Evicted, "Usage of EmptyDir volume ... exceeds the limit ...".
//   - Status written back: phase Pending -> Running -> Succeeded/Failed, podIP(s), hostIP,
//     conditions (PodScheduled, Initialized, ContainersReady, Ready), the container state
//     (waiting, running with startedAt, terminated with exitCode, reason, message = the
//     termination message file, at most 4096 bytes, startedAt/finishedAt).
package localnode
