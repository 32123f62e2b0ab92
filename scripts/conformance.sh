#!/usr/bin/env bash
# Runs the Gateway API conformance suite (built by scripts/conformance-tools.sh) against Gatehouse
# installed by its Helm chart, and writes the suite's ConformanceReport to docs/conformance/.
#
# Run it where the cluster's Services are reachable (the suite calls each Gateway at the address
# Gatehouse writes into Gateway.status.addresses: the data planes' Service's cluster IP, port 80),
# with KUBECONFIG naming a cluster admin. It:
#   1. builds (or finds cached) the suite and its images: scripts/conformance-tools.sh;
#   2. imports the images into containerd when CONTAINERD_ADDRESS is set (else they must be there);
#   3. installs the Gateway API CRDs the tests use (scripts/test-tools.sh fetches them);
#   4. `helm install`s the chart with controlPlane.gatewayApi.enabled=true and the image GATEHOUSE_IMAGE
#      (repository:tag, imported beforehand), waits for it, and creates the GatewayClass `gatehouse`;
#   5. runs the PROFILE (GATEWAY-HTTP by default, or GATEWAY-GRPC; SUPPORTED_FEATURES: the core ones and the extended ones
#      that pass, unless set) and writes docs/conformance/gatehouse-<PROFILE>.yaml; the suite's log goes to the tools' work directory.
#
# Usage: GATEHOUSE_IMAGE=localhost/gatehouse:test bash scripts/conformance.sh
#        RUN_TEST=HTTPRouteSimpleSameNamespace bash scripts/conformance.sh   # one test, no report
#        TEST_TIMEOUT=15m (the suite's -test.timeout; 60m by default), SKIP_TESTS=A,B (the suite's -skip-tests)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

RELEASE="${RELEASE:-gatehouse}"
NS="${NAMESPACE:-gatehouse-system}"
CLASS="gatehouse"
CONTROLLER="gatehouse.dev/gateway-controller"
PROFILE="${PROFILE:-GATEWAY-HTTP}"
case "$PROFILE" in
  GATEWAY-HTTP) default_features="Gateway,HTTPRoute,ReferenceGrant,HTTPRoutePathRewrite,HTTPRouteResponseHeaderModification" ;;
  GATEWAY-GRPC) default_features="Gateway,GRPCRoute,ReferenceGrant" ;;
  *) die "PROFILE must be GATEWAY-HTTP or GATEWAY-GRPC" ;;
esac
SUPPORTED_FEATURES="${SUPPORTED_FEATURES:-$default_features}"
REPORT="$REPO_ROOT/docs/conformance/gatehouse-$PROFILE.yaml"

[[ -n "${KUBECONFIG:-}" ]] || die "KUBECONFIG must name the cluster"
[[ -n "${GATEHOUSE_IMAGE:-}" ]] || die "GATEHOUSE_IMAGE (repository:tag of the Gatehouse image in the node's containerd) must be set"
kubectl() { "$BIN_DIR/kubectl" "$@"; }
helm() { "$BIN_DIR/helm" "$@"; }
[[ -x "$BIN_DIR/kubectl" && -x "$BIN_DIR/helm" ]] || die "kubectl and helm are built by scripts/test-tools.sh"

bash "$REPO_ROOT/scripts/conformance-tools.sh"
if [[ -n "${CONTAINERD_ADDRESS:-}" ]]; then
  for archive in echo-basic conformance-coredns; do
    ctr -a "$CONTAINERD_ADDRESS" -n k8s.io images import "$IMAGES_DIR/$archive.oci.tar"
  done
fi

kubectl apply --server-side -f "$TOOLS_DIR/gateway-api/"
kubectl wait --for condition=Established --timeout 60s crd/gateways.gateway.networking.k8s.io crd/httproutes.gateway.networking.k8s.io crd/referencegrants.gateway.networking.k8s.io

helm upgrade --install "$RELEASE" "$REPO_ROOT/helm/gatehouse" -n "$NS" --create-namespace --wait --timeout 5m \
  --set "image.repository=${GATEHOUSE_IMAGE%:*}" --set "image.tag=${GATEHOUSE_IMAGE##*:}" --set image.pullPolicy=Never \
  --set controlPlane.gatewayApi.enabled=true --set "controlPlane.gatewayApi.controllerName=$CONTROLLER"
kubectl apply -f - <<EOF
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: $CLASS
spec:
  controllerName: $CONTROLLER
EOF

version="$(node -p "require('$REPO_ROOT/package.json').version")"
args=(-test.run TestConformance -test.v -test.timeout "${TEST_TIMEOUT:-60m}" -gateway-class "$CLASS" -supported-features "$SUPPORTED_FEATURES"
  -organization gatehouse -project gatehouse -url https://gatehouse.dev -version "v$version" -contact gatehouse-maintainers -mode default)
[[ -n "${SKIP_TESTS:-}" ]] && args+=(-skip-tests "$SKIP_TESTS")
if [[ -n "${RUN_TEST:-}" ]]; then
  args+=(-run-test "$RUN_TEST")
else
  mkdir -p "$(dirname "$REPORT")"
  args+=(-conformance-profiles "$PROFILE" -report-output "$REPORT")
fi
log="$TOOLS_DIR/work/gateway-conformance/conformance.log"
set +e
"$BIN_DIR/gateway-conformance.test" "${args[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
grep -E '^\s*--- (PASS|FAIL|SKIP): TestConformance/[A-Za-z]+ ' "$log" | sed -E 's/^\s*--- ([A-Z]+): TestConformance\/([A-Za-z0-9]+).*/\1 \2/' | sort | uniq -c | sort -rn | head -100 || true
exit "$rc"
