# Shared settings of the one-node test cluster (sourced by build.sh, up.sh, down.sh).
# Everything lives under one git-ignored state folder:
#   $CLUSTER_STATE/cache  build caches and binaries, kept by down.sh (delete with down.sh --purge)
#   $CLUSTER_STATE/run    the running cluster: PKI, etcd data, containerd root, logs, pids
# shellcheck shell=bash

CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$CLUSTER_DIR/../.." && pwd)"
CLUSTER_STATE="${CLUSTER_STATE:-$REPO_DIR/.cluster}"
CACHE="$CLUSTER_STATE/cache"
RUN="$CLUSTER_STATE/run"

# 1.34 is the newest release whose kubelet still starts on cgroup v1 without an opt-in
# (1.35+ refuses it unless failCgroupV1: false); this machine kind runs cgroup v1.
K8S_VERSION="${K8S_VERSION:-v1.34.4}"
# etcd: the release line Kubernetes 1.34 is built against (client v3.6.4), newest patch.
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
# NetworkPolicy enforcement: kube-router's policy controller only (--run-firewall; no routing,
# no service proxy), iptables + ipset on the node, as a node process like kube-proxy. The bridge
# CNI enforces nothing by itself.
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
# CoreDNS runs as a node process (there is no registry to pull its image from).
COREDNS_VERSION="${COREDNS_VERSION:-v1.12.1}"
# Images the node makes itself (oci-image.sh). The pause image is ours, under the name containerd
# 1.6 uses for a pod's pause container by default, so its configuration needs no override; it
# never pulls an image it already has (and there is no registry here to pull the real one from).
PAUSE_IMAGE="registry.k8s.io/pause:3.6"
PAUSE_ARCHIVE="pause-3.6-local.oci.tar"
COREDNS_IMAGE="localhost/railfence-cluster/coredns:$COREDNS_VERSION"
COREDNS_ARCHIVE="coredns-$COREDNS_VERSION.oci.tar"

BIN="$CACHE/bin/k8s-$K8S_VERSION"
ETCD_BIN="$CACHE/bin/etcd-$ETCD_VERSION"
KUBE_ROUTER_BIN="$CACHE/bin/kube-router-$KUBE_ROUTER_VERSION/kube-router"
export GOMODCACHE="$CACHE/gomod"
export GOCACHE="$CACHE/gobuild"
export GOFLAGS="-buildvcs=false"
export GOTOOLCHAIN=local

# Addresses. The pod network is a Linux bridge (CNI bridge + host-local); the node reaches pods
# directly and pods reach the node on the bridge's gateway address, where the API server, the
# kubelet and the node processes that pods need (PostgreSQL, the OTLP receiver) listen. Nothing
# listens on the machine's own interfaces.
POD_BRIDGE="rfcni0"
POD_CIDR="10.244.0.0/24"
NODE_BRIDGE_IP="10.244.0.1"
SERVICE_CIDR="10.96.0.0/16"
KUBERNETES_SERVICE_IP="10.96.0.1"
CLUSTER_DNS_SERVICE_IP="10.96.0.10"
CLUSTER_DOMAIN="cluster.local"
NODE_NAME="${NODE_NAME:-railfence-node}"

# Ports on 127.0.0.1 / the node (fixed, so that a second cluster on the same machine is refused
# loudly instead of half-starting; up.sh checks that they are free).
APISERVER_PORT="${APISERVER_PORT:-16443}"
ETCD_CLIENT_PORT="${ETCD_CLIENT_PORT:-12379}"
ETCD_PEER_PORT="${ETCD_PEER_PORT:-12380}"

KUBECONFIG_ADMIN="$RUN/pki/admin.kubeconfig"

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Time and disk of each step, appended to $CLUSTER_STATE/steps.tsv (the README's table comes
# from real runs of this file).
step_begin() { STEP_NAME="$1"; STEP_T0=$(date +%s.%N); }
step_end() {
  local t1 secs
  t1=$(date +%s.%N)
  secs=$(awk -v a="$STEP_T0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
  mkdir -p "$CLUSTER_STATE"
  printf '%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$STEP_NAME" "$secs" "${1:-}" >> "$CLUSTER_STATE/steps.tsv"
  log "step '$STEP_NAME' took ${secs}s ${1:-}"
}
du_of() { du -sh "$@" 2>/dev/null | awk '{print $1}' | paste -sd+; }
