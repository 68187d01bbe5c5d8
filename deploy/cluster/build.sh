#!/usr/bin/env bash
# Builds (or reuses) the cluster's binaries from Go modules: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl from k8s.io/kubernetes,
# etcd from go.etcd.io/etcd, CoreDNS from github.com/coredns/coredns, and a pause binary of ours.
# Binaries are cached per version under $CLUSTER_STATE/cache/bin; a second run builds nothing.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

command -v go >/dev/null || die "Go is required (1.24 or newer)"
# The compile is long on a small machine; never let it starve the rest of the machine.
GO="nice -n 19 go"

build_k8s() {
  local want=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
  local missing=0 b
  for b in "${want[@]}"; do [ -x "$BIN/$b" ] || missing=1; done
  [ $missing = 0 ] && { log "kubernetes $K8S_VERSION binaries cached in $BIN"; return; }
  local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  local now; now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  # The same version stamps the Kubernetes release build sets (hack/lib/version.sh), so that
  # the server reports v1.34.x: Helm checks charts' kubeVersion against it.
  local ldflags="-s -w"
  local pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$now"
  done
  step_begin "build kubernetes $K8S_VERSION"
  mkdir -p "$BIN.tmp"
  ( cd "$CLUSTER_DIR/k8s"
    [ "$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" = "$K8S_VERSION" ] \
      || die "deploy/cluster/k8s/go.mod pins another k8s.io/kubernetes than $K8S_VERSION"
    CGO_ENABLED=0 $GO build -trimpath -ldflags "$ldflags" -o "$BIN.tmp/" \
      $(printf 'k8s.io/kubernetes/cmd/%s ' "${want[@]}") )
  rm -rf "$BIN"; mv "$BIN.tmp" "$BIN"
  step_end "binaries $(du_of "$BIN"), go caches $(du_of "$GOMODCACHE" "$GOCACHE")"
}

build_etcd() {
  [ -x "$ETCD_BIN/etcd" ] && { log "etcd $ETCD_VERSION cached"; return; }
  step_begin "build etcd $ETCD_VERSION"
  mkdir -p "$ETCD_BIN"
  ( cd "$CLUSTER_DIR/etcd" && CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$ETCD_BIN/etcd" . )
  step_end "binary $(du_of "$ETCD_BIN")"
}

# The node's own images: pause (the first container of every pod) and CoreDNS, static binaries in one layer.
build_images() {
  local dir="$CACHE/images"
  mkdir -p "$dir"
  if [ ! -f "$dir/$PAUSE_ARCHIVE" ]; then
    step_begin "build pause image"
    ( cd "$CLUSTER_DIR/pause" && CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$dir/pause" . )
    "$CLUSTER_DIR/oci-image.sh" "$dir/$PAUSE_ARCHIVE" "$PAUSE_IMAGE" /pause "$dir/pause:/pause"
    step_end "archive $(du_of "$dir/$PAUSE_ARCHIVE")"
  fi
  if [ ! -f "$dir/$COREDNS_ARCHIVE" ]; then
    step_begin "build coredns $COREDNS_VERSION"
    ( cd "$CLUSTER_DIR/coredns" && CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$dir/coredns" . )
    "$CLUSTER_DIR/oci-image.sh" "$dir/$COREDNS_ARCHIVE" "$COREDNS_IMAGE" /coredns "$dir/coredns:/coredns"
    step_end "archive $(du_of "$dir/$COREDNS_ARCHIVE")"
  fi
}

# kube-router from its module, its own go.mod as published (no replace lines: go install works).
build_kube_router() {
  [ -x "$KUBE_ROUTER_BIN" ] && { log "kube-router $KUBE_ROUTER_VERSION cached"; return; }
  step_begin "build kube-router $KUBE_ROUTER_VERSION"
  local dir; dir=$(dirname "$KUBE_ROUTER_BIN")
  mkdir -p "$dir.tmp"
  CGO_ENABLED=0 GOBIN="$dir.tmp" $GO install -trimpath -ldflags "-s -w" \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
  rm -rf "$dir"; mv "$dir.tmp" "$dir"
  step_end "binary $(du_of "$dir")"
}

build_k8s
build_etcd
build_kube_router
build_images
