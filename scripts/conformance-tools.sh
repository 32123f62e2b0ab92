#!/usr/bin/env bash
# Builds what the Gateway API conformance suite needs, from sigs.k8s.io/gateway-api
# on the Go module proxy, at the release whose CRDs the tests install:
#
#   ${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse/tools}/bin/gateway-conformance.test
#       the suite (`go test -c` of its conformance package): run it with
#       -test.run TestConformance -gateway-class=... -conformance-profiles=... -report-output=...
#   ${GATEHOUSE_IMAGES_DIR:-$HOME/.cache/gatehouse/images}/echo-basic.oci.tar
#       the suite's echo backend, a static binary alone in an OCI image archive, named
#       exactly as the suite's manifests (conformance/base/manifests.yaml) name it, for
#       `ctr -n k8s.io images import`.
#
# Why build instead of pull: the only reachable sources are package registries.
# Idempotent like scripts/test-tools.sh: what exists with the same stamp is left alone.
#
# Usage: bash scripts/conformance-tools.sh            # build what is missing
#        FORCE=1 bash scripts/conformance-tools.sh    # rebuild everything
set -euo pipefail

# --- pinned versions --------------------------------------------------------
# Keep equal to GATEWAY_API_VERSION in scripts/test-tools.sh (the CRDs installed):
# the suite refuses CRDs of another release. v1.5+ modules ask for a newer Go.
GATEWAY_API_VERSION="v1.4.1"
# The echo backend's image name in that release's conformance/base/manifests.yaml.
ECHO_IMAGE="gcr.io/k8s-staging-gateway-api/echo-basic:v20240412-v1.0.0-394-g40c666fd"
# Bump when the way something is built changes, so cached results get rebuilt.
RECIPE="1"

TOOLS_DIR="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse/tools}"
IMAGES_DIR="${GATEHOUSE_IMAGES_DIR:-$HOME/.cache/gatehouse/images}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

die() { echo "conformance-tools: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "go is not installed"
mkdir -p "$TOOLS_DIR/bin" "$TOOLS_DIR/work" "$IMAGES_DIR"
TOOLS_DIR="$(cd "$TOOLS_DIR" && pwd -P)"
IMAGES_DIR="$(cd "$IMAGES_DIR" && pwd -P)"
BIN_DIR="$TOOLS_DIR/bin"
WORK_DIR="$TOOLS_DIR/work/gateway-conformance"
for d in "$TOOLS_DIR" "$IMAGES_DIR"; do
  case "$d/" in "$(cd "$REPO_ROOT" && pwd -P)/"*) die "$d is inside the repo; point it outside" ;; esac
done

export CGO_ENABLED=0
export GOTOOLCHAIN=local
export GOFLAGS=-mod=mod
GO_LANG="$(go env GOVERSION | sed -E 's/^go([0-9]+)\.([0-9]+).*/\1.\2.0/')"

want_stamp() { echo "$1 recipe=$RECIPE"; }
cached() { # file stamp-file version
  [[ -z "${FORCE:-}" && -f "$1" && -f "$2" && "$(cat "$2")" == "$(want_stamp "$3")" ]]
}
timed() { # label cmd...
  local label="$1" t0
  shift
  t0=$(date +%s)
  "$@"
  echo "conformance-tools: $label built in $(($(date +%s) - t0))s"
}

# A wrapper module requiring the release: both the suite and the echo backend are
# packages of sigs.k8s.io/gateway-api (the echo backend's own go.mod is hidden in the
# zip); -mod=mod lets the builds fill go.sum.
wrapper_module() {
  mkdir -p "$WORK_DIR"
  cat >"$WORK_DIR/go.mod" <<EOF
module gatehouse.local/tools/gateway-conformance

go $GO_LANG

require sigs.k8s.io/gateway-api $GATEWAY_API_VERSION
EOF
  (cd "$WORK_DIR" && go mod download sigs.k8s.io/gateway-api)
}

build_suite() {
  (cd "$WORK_DIR" && go test -c -trimpath -ldflags="-s -w" -o "$BIN_DIR/gateway-conformance.test.tmp" sigs.k8s.io/gateway-api/conformance)
  mv -f "$BIN_DIR/gateway-conformance.test.tmp" "$BIN_DIR/gateway-conformance.test"
}

build_echo_image() {
  command -v buildah >/dev/null 2>&1 || die "buildah is not installed (Debian package buildah)"
  local out="$WORK_DIR/echo-basic" ctr
  (cd "$WORK_DIR" && go build -trimpath -ldflags="-buildid= -s -w" -o "$out" sigs.k8s.io/gateway-api/conformance/echo-basic)
  # As upstream's Dockerfile.echo-basic: the binary alone at /, run as nonroot (65532). A storage of its own,
  # so as not to meet other builds' buildah storage.
  local b=(buildah --storage-driver vfs --root "$WORK_DIR/storage" --runroot "$WORK_DIR/runroot")
  ctr="$("${b[@]}" from scratch)"
  "${b[@]}" add --chmod 0755 "$ctr" "$out" /echo-basic >/dev/null
  "${b[@]}" config --entrypoint '["/echo-basic"]' --user 65532:65532 --workingdir / "$ctr"
  "${b[@]}" commit --quiet "$ctr" "$ECHO_IMAGE" >/dev/null
  "${b[@]}" rm "$ctr" >/dev/null
  rm -f "$IMAGES_DIR/echo-basic.oci.tar.tmp"
  "${b[@]}" push --quiet "$ECHO_IMAGE" "oci-archive:$IMAGES_DIR/echo-basic.oci.tar.tmp:$ECHO_IMAGE" >/dev/null
  "${b[@]}" rmi "$ECHO_IMAGE" >/dev/null
  mv -f "$IMAGES_DIR/echo-basic.oci.tar.tmp" "$IMAGES_DIR/echo-basic.oci.tar"
}

# --- main -------------------------------------------------------------------
suite_stamp="$BIN_DIR/.gateway-conformance.test.stamp"
echo_stamp="$IMAGES_DIR/.echo-basic.stamp"
if cached "$BIN_DIR/gateway-conformance.test" "$suite_stamp" "$GATEWAY_API_VERSION" && cached "$IMAGES_DIR/echo-basic.oci.tar" "$echo_stamp" "$ECHO_IMAGE"; then
  echo "conformance-tools: suite and echo image $GATEWAY_API_VERSION cached"
  exit 0
fi
wrapper_module
if cached "$BIN_DIR/gateway-conformance.test" "$suite_stamp" "$GATEWAY_API_VERSION"; then
  echo "conformance-tools: suite $GATEWAY_API_VERSION cached ($BIN_DIR/gateway-conformance.test)"
else
  rm -f "$suite_stamp"
  timed "conformance suite $GATEWAY_API_VERSION" build_suite
  want_stamp "$GATEWAY_API_VERSION" >"$suite_stamp"
fi
if cached "$IMAGES_DIR/echo-basic.oci.tar" "$echo_stamp" "$ECHO_IMAGE"; then
  echo "conformance-tools: $ECHO_IMAGE cached ($IMAGES_DIR/echo-basic.oci.tar)"
else
  rm -f "$echo_stamp"
  timed "$ECHO_IMAGE" build_echo_image
  want_stamp "$ECHO_IMAGE" >"$echo_stamp"
fi
