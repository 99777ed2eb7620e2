#!/usr/bin/env bash
# Prints the directory holding envtest's control plane (kube-apiserver, etcd, kubectl), building
# the binaries from the Go module proxy first if needed (cold: ~10 min; afterwards: instant):
#
#   export KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh)
#
# SETUP_ENVTEST_EXTRA=1 also builds kube-controller-manager, kube-scheduler and kubelet (for the
# real-cluster lane) into the same directory, reusing the same wrapper module and Go cache.
set -euo pipefail
components=(kube-apiserver etcd kubectl)
if [[ ${SETUP_ENVTEST_EXTRA:-0} == 1 ]]; then
  components+=(kube-controller-manager kube-scheduler kubelet)
fi
exec "$(dirname "${BASH_SOURCE[0]}")/setup-k8s-binaries.sh" "${components[@]}"
