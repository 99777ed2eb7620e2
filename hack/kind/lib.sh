# shellcheck shell=bash disable=SC2034
# Shared by hack/kind/node-image, up and down: settings, podman's private configuration, logging.
# Sourced, never run. podman and kind run with a private containers.conf, storage.conf and
# registries.conf (CONTAINERS_CONF & co.), so the host's defaults are never read or changed.

KIND_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=hack/toolchain.sh
source "$KIND_REPO/hack/toolchain.sh"
KIND_VERSION=${KIND_VERSION:-v0.33.0}
# kind's default cluster name: the README's `kind create cluster` makes this one.
KIND_CLUSTER=${KIND_CLUSTER:-kind}
# Where podman keeps its images, containers and volumes, and the lane's own state.
KIND_STATE=${KIND_STATE:-/var/tmp/vacuum-kind}
# The node image's cache (keyed by a hash of its inputs) and the rootfs stages.
KIND_CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/vacuum-operator/kind
KIND_BIN=${KIND_BIN:-$KIND_REPO/bin/kind}
KIND_DEBIAN_SUITE=bookworm
# Debian's mirror, as apt on this host is configured (the node image uses the same one).
KIND_DEBIAN_MIRROR=${KIND_DEBIAN_MIRROR:-}

kd_log() { printf '%s kind-lane: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
kd_die() { kd_log "ERROR: $*"; exit 1; }

kd_require_root_linux() {
  [[ $(uname -s) == Linux ]] || kd_die "the kind lane runs only on Linux (this is $(uname -s))"
  ((EUID == 0)) || kd_die "must run as root (podman runs kind's privileged node container); try: sudo $0"
}

# kd_apt_install PKG...: installs Debian packages that are missing.
kd_apt_install() {
  local missing=() p
  for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  ((${#missing[@]} == 0)) && return 0
  kd_log "installing ${missing[*]} from Debian's packages"
  apt-get update -qq >&2 || kd_die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    kd_die "apt-get install ${missing[*]} failed"
}

# kd_podman_env writes podman's private configuration under $KIND_STATE and exports the
# variables that point podman (and kind, which runs podman) at it.
#  - default_ulimits = []: podman otherwise raises RLIMIT_NPROC for every container, which needs
#    CAP_SYS_RESOURCE, and these machines' capability set lacks it (every container then fails).
#  - cgroup_manager = "cgroupfs", events_logger = "file": the host runs no systemd.
#  - runtime = "runc": crun (podman's default) refuses a host whose cgroup v2 hierarchy holds a
#    controller beside the v1 ones ("cgroups in hybrid mode not supported"), as these machines'
#    hugetlb is; runc runs there (hack/kind/up installs it, as the real-cluster lane does).
#  - its own storage, volume, network and runtime directories, and no registries (nothing is
#    pulled: every image is built here).
kd_podman_env() {
  local conf=$KIND_STATE/conf
  mkdir -p "$conf" "$KIND_STATE/storage" "$KIND_STATE/run" "$KIND_STATE/volumes" "$KIND_STATE/networks" "$KIND_STATE/tmp"
  cat >"$conf/containers.conf.new" <<CONF
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
events_logger = "file"
events_logfile_path = "$KIND_STATE/run/events.log"
tmp_dir = "$KIND_STATE/tmp"
volume_path = "$KIND_STATE/volumes"
static_dir = "$KIND_STATE/storage/libpod"
[network]
network_config_dir = "$KIND_STATE/networks"
CONF
  cat >"$conf/storage.conf.new" <<CONF
[storage]
driver = "overlay"
graphroot = "$KIND_STATE/storage"
runroot = "$KIND_STATE/run/storage"
CONF
  printf 'unqualified-search-registries = []\n' >"$conf/registries.conf.new"
  local f; for f in containers storage registries; do mv -f "$conf/$f.conf.new" "$conf/$f.conf"; done
  export CONTAINERS_CONF=$conf/containers.conf CONTAINERS_STORAGE_CONF=$conf/storage.conf \
    CONTAINERS_REGISTRIES_CONF=$conf/registries.conf KIND_EXPERIMENTAL_PROVIDER=podman
}

# kd_debian_mirror prints Debian's mirror URL from this host's apt sources.
kd_debian_mirror() {
  if [[ -n $KIND_DEBIAN_MIRROR ]]; then echo "$KIND_DEBIAN_MIRROR"; return; fi
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '$1 == "URIs:" && $2 !~ /security/ {print $2; exit}')
  [[ -n $m ]] || m=$(awk '$1 == "deb" && $3 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  [[ -n $m ]] || kd_die "no Debian mirror in /etc/apt/sources.list{,.d}; set KIND_DEBIAN_MIRROR"
  echo "$m"
}

# kd_install_kind installs kind $KIND_VERSION from the Go module proxy into $KIND_BIN when that
# binary is missing or another version.
kd_install_kind() {
  if [[ -x $KIND_BIN ]] && "$KIND_BIN" version 2>/dev/null | grep -q "^kind ${KIND_VERSION} "; then return 0; fi
  kd_log "installing sigs.k8s.io/kind@${KIND_VERSION} into $(dirname "$KIND_BIN")"
  mkdir -p "$(dirname "$KIND_BIN")"
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && GOBIN=$tmp GOWORK=off CGO_ENABLED=0 go install "sigs.k8s.io/kind@${KIND_VERSION}" >&2) ||
    { rm -rf "$tmp"; kd_die "go install sigs.k8s.io/kind@${KIND_VERSION} failed"; }
  mv -f "$tmp/kind" "$KIND_BIN"; rm -rf "$tmp"
}

# kd_hoststate loads the real-cluster lane's host-state record and check (hack/realcluster/
# hoststate.sh), pointed at the kind lane's record and at what podman and kind change: the
# host's iptables/nft rules and sysctls (netavark's network for kind), links (its bridge and
# veth), mounts, cgroups (podman's cgroupfs parent), and the fixed paths below.
kd_hoststate() {
  # shellcheck disable=SC2034
  REALCLUSTER_DIR=$KIND_STATE/host
  # shellcheck source=hack/realcluster/lib.sh
  source "$KIND_REPO/hack/realcluster/lib.sh"
  # shellcheck source=hack/realcluster/hoststate.sh
  source "$KIND_REPO/hack/realcluster/hoststate.sh"
  RC_FIXED_PATHS=(/lib/modules /run/netns /run/containers /run/libpod /run/netavark /run/crun /run/runc
    /var/lib/containers /var/lib/cni /etc/cni)
  RC_BRIDGE=${KIND_BRIDGE:-podman1}
  RC_CGROUP_ROOT=/libpod_parent
}
