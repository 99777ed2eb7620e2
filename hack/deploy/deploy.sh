#!/usr/bin/env bash
# Deploys the operator (CRDs, RBAC, the manager Deployment in vacuum-operator-system) from
# config/default to the cluster of the current kubeconfig, with the manager and its runner pods
# using image $IMG, or removes it again. Used by `make deploy` and `make undeploy`.
#
#   hack/deploy/deploy.sh render                 # print the manifests
#   hack/deploy/deploy.sh deploy                 # kubectl apply --server-side, then wait for the rollout
#   hack/deploy/deploy.sh undeploy               # kubectl delete (also deletes every VacuumPolicy and VacuumRun)
#
# Environment:
#   IMG          image of the manager and of the runner pods (default vacuum-operator:dev, as `make image-tar` tags it)
#   PULL_POLICY  imagePullPolicy of the manager (default IfNotPresent: an image loaded with `kind load` is used as is)
#   KUBECTL      kubectl to use (default: kubectl on PATH, else the one hack/setup-envtest.sh builds)
#   DRY_RUN      "server" or "client": pass --dry-run to kubectl, change nothing
#   WAIT         how long deploy waits for the manager to be available (default 180s; 0 = do not wait)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
img="${IMG:-vacuum-operator:dev}"
pull="${PULL_POLICY:-IfNotPresent}"
wait="${WAIT:-180s}"
dry=()
case "${DRY_RUN:-}" in
  "") ;;
  server|client) dry=(--dry-run="$DRY_RUN") ;;
  *) echo "deploy: DRY_RUN must be server or client, not '$DRY_RUN'" >&2; exit 2 ;;
esac
case "$pull" in
  Always|IfNotPresent|Never) ;;
  *) echo "deploy: PULL_POLICY must be Always, IfNotPresent or Never, not '$pull'" >&2; exit 2 ;;
esac
if [[ ! "$img" =~ ^[A-Za-z0-9][A-Za-z0-9._/:@-]*$ ]]; then
  echo "deploy: IMG '$img' is not an image reference" >&2; exit 2
fi

kubectl="${KUBECTL:-}"
if [[ -z "$kubectl" ]]; then
  if command -v kubectl >/dev/null 2>&1; then kubectl=kubectl
  else kubectl="$("$root/hack/setup-envtest.sh")/kubectl"; fi
fi

# A throwaway overlay over config/default: the manager container's image, pull policy and the
# runner image it gives runner pods (its RUNNER_IMAGE variable), all set to $img. Nothing in
# config/ is edited. It lives under bin/ (ignored by git) because kustomize wants the base as a
# relative path.
mkdir -p "$root/bin"
overlay="$(mktemp -d "$root/bin/deploy-overlay.XXXXXX")"
trap 'rm -rf "$overlay"' EXIT
cat >"$overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../config/default
patches:
- target: {kind: Deployment, name: vacuum-operator-controller-manager}
  patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: vacuum-operator-controller-manager}
    spec:
      template:
        spec:
          containers:
          - name: manager
            image: "$img"
            imagePullPolicy: $pull
            env:
            - name: RUNNER_IMAGE
              value: "$img"
YAML
render() { "$kubectl" kustomize "$overlay"; }

# kubectl wait fails at once, rather than waiting, on a CRD the API server has not yet given
# any condition (".status.conditions accessor error: <nil>"): try again for up to a minute.
wait_established() {
  local deadline=$((SECONDS + 60))
  until "$kubectl" wait --for=condition=Established --timeout=10s "$@"; do
    (( SECONDS < deadline )) || return 1
    sleep 1
  done
}

case "${1:-}" in
  render)
    render ;;
  deploy)
    render | "$kubectl" apply --server-side --force-conflicts "${dry[@]}" -f -
    if [[ ${#dry[@]} -eq 0 && "$wait" != 0 ]]; then
      wait_established crd/vacuumpolicies.vacuum.vacuumops.io crd/vacuumruns.vacuum.vacuumops.io
      "$kubectl" -n vacuum-operator-system rollout status deployment/vacuum-operator-controller-manager --timeout="$wait"
    fi ;;
  undeploy)
    render | "$kubectl" delete --ignore-not-found --wait=false "${dry[@]}" -f - ;;
  *)
    echo "usage: $0 render|deploy|undeploy" >&2; exit 2 ;;
esac
