#!/usr/bin/env bash
# Tears the one-node cluster down: pods first (so the kubelet releases their network through
# CNI), then every daemon by the pid up.sh recorded, then what is left of containers, mounts,
# the pod bridge and kube-proxy's iptables rules, and the run folder. Build caches stay
# (down.sh --purge removes them too). Safe to run twice, or after a half-finished up.sh.
set -uo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

purge=0
[ "${1:-}" = "--purge" ] && purge=1
[ "$(id -u)" = 0 ] || die "run as root"

pid_of() { local f="$RUN/pids/$1.pid"; [ -f "$f" ] && cat "$f"; }
alive() { local p; p=$(pid_of "$1") && kill -0 "$p" 2>/dev/null; }

# stop <name> [seconds]: SIGTERM, then SIGKILL after the grace period; by recorded pid only.
stop() {
  local name=$1 grace=${2:-10} p
  p=$(pid_of "$name") || return 0
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq $((grace * 10))); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && { log "$name (pid $p) did not stop in ${grace}s: SIGKILL"; kill -KILL "$p" 2>/dev/null; sleep 0.2; }
    log "stopped $name (pid $p)"
  fi
  rm -f "$RUN/pids/$name.pid"
}

step_begin "teardown"
CTRD="$RUN/containerd"
CTR=(ctr --address "$CTRD/containerd.sock" -n k8s.io)
KUBECTL=("$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" --request-timeout 10s)

# 1. Pods away while the kubelet still runs: it stops each pod through CRI, which runs CNI
#    DEL (veth, host-local address, masquerade rules).
if alive kube-apiserver && alive kubelet; then
  for ns in $("${KUBECTL[@]}" get ns -o jsonpath='{.items[*].metadata.name}' 2>/dev/null); do
    case $ns in kube-system|kube-public|kube-node-lease|default) ;; *) "${KUBECTL[@]}" delete ns "$ns" --wait=false >/dev/null 2>&1 ;; esac
  done
  "${KUBECTL[@]}" delete deploy,rs,sts,ds,job,cronjob --all -A --wait=false >/dev/null 2>&1
  "${KUBECTL[@]}" delete pods --all -A --grace-period=1 --wait=false >/dev/null 2>&1
  for _ in $(seq 60); do
    running=$("${CTR[@]}" tasks ls 2>/dev/null | awk 'NR>1 && $3=="RUNNING"' | wc -l)
    [ "$running" = 0 ] && break
    sleep 1
  done
fi

# 2. Daemons, node first, control plane last.
stop kube-router
stop kube-proxy
stop kubelet
# Whatever the kubelet did not stop: kill the remaining tasks through containerd.
if alive containerd; then
  for id in $("${CTR[@]}" tasks ls -q 2>/dev/null); do
    "${CTR[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1
  done
  sleep 1
  for id in $("${CTR[@]}" tasks ls -q 2>/dev/null); do "${CTR[@]}" tasks delete -f "$id" >/dev/null 2>&1; done
  for id in $("${CTR[@]}" containers ls -q 2>/dev/null); do "${CTR[@]}" containers delete "$id" >/dev/null 2>&1; done
fi
stop containerd
# Shims whose containerd is gone: those started for OUR containerd name its socket on their
# command line (-address <socket>); nothing else on the machine does.
if [ -d "$CTRD" ]; then
  for p in $(grep -lsF -- "$CTRD/containerd.sock" /proc/[0-9]*/cmdline 2>/dev/null | cut -d/ -f3); do
    kill -KILL "$p" 2>/dev/null && log "killed leftover shim pid $p"
  done
fi
stop kube-scheduler
stop kube-controller-manager
stop kube-apiserver
stop etcd

# 3. kube-proxy's iptables rules (its own cleanup mode), then what is left of the kubelet's
#    (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT) and of the CNI masquerade chains,
#    in both address families; then the bridge.
if [ -x "$BIN/kube-proxy" ]; then "$BIN/kube-proxy" --cleanup >/dev/null 2>&1; fi
# kube-router's chains (KUBE-ROUTER-*, KUBE-POD-FW-*, KUBE-NWPLCY-*) and its ipsets.
if [ -x "$KUBE_ROUTER_BIN" ]; then "$KUBE_ROUTER_BIN" --cleanup-config >/dev/null 2>&1 || true; fi
for ipt in iptables ip6tables; do
  command -v $ipt >/dev/null || continue
  for table in filter nat mangle; do
    $ipt -t "$table" -S 2>/dev/null | awk '/^-A .* -j (KUBE|CNI)-/' | while read -r rule; do
      # shellcheck disable=SC2086
      $ipt -t "$table" ${rule/-A/-D} 2>/dev/null
    done
    for chain in $($ipt -t "$table" -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/ {print $2}'); do
      $ipt -t "$table" -F "$chain" 2>/dev/null
    done
    for chain in $($ipt -t "$table" -S 2>/dev/null | awk '/^-N (KUBE|CNI)-/ {print $2}'); do
      $ipt -t "$table" -X "$chain" 2>/dev/null
    done
  done
done
ip link show "$POD_BRIDGE" >/dev/null 2>&1 && ip link delete "$POD_BRIDGE"

# 4. Mounts under the run folder (pod volumes, overlay rootfs, network namespaces), deepest first.
if [ -d "$RUN" ]; then
  awk -v run="$RUN" '$2 ~ "^"run {print $2}' /proc/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done
fi

# 5. The kubelet's (now empty) cgroup tree, deepest first; a non-empty one stays and is reported.
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
  [ -d "$d" ] || continue
  find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  [ -d "$d" ] && log "cgroup $d is not empty: a process of a pod survived"
done

rm -rf "$RUN"
# Directories containerd, its shims and libcni create at fixed paths; removed only when empty
# (anything another program keeps there stays).
for d in /run/containerd/fifo /run/containerd/s /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd \
         /var/lib/cni/results /var/lib/cni; do
  rmdir "$d" 2>/dev/null
done
[ $purge = 1 ] && { chmod -R u+w "$CACHE" 2>/dev/null; rm -rf "$CLUSTER_STATE"; log "purged $CLUSTER_STATE"; }
[ $purge = 1 ] || step_end
log "cluster down"
