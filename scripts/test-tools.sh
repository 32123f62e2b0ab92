#!/usr/bin/env bash
# Builds the real Kubernetes tools the integration tests run against
# (kube-apiserver, etcd, helm) from the Go module proxy, at pinned versions,
# into a cache outside the repo, and fetches the Gateway API's standard CRDs
# (sigs.k8s.io/gateway-api's module zip holds them) next to them:
#
#   ${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse/tools}/bin/{kube-apiserver,etcd,helm}
#   ${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse/tools}/gateway-api/*.yaml
#
# and the rest of the one-node cluster scripts/test-cluster.sh runs, in bin/:
#
#   kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl  (k8s.io/kubernetes, the apiserver's version)
#   coredns         (github.com/coredns/coredns, the cluster's DNS)
#   metrics-server  (sigs.k8s.io/metrics-server, for the chart's HorizontalPodAutoscaler)
#   pause           (every pod's sandbox process: build/pause/linux/pause.c of the Kubernetes module, static C)
#
# Why build instead of download: the only reachable sources are package
# registries (the Go module proxy among them); release tarballs are not.
#
# Idempotent: a tool whose binary exists and whose stamp file records the same
# pinned version (and build recipe) is left alone. The Kubernetes commands share
# most of their packages: after the apiserver, kube-proxy and kube-scheduler take
# about a minute each. The Go module and build caches stay in their default
# locations, so a rebuild after a version bump is much faster.
#
# Usage: bash scripts/test-tools.sh                 # build what is missing
#        bash scripts/test-tools.sh kubelet pause   # only the named tools
#        FORCE=1 bash scripts/test-tools.sh         # rebuild everything
#
# GO_BUILD_P=1 bounds go build's parallel compile jobs (default: one per core),
# for a machine whose cores are shared with others at the same time.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# --- pinned versions --------------------------------------------------------
# k8s.io/kubernetes publishes its staging modules (k8s.io/api, apiserver, ...)
# as v0.<minor>.<patch>; its own go.mod requires them at v0.0.0 with local
# replaces that do not apply to us, so the wrapper module replaces each of them
# with the published version of the same minor/patch.
KUBERNETES_VERSION="v1.35.4"
# kube-apiserver v1.35 is built and tested against etcd 3.6.x; the newest 3.6
# patch carries the bug fixes.
ETCD_VERSION="v3.6.16"
HELM_VERSION="v3.19.5"
# The Gateway API CRDs (standard channel) test/e2e/gateway-api.test.ts installs.
# v1.5+ modules ask for a newer Go than the tools are built with.
GATEWAY_API_VERSION="v1.4.1"
COREDNS_VERSION="v1.14.7"
METRICS_SERVER_VERSION="v0.8.0"
# Bump when the way a tool is built changes, so cached binaries get rebuilt.
RECIPE="1"

go_build_env
TOOLS_DIR="$(cache_dir "$TOOLS_DIR")"
BIN_DIR="$(cache_dir "$TOOLS_DIR/bin")"
WORK_DIR="$(cache_dir "$TOOLS_DIR/work")"

stamp_of() { echo "$BIN_DIR/.$1.stamp"; }
want_stamp() { echo "$1 recipe=$RECIPE"; }

is_cached() { # tool version
  local bin="$BIN_DIR/$1" stamp
  stamp="$(stamp_of "$1")"
  [[ -z "${FORCE:-}" && -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$(want_stamp "$2")" ]]
}

# Prints `go mod download -json` output's GoMod path for module@version.
gomod_of() {
  local json
  json="$(cd "$WORK_DIR" && GOFLAGS= go mod download -json "$1@$2")" || die "go mod download $1@$2 failed: $json"
  echo "$json" | sed -n -E 's/^[[:space:]]*"GoMod": "(.*)",?$/\1/p'
}

# Copies the replace directives of a dependency's go.mod (they do not apply to
# dependents, so a wrapper module has to repeat them). Local-path replaces
# (=> ./x, => ../x) point into that module's own repo and are dropped.
copy_replaces() { # go.mod path
  awk '
    /^replace[[:space:]]*\($/ { inblock = 1; next }
    inblock && /^\)/ { inblock = 0; next }
    inblock { print "replace " $0; next }
    /^replace[[:space:]]/ { print }
  ' "$1" | grep -v -E '=>[[:space:]]*\.\.?/' || true
}


# The wrapper module every k8s.io/kubernetes command is built in.
write_kubernetes_gomod() { # dir
  local dir="$1" kgomod
  kgomod="$(gomod_of k8s.io/kubernetes "$KUBERNETES_VERSION")"
  [[ -f "$kgomod" ]] || die "no go.mod downloaded for k8s.io/kubernetes@$KUBERNETES_VERSION"
  {
    echo "module gatehouse.local/tools/$(basename "$dir")"
    echo
    echo "go $GO_LANG"
    echo
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo
    echo "// Staging modules that k8s.io/kubernetes requires at v0.0.0, generated"
    echo "// from its go.mod by scripts/test-tools.sh."
    # Every "k8s.io/<name> v0.0.0" requirement, inside or outside require blocks.
    grep -E '^[[:space:]]*(require[[:space:]]+)?k8s\.io/[^[:space:]]+[[:space:]]+v0\.0\.0([[:space:]]|$)' "$kgomod" |
      sed -E 's/^[[:space:]]*(require[[:space:]]+)?//' | awk '{ print $1 }' | sort -u |
      while read -r mod; do echo "replace $mod => $mod $(kubernetes_staging_version)"; done
    copy_replaces "$kgomod" | grep -v -E '^replace[[:space:]]+k8s\.io/' || true
  } >"$dir/go.mod"
  grep -q '^replace k8s.io/api ' "$dir/go.mod" || die "generated no staging replaces from $kgomod"
}

kubernetes_staging_version() {
  echo "v0.$(echo "$KUBERNETES_VERSION" | cut -d. -f2).$(echo "$KUBERNETES_VERSION" | cut -d. -f3)"
}

# The version ldflags make /version report the real version (charts with a
# kubeVersion constraint and clients compare against it) and keep the
# apiserver's emulation/compatibility version logic on the pinned minor.
kubernetes_ldflags() {
  local vpkg=k8s.io/component-base/version minor
  minor="$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
  echo "-s -w -X $vpkg.gitVersion=$KUBERNETES_VERSION -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"
}

# --- kube-apiserver ---------------------------------------------------------
build_kube_apiserver() {
  local dir="$WORK_DIR/kube-apiserver"
  rm -rf "$dir" && mkdir -p "$dir"
  write_kubernetes_gomod "$dir"
  cat >"$dir/main.go" <<'EOF'
// Wrapper around kube-apiserver's command, built by scripts/test-tools.sh.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
EOF
  (cd "$dir" && go build -trimpath -ldflags="$(kubernetes_ldflags)" -o "$BIN_DIR/kube-apiserver.tmp" .)
  mv -f "$BIN_DIR/kube-apiserver.tmp" "$BIN_DIR/kube-apiserver"
}

# --- the node's Kubernetes commands -----------------------------------------
# Built as the main packages of k8s.io/kubernetes itself (cmd/<name>) inside the
# same kind of wrapper module; they share the Go build cache with the apiserver.
build_kubernetes_cmd() { # name
  local name="$1" dir="$WORK_DIR/$1"
  rm -rf "$dir" && mkdir -p "$dir"
  write_kubernetes_gomod "$dir"
  (cd "$dir" && go build -trimpath -ldflags="$(kubernetes_ldflags)" -o "$BIN_DIR/$name.tmp" "k8s.io/kubernetes/cmd/$name")
  mv -f "$BIN_DIR/$name.tmp" "$BIN_DIR/$name"
}
build_kube_controller_manager() { build_kubernetes_cmd kube-controller-manager; }
build_kube_scheduler() { build_kubernetes_cmd kube-scheduler; }
build_kubelet() { build_kubernetes_cmd kubelet; }
build_kube_proxy() { build_kubernetes_cmd kube-proxy; }
# The cluster tests drive the node as a platform team does: kubectl and helm.
build_kubectl() { build_kubernetes_cmd kubectl; }

# --- pause --------------------------------------------------------------------
# Every pod's sandbox process. No image can be pulled, so scripts/test-cluster.sh
# packs this static binary into the sandbox image itself.
build_pause() {
  local src
  require_command gcc "needed for the pause binary"
  src="$(cd "$WORK_DIR" && GOFLAGS= go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n -E 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p')"
  [[ -f "$src/build/pause/linux/pause.c" ]] || die "no build/pause/linux/pause.c in k8s.io/kubernetes@$KUBERNETES_VERSION"
  gcc -Os -Wall -Werror -static -DVERSION="$KUBERNETES_VERSION-gatehouse" -o "$BIN_DIR/pause.tmp" "$src/build/pause/linux/pause.c"
  strip "$BIN_DIR/pause.tmp"
  mv -f "$BIN_DIR/pause.tmp" "$BIN_DIR/pause"
}

# --- wrapper module around another module's main package ---------------------
build_module_main() { # name module version package
  local name="$1" module="$2" version="$3" pkg="$4" dir="$WORK_DIR/$1" gomod
  rm -rf "$dir" && mkdir -p "$dir"
  gomod="$(gomod_of "$module" "$version")"
  {
    echo "module gatehouse.local/tools/$name"
    echo
    echo "go $GO_LANG"
    echo
    echo "require $module $version"
    echo
    copy_replaces "$gomod"
  } >"$dir/go.mod"
  (cd "$dir" && go build -trimpath -ldflags="-s -w" -o "$BIN_DIR/$name.tmp" "$pkg")
  mv -f "$BIN_DIR/$name.tmp" "$BIN_DIR/$name"
}
# The cluster's DNS.
build_coredns() { build_module_main coredns github.com/coredns/coredns "$COREDNS_VERSION" github.com/coredns/coredns; }
# Resource metrics for the chart's HorizontalPodAutoscaler.
build_metrics_server() {
  build_module_main metrics-server sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION" sigs.k8s.io/metrics-server/cmd/metrics-server
}

# --- etcd -------------------------------------------------------------------
build_etcd() {
  local dir="$WORK_DIR/etcd" egomod
  rm -rf "$dir" && mkdir -p "$dir"
  egomod="$(gomod_of go.etcd.io/etcd/server/v3 "$ETCD_VERSION")"
  {
    echo "module gatehouse.local/tools/etcd"
    echo
    echo "go $GO_LANG"
    echo
    echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
    echo
    copy_replaces "$egomod"
  } >"$dir/go.mod"
  cat >"$dir/main.go" <<'EOF'
// Wrapper around etcd's main, built by scripts/test-tools.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
EOF
  (cd "$dir" && go build -trimpath -ldflags="-s -w" -o "$BIN_DIR/etcd.tmp" .)
  mv -f "$BIN_DIR/etcd.tmp" "$BIN_DIR/etcd"
}

# --- helm -------------------------------------------------------------------
# A wrapper module rather than `go install helm.sh/helm/v3/cmd/helm@ver`: that
# refuses modules with replace directives, and a wrapper copies them.
build_helm() {
  local dir="$WORK_DIR/helm" hgomod clientgo kminor
  rm -rf "$dir" && mkdir -p "$dir"
  hgomod="$(gomod_of helm.sh/helm/v3 "$HELM_VERSION")"
  {
    echo "module gatehouse.local/tools/helm"
    echo
    echo "go $GO_LANG"
    echo
    echo "tool helm.sh/helm/v3/cmd/helm"
    echo
    echo "require helm.sh/helm/v3 $HELM_VERSION"
    echo
    copy_replaces "$hgomod"
  } >"$dir/go.mod"
  # Same ldflags as helm's Makefile: its version, and the Kubernetes version
  # `helm template`/lint assume, taken from the client-go it is built with.
  clientgo="$(grep -E '^[[:space:]]*k8s\.io/client-go[[:space:]]' "$hgomod" | awk '{ print $2 }' | head -1)"
  kminor="$(echo "$clientgo" | cut -d. -f2)"
  local ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  if [[ -n "$kminor" ]]; then
    ldflags+=" -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$kminor"
    ldflags+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kminor"
  fi
  (cd "$dir" && go build -trimpath -ldflags="$ldflags" -o "$BIN_DIR/helm.tmp" helm.sh/helm/v3/cmd/helm)
  mv -f "$BIN_DIR/helm.tmp" "$BIN_DIR/helm"
}

# --- Gateway API CRDs -------------------------------------------------------
GATEWAY_API_DIR="$TOOLS_DIR/gateway-api"
fetch_gateway_api_crds() {
  local json dir
  json="$(cd "$WORK_DIR" && GOFLAGS= go mod download -json "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")" ||
    die "go mod download sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION failed: $json"
  dir="$(echo "$json" | sed -n -E 's/^[[:space:]]*"Dir": "(.*)",?$/\1/p')"
  [[ -d "$dir/config/crd/standard" ]] || die "no config/crd/standard in $dir"
  rm -rf "$GATEWAY_API_DIR.tmp" && mkdir -p "$GATEWAY_API_DIR.tmp"
  cp "$dir"/config/crd/standard/*.yaml "$GATEWAY_API_DIR.tmp/"
  rm -rf "$GATEWAY_API_DIR" && mv "$GATEWAY_API_DIR.tmp" "$GATEWAY_API_DIR"
}

# --- main -------------------------------------------------------------------
total_t0=$(date +%s)
gateway_stamp="$GATEWAY_API_DIR/.stamp"
if [[ -z "${FORCE:-}" && -f "$gateway_stamp" && "$(cat "$gateway_stamp")" == "$(want_stamp "$GATEWAY_API_VERSION")" ]]; then
  log "gateway-api CRDs $GATEWAY_API_VERSION cached ($GATEWAY_API_DIR)"
else
  log "fetching gateway-api CRDs $GATEWAY_API_VERSION into $GATEWAY_API_DIR"
  fetch_gateway_api_crds
  want_stamp "$GATEWAY_API_VERSION" >"$gateway_stamp"
fi
specs=(
  "etcd $ETCD_VERSION build_etcd"
  "kube-apiserver $KUBERNETES_VERSION build_kube_apiserver"
  "helm $HELM_VERSION build_helm"
  "pause $KUBERNETES_VERSION build_pause"
  "kubelet $KUBERNETES_VERSION build_kubelet"
  "kube-proxy $KUBERNETES_VERSION build_kube_proxy"
  "kube-scheduler $KUBERNETES_VERSION build_kube_scheduler"
  "kube-controller-manager $KUBERNETES_VERSION build_kube_controller_manager"
  "kubectl $KUBERNETES_VERSION build_kubectl"
  "coredns $COREDNS_VERSION build_coredns"
  "metrics-server $METRICS_SERVER_VERSION build_metrics_server"
)
for name in "$@"; do
  printf '%s\n' "${specs[@]}" | grep -q "^$name " || die "unknown tool $name"
done
build_started=0
for spec in "${specs[@]}"; do
  read -r tool version fn <<<"$spec"
  [[ $# == 0 || " $* " == *" $tool "* ]] || continue
  if is_cached "$tool" "$version"; then
    log "$tool $version cached ($BIN_DIR/$tool)"
    continue
  fi
  log "building $tool $version with $GO_VERSION into $BIN_DIR (work dir $WORK_DIR/$tool)"
  build_started=1
  rm -f "$(stamp_of "$tool")"
  timed "$tool $version built" "$fn"
  want_stamp "$version" >"$(stamp_of "$tool")"
done
if [[ "$build_started" == 1 ]]; then
  log "done in $(($(date +%s) - total_t0))s"
fi
