#!/usr/bin/env bash
# The cluster's certificates, made locally with openssl (idempotent: existing files are kept).
# One CA signs everything; identities follow the Kubernetes conventions (CN = user,
# O = group): system:masters for the admin, system:node:<node> in system:nodes for the
# kubelet, system:kube-controller-manager, system:kube-scheduler, system:kube-proxy.
set -euo pipefail
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

PKI="$RUN/pki"
mkdir -p "$PKI"
chmod 700 "$PKI"
cd "$PKI"

if [ ! -f ca.crt ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
    -subj "/CN=railfence-test-cluster-ca" 2>/dev/null
fi

# cert <name> <subject> <extendedKeyUsage> [subjectAltName]
cert() {
  local name=$1 subj=$2 eku=$3 san=${4:-}
  [ -f "$name.crt" ] && return 0
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

cert apiserver "/CN=kube-apiserver" serverAuth \
  "IP:$NODE_BRIDGE_IP,IP:127.0.0.1,IP:$KUBERNETES_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kube-proxy "/CN=system:kube-proxy" clientAuth
cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
cert kubelet-serving "/CN=$NODE_NAME" serverAuth "IP:$NODE_BRIDGE_IP,IP:127.0.0.1,DNS:$NODE_NAME"

# Service-account token signing key pair.
[ -f sa.key ] || { openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null; }

# kubeconfig <name> <cert name>
kubeconfig() {
  local file="$1.kubeconfig" user=$2
  [ -f "$file" ] && return 0
  cat > "$file" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: railfence-test
    cluster:
      server: https://$NODE_BRIDGE_IP:$APISERVER_PORT
      certificate-authority: $PKI/ca.crt
users:
  - name: $user
    user:
      client-certificate: $PKI/$user.crt
      client-key: $PKI/$user.key
contexts:
  - name: railfence-test
    context: {cluster: railfence-test, user: $user}
current-context: railfence-test
EOF
}
kubeconfig admin admin
kubeconfig controller-manager controller-manager
kubeconfig scheduler scheduler
kubeconfig kube-proxy kube-proxy
kubeconfig kubelet kubelet
chmod 600 ./*.key ./*.kubeconfig
