#!/usr/bin/env bash
# Prints the Secrets the plain manifests (deploy/manifests/) read for the gRPC link between the
# control plane and the data planes: for mutual TLS a fresh CA (its key is thrown away), a control-plane
# certificate naming every DNS form of its Service and a data-plane client certificate; and the join
# token both sides read (GRPC_JOIN_TOKEN).
#
#   bash deploy/grpc-tls-secrets.sh [namespace] [name-prefix] [cluster-domain] | kubectl apply -f -
#
# Defaults: gatehouse, gatehouse, cluster.local (what deploy/manifests/ uses). Run it again to
# rotate everything; then restart both Deployments (the services read their certificates at start).
set -euo pipefail
ns="${1:-gatehouse}"
prefix="${2:-gatehouse}"
domain="${3:-cluster.local}"
days="${DAYS:-3650}"
command -v openssl >/dev/null 2>&1 || { echo "grpc-tls-secrets: openssl is required" >&2; exit 1; }

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cd "$dir"
cp="$prefix-control-plane"
dp="$prefix-data-plane"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)

openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days "$days" -subj "/CN=$prefix gRPC CA" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null

issue() { # file-stem common-name extensions
  openssl req "${ec[@]}" -keyout "$1.key" -out "$1.csr" -subj "/CN=$2" 2>/dev/null
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days "$days" -extfile "$1.ext" 2>/dev/null
}
issue cp "$cp" "subjectAltName=DNS:$cp,DNS:$cp.$ns,DNS:$cp.$ns.svc,DNS:$cp.$ns.svc.$domain
extendedKeyUsage=serverAuth,clientAuth
keyUsage=critical,digitalSignature"
issue dp "$dp" "subjectAltName=DNS:$dp
extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature"

b64() { openssl base64 -A <"$1"; }
secret() { # name file-stem
  cat <<EOF
---
apiVersion: v1
kind: Secret
metadata:
  name: $1
  namespace: $ns
type: kubernetes.io/tls
data:
  ca.crt: $(b64 ca.crt)
  tls.crt: $(b64 "$2.crt")
  tls.key: $(b64 "$2.key")
EOF
}
secret "$cp-tls" cp
secret "$dp-tls" dp
cat <<EOF
---
apiVersion: v1
kind: Secret
metadata:
  name: $prefix-join-token
  namespace: $ns
type: Opaque
data:
  join-token: $(openssl rand -hex 32 | tr -d '\n' | openssl base64 -A)
EOF
