# shellcheck shell=bash disable=SC2034
# Host state: `up` records it before changing anything (rc_record), `down` puts back what the
# cluster changed (rc_restore) and then compares (rc_compare), listing anything left.
# Sourced after lib.sh.
#
# Recorded in $RC_BEFORE, one file per aspect, each a sorted list of lines:
#   sysctl      "key = value" of the kernel settings the cluster may change
#   iptables4/6 iptables-save without comments and counters
#   nft         `nft list tables`
#   links       interface names
#   mounts      mount points (from /proc/self/mountinfo)
#   cgroups     every kubepods* directory in the v1 hierarchies, and each hierarchy's path to
#               the cluster's cgroup root (present or absent)
#   paths       the fixed paths of RC_FIXED_PATHS that exist, and the entries of the top-level
#               directories they live in
# Lines of other sessions' activity are out of scope: only aspects the cluster touches are
# recorded, so another process changing, say, a file under /var/tmp does not fail `down`.

# Kernel settings changed by the kubelet (setupKernelTunables), the CNI bridge plugin and
# kube-proxy (conntrack limits and timeouts, route_localnet, which it is told to leave alone).
RC_SYSCTL_RE='^(vm\.(overcommit_memory|panic_on_oom)|kernel\.(panic|panic_on_oops|keys\.root_maxkeys|keys\.root_maxbytes)|net\.ipv4\.ip_forward|net\.ipv4\.conf\.(all|default)\.[a-z_]+|net\.ipv6\.conf\.(all|default)\.(forwarding|disable_ipv6|accept_ra)|net\.bridge\.[a-z0-9_-]+|net\.(netfilter\.)?nf_conntrack_(max|buckets|tcp_timeout_established|tcp_timeout_close_wait|tcp_be_liberal)) ='
RC_TOPDIRS=(/var/lib /var/log /run /etc /opt)

_rc_sysctl() { sysctl -a 2>/dev/null | grep -E "$RC_SYSCTL_RE" | sort; }
_rc_ipt() { "$1" 2>/dev/null | grep -v '^#' | sed -E 's/ \[[0-9]+:[0-9]+\]$//' || true; }
_rc_iptables() { command -v "$1" >/dev/null && _rc_ipt "$1"; }
_rc_nft() { command -v nft >/dev/null && nft list tables 2>/dev/null | sort || true; }
_rc_links() { ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | sort; }
_rc_mounts() { awk '{print $5}' /proc/self/mountinfo | sort; }
_rc_cgroups() {
  local h
  for h in $(rc_cgroup_hierarchies); do
    find "$h" -maxdepth 8 -type d -name 'kubepods*' -prune 2>/dev/null || true
    [[ -n ${RC_CGROUP_ROOT:-} && -d $h$RC_CGROUP_ROOT ]] && echo "$h$RC_CGROUP_ROOT (cluster cgroup root)"
  done
  if [[ -f $RC_DIR/cgroups-created ]]; then
    while IFS= read -r h; do [[ -d $h ]] && echo "$h (created by up)"; done <"$RC_DIR/cgroups-created"
  fi
  true
}
_rc_cgroups_sorted() {
  _rc_cgroups | sort -u
}
_rc_paths() {
  local p
  for p in "${RC_FIXED_PATHS[@]}"; do [[ -e $p ]] && echo "$p"; done
  for p in "${RC_TOPDIRS[@]}"; do find "$p" -mindepth 1 -maxdepth 1 2>/dev/null || true; done
  ls -d /run/netns/* 2>/dev/null || true
  true
}

RC_ASPECTS=(sysctl iptables4 iptables6 nft links mounts cgroups paths)
_rc_snapshot() {
  case $1 in
    sysctl) _rc_sysctl ;;
    iptables4) _rc_iptables iptables-save ;;
    iptables6) _rc_iptables ip6tables-save ;;
    nft) _rc_nft ;;
    links) _rc_links ;;
    mounts) _rc_mounts ;;
    cgroups) _rc_cgroups_sorted ;;
    paths) _rc_paths | sort -u ;;
  esac
}

# rc_record writes the snapshot once: a second `up` after a failed one keeps the first record,
# which is the state before any change.
rc_record() {
  [[ -f $RC_BEFORE/.complete ]] && return 0
  mkdir -p "$RC_BEFORE"
  local a
  for a in "${RC_ASPECTS[@]}"; do _rc_snapshot "$a" >"$RC_BEFORE/$a"; done
  touch "$RC_BEFORE/.complete"
}

# rc_compare prints "ASPECT: +line" (appeared) and "ASPECT: -line" (vanished) for every
# difference from the record, and fails if there is any.
rc_compare() {
  local a diffs=0 out
  [[ -f $RC_BEFORE/.complete ]] || { rc_log "no host record in $RC_BEFORE: nothing to compare"; return 0; }
  for a in "${RC_ASPECTS[@]}"; do
    out=$(diff <(cat "$RC_BEFORE/$a") <(_rc_snapshot "$a") | sed -n 's/^> /+/p; s/^< /-/p' || true)
    # The state directory itself is ours to keep until the very end.
    [[ $a == paths ]] && out=$(grep -v -x -F -- "+$RC_DIR" <<<"$out" || true)
    if [[ -n $out ]]; then
      sed "s/^/  $a: /" <<<"$out"
      diffs=1
    fi
  done
  return $diffs
}

# rc_restore undoes what the cluster changed, in dependency order; each step is a no-op when
# there is nothing to undo, so it is safe whatever state `up` reached.
rc_restore() {
  [[ -f $RC_BEFORE/.complete ]] || { rc_log "no host record in $RC_BEFORE: nothing to restore"; return 0; }
  _rc_restore_mounts
  _rc_restore_links
  _rc_restore_iptables iptables iptables-save iptables4
  _rc_restore_iptables ip6tables ip6tables-save iptables6
  _rc_restore_nft
  _rc_restore_cgroups
  _rc_restore_paths
  _rc_restore_sysctl
  return 0
}

_rc_restore_sysctl() {
  local line key now
  now=$(_rc_sysctl)
  while IFS= read -r line; do
    key=${line%% = *}
    grep -qxF -- "$line" <<<"$now" && continue
    rc_log "restoring sysctl $line"
    sysctl -q -w "$key=${line#* = }" >/dev/null 2>&1 || rc_log "could not restore $key"
  done <"$RC_BEFORE/sysctl"
  return 0
}

# Unmounts, deepest first, every mount that appeared under a path the cluster owns.
_rc_restore_mounts() {
  local m prefixes=("$RC_DIR" /run/netns /run/containerd /var/lib/kubelet /var/lib/containerd)
  while IFS= read -r m; do
    local p ours=0
    for p in "${prefixes[@]}"; do [[ $m == "$p" || $m == "$p"/* ]] && ours=1; done
    ((ours)) || continue
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || rc_log "could not unmount $m"
  done < <(comm -13 "$RC_BEFORE/mounts" <(_rc_mounts) | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
  return 0
}

_rc_restore_links() {
  local l
  # Veths left behind by pods whose network was never torn down, then the bridge.
  for l in $(ip -o link show master "$RC_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    grep -qxF -- "$l" "$RC_BEFORE/links" || ip link delete "$l" 2>/dev/null || true
  done
  if ip link show "$RC_BRIDGE" >/dev/null 2>&1 && ! grep -qxF -- "$RC_BRIDGE" "$RC_BEFORE/links"; then
    rc_log "deleting bridge $RC_BRIDGE"
    ip link delete "$RC_BRIDGE" || true
  fi
  return 0
}

# _rc_restore_iptables CMD SAVE FILE: deletes the rules that appeared in chains that existed,
# then flushes and deletes the chains that appeared.
_rc_restore_iptables() {
  local cmd=$1 save=$2 file=$RC_BEFORE/$3 table="" line chain
  command -v "$cmd" >/dev/null || return 0
  local now; now=$(_rc_ipt "$save")
  local new_chains=()
  while IFS= read -r line; do
    case $line in
      \*) ;;
      \**) table=${line#\*} ;;
      :*)
        chain=${line#:}; chain=${chain%% *}
        # Built-in chains (with a policy, not "-") go with their table, below.
        [[ $line == *" -" ]] || continue
        grep -qxF -- "*$table" "$file" && _rc_chain_in "$file" "$table" "$chain" && continue
        new_chains+=("$table $chain") ;;
    esac
  done <<<"$now"
  table=""
  while IFS= read -r line; do
    case $line in
      \**) table=${line#\*} ;;
      -A\ *)
        _rc_rule_in "$file" "$table" "$line" && continue
        chain=${line#-A }; chain=${chain%% *}
        # Rules in new chains go with their chain; rules of a new table with the table.
        printf '%s\n' "${new_chains[@]}" | grep -qxF -- "$table $chain" && continue
        grep -qxF -- "*$table" "$file" || { rc_log "$cmd -t $table: flushing $chain"; $cmd -w -t "$table" -F "$chain" 2>/dev/null || true; continue; }
        rc_log "$cmd -t $table: deleting rule ${line#-A }"
        eval "$cmd -w -t $table -D ${line#-A }" 2>/dev/null || rc_log "could not delete: $line" ;;
    esac
  done <<<"$now"
  local tc
  for tc in "${new_chains[@]}"; do $cmd -w -t ${tc% *} -F ${tc#* } 2>/dev/null || true; done
  for tc in "${new_chains[@]}"; do
    rc_log "$cmd -t ${tc% *}: deleting chain ${tc#* }"
    $cmd -w -t ${tc% *} -X ${tc#* } 2>/dev/null || rc_log "could not delete chain $tc"
  done
  return 0
}

# _rc_chain_in FILE TABLE CHAIN / _rc_rule_in FILE TABLE RULE: whether the record has it.
_rc_chain_in() { awk -v t="*$2" -v c=":$3" '$0 ~ /^\*/ {in_t = ($0 == t)} in_t && $1 == c {found = 1} END {exit !found}' "$1"; }
_rc_rule_in() { awk -v t="*$2" -v r="$3" '$0 ~ /^\*/ {in_t = ($0 == t)} in_t && $0 == r {found = 1} END {exit !found}' "$1"; }

# Tables created by iptables-nft for our chains: deleted when they did not exist and are empty.
_rc_restore_nft() {
  command -v nft >/dev/null || return 0
  local t
  while IFS= read -r t; do
    [[ -n $t ]] || continue
    grep -qxF -- "$t" "$RC_BEFORE/nft" && continue
    if ! nft list "$t" 2>/dev/null | grep -qE '^\s+(ip|ip6|meta|counter|jump|goto|accept|drop|return|oifname|iifname|tcp|udp|ct|mark|fib)\b'; then
      rc_log "nft: deleting empty ${t}"
      nft delete "${t#table }" 2>/dev/null || nft delete "$t" 2>/dev/null || rc_log "could not delete $t"
    fi
  done < <(_rc_nft)
  return 0
}

# Removes, deepest first, every cgroup under the cluster's root, then the root and the parents
# `up` created (recorded in $RC_DIR/cgroups-created).
_rc_restore_cgroups() {
  [[ -n ${RC_CGROUP_ROOT:-} ]] || return 0
  local h d
  for h in $(rc_cgroup_hierarchies); do
    [[ -d $h$RC_CGROUP_ROOT ]] || continue
    while IFS= read -r d; do
      rmdir "$d" 2>/dev/null || rc_log "could not remove cgroup $d (still has processes?)"
    done < <(find "$h$RC_CGROUP_ROOT" -mindepth 1 -type d | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-)
    # A root the record does not hold was made by the cluster's runtime (runc makes podman's
    # libpod_parent in every hierarchy itself): it goes too.
    if [[ -f $RC_BEFORE/cgroups ]] && ! grep -qF -- "$h$RC_CGROUP_ROOT " "$RC_BEFORE/cgroups"; then
      rmdir "$h$RC_CGROUP_ROOT" 2>/dev/null || rc_log "could not remove cgroup $h$RC_CGROUP_ROOT"
    fi
  done
  if [[ -f $RC_DIR/cgroups-created ]]; then
    while IFS= read -r d; do
      [[ -d $d ]] && { rmdir "$d" 2>/dev/null || rc_log "could not remove cgroup $d"; }
    done < <(awk '{print length, $0}' "$RC_DIR/cgroups-created" | sort -rn | cut -d' ' -f2-)
  fi
  return 0
}

_rc_restore_paths() {
  local p
  for p in "${RC_FIXED_PATHS[@]}"; do
    [[ -e $p ]] || continue
    grep -qxF -- "$p" "$RC_BEFORE/paths" && continue
    if grep -q " ${p}[/ ]" /proc/self/mountinfo; then
      rc_log "not removing $p: something is still mounted under it"
      continue
    fi
    rc_log "removing $p (created by the cluster)"
    rm -rf --one-file-system -- "$p"
  done
  # Network namespaces of pods whose sandbox was never torn down.
  for p in /run/netns/cni-*; do
    [[ -e $p ]] || continue
    grep -qxF -- "$p" "$RC_BEFORE/paths" && continue
    umount "$p" 2>/dev/null || true
    rm -f -- "$p"
  done
  return 0
}
