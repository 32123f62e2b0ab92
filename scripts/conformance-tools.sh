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
#   ${GATEHOUSE_IMAGES_DIR:-$HOME/.cache/gatehouse/images}/conformance-coredns.oci.tar
#       CoreDNS at the version and under the name those manifests give it (a DNS backend the
#       suite deploys with the others; its namespace must be Ready before any test runs).
#
# Why build instead of pull: the only reachable sources are package registries.
# Idempotent like scripts/test-tools.sh: what exists with the same stamp is left alone.
#
# Usage: bash scripts/conformance-tools.sh            # build what is missing
#        FORCE=1 bash scripts/conformance-tools.sh    # rebuild everything
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# --- pinned versions --------------------------------------------------------
# Keep equal to GATEWAY_API_VERSION in scripts/test-tools.sh (the CRDs installed):
# the suite refuses CRDs of another release. v1.5+ modules ask for a newer Go.
GATEWAY_API_VERSION="v1.4.1"
# The echo backend's image name in that release's conformance/base/manifests.yaml.
ECHO_IMAGE="gcr.io/k8s-staging-gateway-api/echo-basic:v20240412-v1.0.0-394-g40c666fd"
COREDNS_VERSION="v1.12.2"
COREDNS_IMAGE="registry.k8s.io/coredns/coredns:$COREDNS_VERSION"
# Bump when the way something is built changes, so cached results get rebuilt.
RECIPE="1"

go_build_env
TOOLS_DIR="$(cache_dir "$TOOLS_DIR")"
IMAGES_DIR="$(cache_dir "$IMAGES_DIR")"
BIN_DIR="$(cache_dir "$TOOLS_DIR/bin")"
WORK_DIR="$(cache_dir "$TOOLS_DIR/work")/gateway-conformance"

want_stamp() { echo "$1 recipe=$RECIPE"; }
cached() { # file stamp-file version
  [[ -z "${FORCE:-}" && -f "$1" && -f "$2" && "$(cat "$2")" == "$(want_stamp "$3")" ]]
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

# A static binary alone in an image: name, binary, image path, then buildah config flags.
package_image() {
  local name="$1" bin="$2" path="$3" archive="$4" ctr
  shift 4
  # A storage of its own, so as not to meet other builds' buildah storage.
  local b=(buildah --storage-driver vfs --root "$WORK_DIR/storage" --runroot "$WORK_DIR/runroot")
  ctr="$("${b[@]}" from scratch)"
  "${b[@]}" add --chmod 0755 "$ctr" "$bin" "$path" >/dev/null
  "${b[@]}" config "$@" "$ctr"
  "${b[@]}" commit --quiet "$ctr" "$name" >/dev/null
  "${b[@]}" rm "$ctr" >/dev/null
  rm -f "$archive.tmp"
  "${b[@]}" push --quiet "$name" "oci-archive:$archive.tmp:$name" >/dev/null
  "${b[@]}" rmi "$name" >/dev/null
  mv -f "$archive.tmp" "$archive"
}

build_echo_image() {
  require_command buildah "Debian package buildah"
  (cd "$WORK_DIR" && go build -trimpath -ldflags="-buildid= -s -w" -o "$WORK_DIR/echo-basic" sigs.k8s.io/gateway-api/conformance/echo-basic)
  # As upstream's Dockerfile.echo-basic: the binary alone at /, run as nonroot (65532).
  package_image "$ECHO_IMAGE" "$WORK_DIR/echo-basic" /echo-basic "$IMAGES_DIR/echo-basic.oci.tar" --entrypoint '["/echo-basic"]' --user 65532:65532 --workingdir /
}

build_coredns_image() {
  require_command buildah "Debian package buildah"
  local dir="$WORK_DIR/coredns"
  mkdir -p "$dir"
  printf 'module gatehouse.local/tools/conformance-coredns\n\ngo %s\n\nrequire github.com/coredns/coredns %s\n' "$GO_LANG" "$COREDNS_VERSION" >"$dir/go.mod"
  (cd "$dir" && go build -trimpath -ldflags="-s -w" -o "$dir/coredns.bin" github.com/coredns/coredns)
  # As upstream's image: /coredns the entrypoint, the Corefile given by the Deployment's args.
  package_image "$COREDNS_IMAGE" "$dir/coredns.bin" /coredns "$IMAGES_DIR/conformance-coredns.oci.tar" --entrypoint '["/coredns"]'
}

# --- main -------------------------------------------------------------------
suite_stamp="$BIN_DIR/.gateway-conformance.test.stamp"
echo_stamp="$IMAGES_DIR/.echo-basic.stamp"
coredns_stamp="$IMAGES_DIR/.conformance-coredns.stamp"
if cached "$BIN_DIR/gateway-conformance.test" "$suite_stamp" "$GATEWAY_API_VERSION" && cached "$IMAGES_DIR/echo-basic.oci.tar" "$echo_stamp" "$ECHO_IMAGE" &&
  cached "$IMAGES_DIR/conformance-coredns.oci.tar" "$coredns_stamp" "$COREDNS_IMAGE"; then
  log "suite $GATEWAY_API_VERSION and its images cached"
  exit 0
fi
wrapper_module
for spec in "$BIN_DIR/gateway-conformance.test|$suite_stamp|$GATEWAY_API_VERSION|build_suite" \
  "$IMAGES_DIR/echo-basic.oci.tar|$echo_stamp|$ECHO_IMAGE|build_echo_image" \
  "$IMAGES_DIR/conformance-coredns.oci.tar|$coredns_stamp|$COREDNS_IMAGE|build_coredns_image"; do
  IFS='|' read -r file stamp version fn <<<"$spec"
  if cached "$file" "$stamp" "$version"; then
    log "$version cached ($file)"
    continue
  fi
  rm -f "$stamp"
  timed "$version built" "$fn"
  want_stamp "$version" >"$stamp"
done
