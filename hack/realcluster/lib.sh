# shellcheck shell=bash disable=SC2034
# Shared by hack/realcluster/up and down: settings, logging, process and cgroup helpers.
# Sourced, never run. Everything the cluster owns lives under $RC_DIR; the few host paths the
# components cannot be told to avoid are listed in RC_FIXED_PATHS and handled by hoststate.sh.

RC_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RC_DIR=${REALCLUSTER_DIR:-/var/tmp/vacuum-realcluster}
RC_NODE=${REALCLUSTER_NODE:-vacuum-realcluster}
RC_BRIDGE=vacrc0
RC_POD_CIDR=10.88.0.0/24
RC_SERVICE_CIDR=10.96.0.0/24
RC_APISERVER_PORT=${REALCLUSTER_APISERVER_PORT:-6443}
RC_ETCD_PORT=23790
RC_ETCD_PEER_PORT=23800
RC_KUBELET_PORT=10250
RC_KUBELET_HEALTHZ_PORT=10248
RC_KCM_PORT=10257
RC_SCHEDULER_PORT=10259
RC_PROXY_HEALTHZ_PORT=10256
RC_PROXY_METRICS_PORT=10249
RC_PAUSE_IMAGE=localhost/vacuum-pause:dev

RC_PKI=$RC_DIR/pki
RC_RUN=$RC_DIR/run        # pid files, the containerd socket
RC_LOGS=$RC_DIR/logs
RC_BEFORE=$RC_DIR/before  # host state recorded by `up` before it changed anything
RC_SOCK=$RC_RUN/containerd.sock
RC_KUBECONFIG=$RC_DIR/admin.kubeconfig

# Host paths the components create whatever they are told (kubelet: container log symlinks and
# device plugins; containerd 1.6: shim sockets, network namespaces; libcni: its result cache;
# util-linux mount and umount: /run/mount/utab).
# `down` removes each one that did not exist before `up`.
RC_FIXED_PATHS=(/var/log/containers /var/log/pods /var/lib/kubelet /var/lib/cni /run/containerd /run/mount
  /run/netns /var/lib/containerd /opt/containerd /etc/cni /opt/cni)

# Daemons in the order `up` starts them; `down` stops them in reverse.
RC_DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler kube-proxy containerd kubelet)

rc_log() { printf '%s realcluster: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
rc_die() { rc_log "ERROR: $*"; exit 1; }

# rc_require_root_linux refuses clearly when the host cannot run the cluster.
rc_require_root_linux() {
  [[ $(uname -s) == Linux ]] || rc_die "a real cluster runs only on Linux (this is $(uname -s))"
  ((EUID == 0)) || rc_die "must run as root (kubelet, containerd and runc need it); try: sudo $0"
}

# rc_node_ip is the address of the interface holding the default route: the kubelet refuses a
# loopback node IP.
rc_node_ip() {
  local ip
  ip=$(ip -4 -o route get 1.1.1.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") print $(i + 1)}')
  [[ -n $ip ]] || ip=$(ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1)
  [[ -n $ip ]] || rc_die "no global IPv4 address on this host for the node"
  echo "$ip"
}

# rc_memory_cgroup is the caller's cgroup in the v1 memory hierarchy (or the v2 unified path).
rc_memory_cgroup() {
  local cg
  cg=$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
  [[ -n $cg ]] || cg=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
  echo "${cg%/}"
}

# rc_cgroup_hierarchies lists the mount points of the cgroup hierarchies: the v1 ones and, on a
# hybrid host, the unified one (runc mirrors v1 container cgroups there too).
rc_cgroup_hierarchies() {
  awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts | sort
}

# rc_start NAME CMD...: starts CMD as a daemon in its own session, with its output in
# $RC_LOGS/NAME.log, inside the cluster's "system" memory cgroup (so the cluster's peak memory
# can be read from one cgroup), and records "PID STARTTIME" so `down` never signals a recycled
# PID.
rc_start() {
  local name=$1; shift
  local procs pidfile=$RC_RUN/$name.pid.new pid st i
  procs=$(cat "$RC_DIR/cgroup-procs-file" 2>/dev/null || true)
  rm -f "$pidfile"
  # The wrapper writes its own PID, which exec hands to the daemon, so the PID is right whether
  # or not setsid had to fork. fd 8 (the lock of up/down) is closed: a daemon holding it would
  # lock out `down`.
  setsid bash -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1"; if [[ -n $2 ]]; then echo $$ >"$2" || true; fi
    shift 2; exec "$@"' rc-start "$pidfile" "$procs" "$@" </dev/null >>"$RC_LOGS/$name.log" 2>&1 8>&- &
  for ((i = 0; i < 100; i++)); do [[ -s $pidfile ]] && break; sleep 0.05; done
  pid=$(cat "$pidfile" 2>/dev/null) || rc_die "$name did not start; see $RC_LOGS/$name.log"
  rm -f "$pidfile"
  st=$(rc_starttime "$pid") || rc_die "$name exited at once; see $RC_LOGS/$name.log"
  echo "$pid $st" >"$RC_RUN/$name.pid"
  rc_log "started $name (pid $pid, log $RC_LOGS/$name.log)"
}

# rc_starttime PID prints the process start time (clock ticks since boot), field 22 of stat.
rc_starttime() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  awk '{print $20}' <<<"$stat"
}

# rc_pid NAME prints NAME's PID if the process recorded at start is still that process.
rc_pid() {
  local f=$RC_RUN/$1.pid pid st now
  [[ -f $f ]] || return 1
  read -r pid st <"$f" || return 1
  now=$(rc_starttime "$pid") || return 1
  [[ $now == "$st" ]] || return 1
  echo "$pid"
}

# rc_stop NAME [GRACE_SECONDS]: SIGTERM, then SIGKILL after the grace period.
rc_stop() {
  local name=$1 grace=${2:-15} pid i
  pid=$(rc_pid "$name") || { rm -f "$RC_RUN/$name.pid"; return 0; }
  rc_log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    rc_pid "$name" >/dev/null || break
    sleep 0.1
  done
  if rc_pid "$name" >/dev/null; then
    rc_log "$name did not stop within ${grace}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.3
  fi
  rm -f "$RC_RUN/$name.pid"
}

# rc_wait SECONDS WHAT CMD...: retries CMD every 0.2 s until it succeeds or time runs out.
# Logs WHAT with the time waited and, when RC_T0 is set, the time since it.
rc_wait() {
  local secs=$1 what=$2; shift 2
  local t0=$SECONDS deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
  rc_log "$what after $((SECONDS - t0))s${RC_T0:+ ($((SECONDS - RC_T0))s since start)}"
}

rc_kubectl() { "$RC_BIN/kubectl" --kubeconfig "$RC_KUBECONFIG" "$@"; }
rc_ctr() { ctr --address "$RC_SOCK" --namespace k8s.io "$@"; }

# rc_load_env reads what `up` recorded (binaries, node IP, cgroup), if it got that far.
rc_load_env() {
  if [[ -f $RC_DIR/env ]]; then
    # shellcheck disable=SC1091
    source "$RC_DIR/env"
  fi
}
