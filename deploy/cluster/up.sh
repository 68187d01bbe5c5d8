#!/usr/bin/env bash
# Brings up (or reuses) a one-node Kubernetes cluster built from source on this machine:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd + runc (Debian),
# CNI bridge/host-local (Debian), kubelet, kube-proxy (iptables) and CoreDNS.
# Needs root (kubelet, containerd and the pod network do). Everything it makes lives under
# $CLUSTER_STATE (default .cluster/ of the checkout); deploy/cluster/down.sh undoes it.
# Prints `export KUBECONFIG=...` on success. Every step's time and disk go to
# $CLUSTER_STATE/steps.tsv.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" = 0 ] || die "run as root: kubelet, containerd and the pod network need it"
[ "$(uname -s)" = Linux ] || die "Linux only"

mkdir -p "$RUN/logs" "$RUN/pids"
KUBECTL=("$BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN")

alive() { local f="$RUN/pids/$1.pid"; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }

# start <name> <command...>: a daemon in its own session, logs in $RUN/logs, pid in $RUN/pids.
start() {
  local name=$1; shift
  if alive "$name"; then log "$name already running (pid $(cat "$RUN/pids/$name.pid"))"; return; fi
  setsid "$@" >>"$RUN/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN/pids/$name.pid"
  log "started $name (pid $!)"
}

# wait_for <what> <seconds> <log name> <command...>: polls until the command succeeds.
wait_for() {
  local what=$1 secs=$2 name=$3; shift 3
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ -n "$name" ] && ! alive "$name"; then
      tail -n 40 "$RUN/logs/$name.log" >&2 || true
      die "$name exited while waiting for $what"
    fi
    if [ $SECONDS -ge $end ]; then
      [ -n "$name" ] && tail -n 40 "$RUN/logs/$name.log" >&2
      die "timed out after ${secs}s waiting for $what"
    fi
    sleep 1
  done
}

port_free() { ! (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# config <file> <daemon>: writes stdin to the file only when it differs, so that a second up.sh
# leaves a running cluster alone (kube-proxy exits when its file changes under it); when the
# content did change (a newer script), the running daemon is restarted to pick it up.
config() {
  local file=$1 name=$2 tmp
  tmp=$(mktemp "$file.XXXX")
  cat >"$tmp"
  if [ -f "$file" ] && cmp -s "$tmp" "$file"; then rm -f "$tmp"; return; fi
  mv "$tmp" "$file"
  if alive "$name"; then
    local p; p=$(cat "$RUN/pids/$name.pid")
    log "configuration of $name changed: restarting it"
    kill -TERM "$p"
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p"
    rm -f "$RUN/pids/$name.pid"
  fi
}

# ---- 1. packages (Debian; idempotent: only what is missing) ----
step_begin "debian packages"
need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v conntrack >/dev/null || need+=(conntrack)
command -v ipset >/dev/null || need+=(ipset)
command -v openssl >/dev/null || need+=(openssl)
command -v setsid >/dev/null || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
    || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
fi
step_end "installed: ${need[*]:-nothing}"

# ---- 2. binaries ----
"$CLUSTER_DIR/build.sh"

# ---- 3. host networking: forwarding, bridged traffic through iptables, the pod bridge ----
step_begin "host network"
# Forwarding stays on after down.sh: other container networks on the machine (podman's bridge)
# need it as well, and turning it off under them would cut them off.
[ "$(sysctl -n net.ipv4.ip_forward)" = 1 ] || log "enabling net.ipv4.ip_forward (left on by down.sh)"
modprobe br_netfilter 2>/dev/null || true
modprobe overlay 2>/dev/null || true
sysctl -qw net.ipv4.ip_forward=1
sysctl -qw net.bridge.bridge-nf-call-iptables=1 || die "net.bridge.bridge-nf-call-iptables is unavailable (br_netfilter): Services would not work between pods on the bridge"
# The bridge exists before the first pod so that node processes the pods need (PostgreSQL, the
# OTLP receiver, the API server) can listen on its address; the CNI bridge plugin adopts it.
if ! ip link show "$POD_BRIDGE" >/dev/null 2>&1; then
  ip link add "$POD_BRIDGE" type bridge
  ip addr add "$NODE_BRIDGE_IP/${POD_CIDR#*/}" dev "$POD_BRIDGE"
fi
ip link set "$POD_BRIDGE" up
step_end

# ---- 4. certificates ----
step_begin "certificates"
"$CLUSTER_DIR/pki.sh"
step_end "$(du_of "$RUN/pki")"

alive etcd || { port_free 127.0.0.1 "$ETCD_CLIENT_PORT" && port_free "$NODE_BRIDGE_IP" "$APISERVER_PORT"; } \
  || die "ports $ETCD_CLIENT_PORT/$APISERVER_PORT are taken: another cluster running? (deploy/cluster/down.sh)"

# ---- 5. etcd (loopback only) ----
step_begin "etcd"
start etcd "$ETCD_BIN/etcd" --name railfence-test --data-dir "$RUN/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "railfence-test=http://127.0.0.1:$ETCD_PEER_PORT" \
  --listen-metrics-urls "" --log-level warn --quota-backend-bytes 2147483648
wait_for "etcd health" 60 etcd curl -fsS "http://127.0.0.1:$ETCD_CLIENT_PORT/health"
step_end

# ---- 6. control plane ----
PKI="$RUN/pki"
step_begin "kube-apiserver"
start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_CLIENT_PORT" \
  --bind-address "$NODE_BRIDGE_IP" --advertise-address "$NODE_BRIDGE_IP" --secure-port "$APISERVER_PORT" \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --client-ca-file "$PKI/ca.crt" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --allow-privileged=false --profiling=false --anonymous-auth=true \
  --endpoint-reconciler-type lease --v 1
wait_for "kube-apiserver /readyz" 180 kube-apiserver "${KUBECTL[@]}" get --raw /readyz
step_end

step_begin "controller-manager and scheduler"
start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig "$PKI/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$PKI/controller-manager.kubeconfig" --authorization-kubeconfig "$PKI/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --profiling=false --v 1
start kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig "$PKI/scheduler.kubeconfig" \
  --authentication-kubeconfig "$PKI/scheduler.kubeconfig" --authorization-kubeconfig "$PKI/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false --profiling=false --v 1
wait_for "kube-controller-manager /healthz" 60 kube-controller-manager curl -fsSk https://127.0.0.1:10257/healthz
wait_for "kube-scheduler /healthz" 60 kube-scheduler curl -fsSk https://127.0.0.1:10259/healthz
step_end

# ---- 7. containerd (private root, state and socket) + CNI ----
step_begin "containerd"
CTRD="$RUN/containerd"
mkdir -p "$CTRD" "$RUN/cni/net.d" "$RUN/cni/ipam"
config "$CTRD/config.toml" containerd <<EOF
version = 2
root = "$CTRD/root"
state = "$CTRD/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$CTRD/containerd.sock"
[ttrpc]
  address = "$CTRD/containerd.sock.ttrpc"
[debug]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$CTRD/opt"
[plugins."io.containerd.grpc.v1.cri"]
  netns_mounts_under_state_dir = true
  enable_selinux = false
  # This machine kind grants no CAP_SYS_RESOURCE (not even to root), so no process may lower
  # its oom_score_adj: runc would fail every pod's pause container (containerd asks for -998) with
  # "failed to update /proc/self/oom_score_adj: Permission denied". Clamp to our own score.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # No systemd on this machine kind: cgroupfs, as the kubelet's cgroupDriver.
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
    max_conf_num = 1
EOF
config "$RUN/cni/net.d/10-railfence.conflist" containerd <<EOF
{
  "cniVersion": "1.0.0",
  "name": "railfence-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$POD_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_BRIDGE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$RUN/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
start containerd containerd --config "$CTRD/config.toml"
CTR=(ctr --address "$CTRD/containerd.sock" -n k8s.io)
wait_for "containerd socket" 60 containerd "${CTR[@]}" version
for archive in "$PAUSE_ARCHIVE" "$COREDNS_ARCHIVE"; do
  "${CTR[@]}" images import --no-unpack=false "$CACHE/images/$archive" >/dev/null
done
# The list is read whole before it is searched: `ctr ... | grep -q` under pipefail fails when
# grep exits at the first match and ctr then writes into a closed pipe (SIGPIPE).
images=$("${CTR[@]}" images ls -q)
for ref in "$PAUSE_IMAGE" "$COREDNS_IMAGE"; do
  grep -qxF "$ref" <<<"$images" || die "$ref is not in containerd after the import"
done
step_end "node images $PAUSE_IMAGE, $COREDNS_IMAGE"

# ---- 8. kubelet ----
step_begin "kubelet"
KL="$RUN/kubelet"
mkdir -p "$KL/root" "$RUN/pod-logs"
config "$KL/config.yaml" kubelet <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# No systemd on this machine kind: cgroupfs, as containerd's runc runtime.
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CTRD/containerd.sock
address: $NODE_BRIDGE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization:
  mode: Webhook
clusterDomain: $CLUSTER_DOMAIN
clusterDNS: [$CLUSTER_DNS_SERVICE_IP]
resolvConf: /etc/resolv.conf
podLogsDir: $RUN/pod-logs
failSwapOn: false
# A shared build machine: evict on real exhaustion only, and never garbage-collect the
# locally imported images (there is no registry to pull them back from).
evictionHard: {memory.available: "100Mi", nodefs.available: "2Gi", imagefs.available: "2Gi", nodefs.inodesFree: "2%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
EOF
start kubelet "$BIN/kubelet" --config "$KL/config.yaml" --kubeconfig "$PKI/kubelet.kubeconfig" \
  --root-dir "$KL/root" --hostname-override "$NODE_NAME" --node-ip "$NODE_BRIDGE_IP" \
  --oom-score-adj 0 --v 1
wait_for "node $NODE_NAME registered" 120 kubelet "${KUBECTL[@]}" get node "$NODE_NAME"
wait_for "node $NODE_NAME Ready" 180 kubelet "${KUBECTL[@]}" wait --for=condition=Ready "node/$NODE_NAME" --timeout=5s
step_end

# ---- 9. kube-proxy (iptables) ----
step_begin "kube-proxy"
config "$RUN/kube-proxy.yaml" kube-proxy <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $PKI/kube-proxy.kubeconfig}
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NODE_BRIDGE_IP/32"]
# No CAP_SYS_RESOURCE here: a negative OOM score cannot be set (see containerd's config).
oomScoreAdj: 0
# Leave the host's conntrack settings as they are (0 = do not touch).
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
start kube-proxy "$BIN/kube-proxy" --config "$RUN/kube-proxy.yaml" --v 1
wait_for "kube-proxy /healthz" 60 kube-proxy curl -fsS http://127.0.0.1:10256/healthz
step_end

# ---- 9b. NetworkPolicy enforcement: kube-router's policy controller (iptables + ipset) ----
# It watches pods, namespaces and NetworkPolicies cluster-wide: the admin credentials of this
# test node (a production install runs it as a DaemonSet with its own ClusterRole). Health and
# metrics ports off: nothing listens on the machine's interfaces.
step_begin "kube-router (network policy)"
start kube-router "$KUBE_ROUTER_BIN" --run-firewall=true --run-router=false --run-service-proxy=false \
  --kubeconfig "$KUBECONFIG_ADMIN" --hostname-override "$NODE_NAME" \
  --service-cluster-ip-range "$SERVICE_CIDR" --health-port 0 --metrics-port 0 --v 1
wait_for "kube-router's filter chains" 120 kube-router iptables -t filter -n -L KUBE-ROUTER-FORWARD
step_end

# ---- 10. cluster DNS (CoreDNS Deployment, Service kube-dns) ----
step_begin "coredns"
sed -e "s|@IMAGE@|$COREDNS_IMAGE|g" -e "s|@DNS_IP@|$CLUSTER_DNS_SERVICE_IP|g" -e "s|@DOMAIN@|$CLUSTER_DOMAIN|g" \
  "$CLUSTER_DIR/addons/coredns.yaml" | "${KUBECTL[@]}" apply -f - >/dev/null
wait_for "CoreDNS rollout" 180 "" "${KUBECTL[@]}" -n kube-system rollout status deploy/coredns --timeout=5s
step_end

# What a test needs to drive the cluster, for programs that do not source lib.sh.
cat >"$RUN/cluster.json" <<EOF
{"kubernetesVersion": "$K8S_VERSION", "kubeconfig": "$KUBECONFIG_ADMIN", "kubectl": "$BIN/kubectl",
 "node": "$NODE_NAME", "nodeIp": "$NODE_BRIDGE_IP", "podCidr": "$POD_CIDR",
 "containerdAddress": "$CTRD/containerd.sock", "stepsFile": "$CLUSTER_STATE/steps.tsv"}
EOF
step_begin "cluster up"
step_end "run folder $(du_of "$RUN") (containerd $(du_of "$CTRD"), etcd $(du_of "$RUN/etcd")), caches $(du_of "$CACHE")"
log "cluster up: kubernetes $K8S_VERSION, node $NODE_NAME"
echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
