#!/usr/bin/env bash
# Prints the directory holding envtest's control plane (kube-apiserver, etcd, kubectl) and the
# kube-controller-manager the local dev cluster and test/install run beside it, building the
# binaries from the Go module proxy first if needed (cold: ~10 min; afterwards: instant):
#
#   export KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh)
#
# SETUP_ENVTEST_EXTRA=1 also builds kube-scheduler, kubelet and kube-proxy (for the real-cluster
# lane) into the same directory, reusing the same wrapper module and Go cache.
set -euo pipefail
components=(kube-apiserver etcd kubectl kube-controller-manager)
if [[ ${SETUP_ENVTEST_EXTRA:-0} == 1 ]]; then
  components+=(kube-scheduler kubelet kube-proxy)
fi
exec "$(dirname "${BASH_SOURCE[0]}")/setup-k8s-binaries.sh" "${components[@]}"
