#!/usr/bin/env bash
# Builds Kubernetes and etcd binaries from the Go module proxy (no release downloads needed).
#
#   hack/setup-k8s-binaries.sh [COMPONENT...]
#
# COMPONENT is any of: kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet
# kube-proxy kubeadm etcd
# (default: kube-apiserver kubectl etcd, the envtest set). Binaries land in
#   ${XDG_CACHE_HOME:-$HOME/.cache}/vacuum-operator/k8s-${K8S_VERSION}/
# and that directory is printed on stdout as the last line; progress goes to stderr.
# Binaries that already exist and report the expected version are not rebuilt.
#
# How: k8s.io/kubernetes replaces its staging modules with ./staging/src paths, so it cannot be
# `go install`ed. A throwaway wrapper module requires it and replaces every staging module with
# its published release (the list is read from k8s.io/kubernetes's own go.mod). The wrapper
# blank-imports ALL Kubernetes commands we may ever want, so its go.mod changes only when that
# list does (a wrapper lacking one of them is made again) and later builds of kubelet & co.
# reuse the same module graph and Go build cache. etcd gets its own wrapper module.
set -euo pipefail
# shellcheck source=hack/toolchain.sh
source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
CACHE_ROOT=${XDG_CACHE_HOME:-$HOME/.cache}/vacuum-operator
DEST=${CACHE_ROOT}/k8s-${K8S_VERSION#v}
WRAPPERS=${CACHE_ROOT}/wrappers

K8S_COMMANDS=(kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet kube-proxy kubeadm)
DEFAULT_COMPONENTS=(kube-apiserver kubectl etcd)

log() { echo "setup-k8s-binaries: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Temp dirs registered here are removed on any exit, so a failed or interrupted run leaves
# nothing half-made behind.
TEMPS=()
cleanup() { ((${#TEMPS[@]} == 0)) || rm -rf "${TEMPS[@]}"; }
trap cleanup EXIT

# The wrappers are our own modules: never let the caller's workspace or flags leak in.
export GOWORK=off GOFLAGS=-buildvcs=false CGO_ENABLED=0

# version_ok COMPONENT: true if $DEST/COMPONENT exists, runs, and reports the expected version.
version_ok() {
  local bin=$DEST/$1 out
  [[ -x $bin ]] || return 1
  case $1 in
    etcd) out=$("$bin" --version 2>/dev/null) || return 1
          grep -q "etcd Version: ${ETCD_VERSION#v}\$" <<<"$out" ;;
    kubectl) out=$("$bin" version --client 2>/dev/null) || return 1
             grep -q "Client Version: ${K8S_VERSION}\$" <<<"$out" ;;
    kubeadm) out=$("$bin" version -o short 2>/dev/null) || return 1
             [[ $out == "${K8S_VERSION}" ]] ;;
    *) out=$("$bin" --version 2>/dev/null) || return 1
       [[ $out == "Kubernetes ${K8S_VERSION}" ]] ;;
  esac
}

# make_wrapper DIR MODULE VERSION IMPORT... : creates (once) a wrapper module in DIR that requires
# MODULE@VERSION and blank-imports IMPORT... under the "tools" build tag. Runs REPLACE_FN (if
# set) inside the new module before tidying. Built in a temp dir and renamed into place, so a
# half-made wrapper is never reused.
make_wrapper() {
  local dir=$1 module=$2 version=$3; shift 3
  if [[ -f $dir/.complete ]]; then
    local imp missing=0
    for imp in "$@"; do grep -qF "\"$imp\"" "$dir/tools.go" || missing=1; done
    ((missing)) || return 0
    log "wrapper module $dir lacks a command of the list: making it again"
  fi
  log "creating wrapper module $dir"
  mkdir -p "$(dirname "$dir")"
  local tmp; tmp=$(mktemp -d "${dir}.tmp.XXXXXX")
  TEMPS+=("$tmp")
  # No `|| ...` after this subshell: that would switch off set -e inside it.
  (
    cd "$tmp"
    go mod init "vacuum-operator.local/$(basename "$dir")" >/dev/null 2>&1
    go mod edit -require="${module}@${version}"
    if [[ -n ${REPLACE_FN:-} ]]; then "$REPLACE_FN"; fi
    {
      echo '//go:build tools'
      echo
      echo '// Package tools pins the commands this wrapper module builds.'
      echo 'package tools'
      echo
      echo 'import ('
      local imp; for imp in "$@"; do echo "	_ \"$imp\""; done
      echo ')'
    } >tools.go
    local t0=$SECONDS
    go mod tidy >&2
    log "go mod tidy in $(basename "$dir"): $((SECONDS - t0))s"
    touch .complete
  )
  rm -rf "$dir"
  mv "$tmp" "$dir"
}

# k8s_staging_replaces: adds `replace k8s.io/X => k8s.io/X v0.MINOR.PATCH` for every
# `k8s.io/X => ./staging/src/k8s.io/X` line in k8s.io/kubernetes's own go.mod.
k8s_staging_replaces() {
  local gomod staging_version=v0.${K8S_VERSION#v1.} n=0 mod
  gomod=$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | jq -r .GoMod)
  [[ -f $gomod ]] || die "no go.mod for k8s.io/kubernetes@${K8S_VERSION} in the module cache"
  while read -r mod; do
    go mod edit -replace="${mod}=${mod}@${staging_version}"
    n=$((n + 1))
  done < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\/src\// { print $1 }' "$gomod")
  ((n > 20)) || die "found only $n staging replaces in $gomod; its format changed?"
  log "added $n staging replaces (=> ${staging_version})"
}

# k8s_ldflags: version stamps as upstream's hack/lib/version.sh sets them (unstamped binaries say
# v0.0.0-master, which kubectl cannot parse). buildDate is the tag's time from the module proxy,
# so rebuilds are reproducible; gitCommit is "unknown" unless the proxy recorded the VCS origin.
k8s_ldflags() {
  local info commit date minor pkg flags=(-s -w)
  info=$(go mod download -json "k8s.io/kubernetes@${K8S_VERSION}")
  # The proxy's .info holds the tag time; the commit only when it recorded the VCS origin.
  commit=$(jq -r '.Origin.Hash // empty' <<<"$info")
  date=$(jq -r '.Time // empty' "$(jq -r .Info <<<"$info")")
  date=$(date -u -d "${date:-@0}" +%Y-%m-%dT%H:%M:%SZ)
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=(-X "${pkg}.gitVersion=${K8S_VERSION}" -X "${pkg}.gitMajor=1" -X "${pkg}.gitMinor=${minor}"
            -X "${pkg}.gitTreeState=clean" -X "${pkg}.gitCommit=${commit:-unknown}"
            -X "${pkg}.buildDate=${date}")
  done
  echo "${flags[*]}"
}

# build_into_dest WRAPPER_DIR LDFLAGS NAME=PKG... : builds each PKG as binary NAME in one
# `go build` (so packages compile in parallel) into a temp dir, then moves the binaries into
# $DEST (a rename on the same filesystem: nobody ever sees a partial file).
build_into_dest() {
  local wrapper=$1 ldflags=$2; shift 2
  local tmp t0=$SECONDS names=("${@%%=*}") pkgs=("${@#*=}") i
  tmp=$(mktemp -d "$DEST/.build.XXXXXX")
  TEMPS+=("$tmp")
  log "building ${names[*]} (a cold build takes minutes)"
  # -o DIR/ names binaries after their packages; a lone package gets its NAME explicitly
  # (go would call go.etcd.io/etcd/server/v3 "server").
  local out=$tmp/
  ((${#pkgs[@]} > 1)) || out=$tmp/${names[0]}
  (cd "$wrapper" && go build -trimpath -ldflags="$ldflags" -o "$out" "${pkgs[@]}" >&2) ||
    die "go build failed in $wrapper"
  for i in "${names[@]}"; do mv -f "$tmp/$i" "$DEST/$i"; done
  log "built ${names[*]} in $((SECONDS - t0))s"
}

main() {
  local components=("$@") c
  ((${#components[@]})) || components=("${DEFAULT_COMPONENTS[@]}")
  for c in "${components[@]}"; do
    [[ " ${K8S_COMMANDS[*]} etcd " == *" $c "* ]] || die "unknown component '$c'"
  done

  # Fast path without the lock: binaries are only ever renamed into place, never half-written.
  local missing=()
  for c in "${components[@]}"; do version_ok "$c" || missing+=("$c"); done
  if ((${#missing[@]} == 0)); then echo "$DEST"; return 0; fi

  mkdir -p "$DEST"
  exec 9>"$CACHE_ROOT/.lock"
  # One builder at a time; a waiting caller then finds the binaries ready.
  flock -n 9 || { log "waiting for another build to finish ($CACHE_ROOT/.lock)"; flock 9; }

  local k8s_pkgs=() want_etcd=0
  for c in "${missing[@]}"; do
    version_ok "$c" && continue
    if [[ $c == etcd ]]; then want_etcd=1; else k8s_pkgs+=("$c=k8s.io/kubernetes/cmd/$c"); fi
  done

  if ((${#k8s_pkgs[@]})); then
    local wrapper=$WRAPPERS/k8s-${K8S_VERSION#v} all=() cmd ldflags
    for cmd in "${K8S_COMMANDS[@]}"; do all+=("k8s.io/kubernetes/cmd/$cmd"); done
    REPLACE_FN=k8s_staging_replaces make_wrapper "$wrapper" k8s.io/kubernetes "$K8S_VERSION" "${all[@]}"
    ldflags=$(cd "$wrapper" && k8s_ldflags)
    build_into_dest "$wrapper" "$ldflags" "${k8s_pkgs[@]}"
  fi
  if ((want_etcd)); then
    REPLACE_FN='' make_wrapper "$WRAPPERS/etcd-${ETCD_VERSION#v}" \
      go.etcd.io/etcd/server/v3 "$ETCD_VERSION" go.etcd.io/etcd/server/v3
    build_into_dest "$WRAPPERS/etcd-${ETCD_VERSION#v}" "-s -w" etcd=go.etcd.io/etcd/server/v3
  fi

  for c in "${components[@]}"; do
    version_ok "$c" || die "$DEST/$c does not report the expected version after the build"
  done
  log "ready: ${components[*]}"
  echo "$DEST"
}

main "$@"
