// Package e2ereal is the end-to-end suite of the real-cluster lane: the operator deployed from
// config/ (kustomize) as a Deployment of the image built by `make image-tar`, on the real
// single-node cluster of hack/realcluster (kubelet, containerd, runc), with runner pods as real
// containers on local PersistentVolumes.
//
// Run it with `make test-e2e-real` (root on Linux), which brings the cluster up, runs this suite
// and always brings it down, failing if the host is not as before. Outside that lane (no
// E2E_REAL=1 in the environment) every spec is skipped, so `go test ./...` stays hermetic.
//
// Environment:
//
//	E2E_REAL=1          run the suite
//	KUBECONFIG          the cluster's admin kubeconfig (hack/realcluster/up prints it)
//	REALCLUSTER_DIR     the cluster's state directory (default /var/tmp/vacuum-realcluster):
//	                    where the suite finds kubectl, the containerd socket, and makes volumes
//	E2E_REAL_IMAGE      the operator image imported into the node (default vacuum-operator:dev)
//	E2E_REAL_CONTAINERD the node's containerd socket (default REALCLUSTER_DIR/run/containerd.sock)
//	E2E_REAL_PROC       the node's /proc as the host sees it (default /proc)
//	E2E_REAL_VOLUMES    where the suite makes volumes on the host (default REALCLUSTER_DIR/volumes)
//	E2E_REAL_NODE_VOLUMES the same directory as the node sees it (default E2E_REAL_VOLUMES)
//	E2E_REAL_RUNNER     the vacuum-runner binary used on the host to make and check volumes
//	                    (default bin/vacuum-runner)
//
// Invariants: every object the suite makes lives in its own namespaces or is a PersistentVolume
// named e2e-real-*, and volumes live under REALCLUSTER_DIR, so `down` removes them all.
package e2ereal
