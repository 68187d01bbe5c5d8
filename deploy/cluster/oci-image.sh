#!/usr/bin/env bash
# Packs static binaries into a single-layer OCI image archive (no base image, no registry, no
# container engine): the cluster's own pause and CoreDNS images, imported into containerd with
# `ctr -n k8s.io images import`.
# Usage: oci-image.sh <out.tar> <image ref> <entrypoint path in image> <host file>:<path in image> ...
set -euo pipefail
out=$1 ref=$2 entry=$3; shift 3

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/rootfs" "$work/oci/blobs/sha256"
for spec in "$@"; do
  src=${spec%%:*} dst=${spec#*:}
  install -D -m 0755 "$src" "$work/rootfs/$dst"
done
# Reproducible layer: fixed owner and mtime, sorted entries.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' \
  -C "$work/rootfs" -cf "$work/layer.tar" .
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -9 "$work/layer.tar"
blob() { # file -> digest (moved into blobs/)
  local d; d=$(sha256sum "$1" | cut -d' ' -f1)
  mv "$1" "$work/oci/blobs/sha256/$d"; echo "$d"
}
layer_size=$(stat -c %s "$work/layer.tar.gz")
layer=$(blob "$work/layer.tar.gz")
printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["%s"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
  "$entry" "$diff_id" > "$work/config.json"
config_size=$(stat -c %s "$work/config.json")
config=$(blob "$work/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
  "$config" "$config_size" "$layer" "$layer_size" > "$work/manifest.json"
manifest_size=$(stat -c %s "$work/manifest.json")
manifest=$(blob "$work/manifest.json")
printf '{"imageLayoutVersion":"1.0.0"}' > "$work/oci/oci-layout"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest" "$manifest_size" "$ref" "${ref##*:}" > "$work/oci/index.json"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' -C "$work/oci" -cf "$out" .
