# shellcheck shell=bash
# Sourced by the scripts that build and run the Kubernetes test tools, images and cluster
# (test-tools.sh, conformance-tools.sh, test-images.sh, test-cluster.sh, conformance.sh):
# the repository and cache paths, messages, timing, and the Go build environment.
# It defines and exports nothing else; each script keeps its own pinned versions and stamps.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Outside the repository: multi-GB build trees must not end up in git.
TOOLS_DIR="${GATEHOUSE_TOOLS_DIR:-$HOME/.cache/gatehouse/tools}"
BIN_DIR="$TOOLS_DIR/bin"
IMAGES_DIR="${GATEHOUSE_IMAGES_DIR:-$HOME/.cache/gatehouse/images}"

# Messages go to stderr, prefixed by the script's name (stdout is left to what a command prints, e.g. `test-images.sh names`).
SCRIPT_NAME="$(basename "$0" .sh)"
log() { echo "$SCRIPT_NAME: $*" >&2; }
die() {
  log "$@"
  exit 1
}

require_command() { # command "how to install it"
  command -v "$1" >/dev/null 2>&1 || die "$1 is not installed ($2)"
}

require_root() { # why
  [[ "$(id -u)" -eq 0 ]] || die "$1 needs root"
}

timed() { # label cmd...
  local label="$1" t0
  shift
  t0=$(date +%s)
  "$@"
  log "$label in $(($(date +%s) - t0))s"
}

# Creates a cache directory and prints its physical path; one inside the repository is refused.
cache_dir() { # path
  local dir
  mkdir -p "$1"
  dir="$(cd "$1" && pwd -P)"
  case "$dir/" in
    "$(cd "$REPO_ROOT" && pwd -P)/"*) die "$dir is inside the repo; point GATEHOUSE_TOOLS_DIR / GATEHOUSE_IMAGES_DIR outside (multi-GB build trees must not end up in git)" ;;
  esac
  echo "$dir"
}

# Static binaries, no host toolchain surprises; never silently switch to a downloaded Go toolchain because some
# dependency's go.mod asks for one. GO_BUILD_P=1 bounds go build's parallel compile jobs (default: one per core),
# for a machine whose cores are shared. Sets GO_VERSION (e.g. go1.26.8) and GO_LANG (its `go` directive, 1.26.0).
go_build_env() {
  require_command go "Go >= 1.25 builds the Kubernetes test tools"
  export CGO_ENABLED=0
  export GOTOOLCHAIN=local
  export GOFLAGS="-mod=mod${GO_BUILD_P:+ -p=$GO_BUILD_P}"
  GO_VERSION="$(go env GOVERSION)"
  GO_LANG="$(echo "$GO_VERSION" | sed -E 's/^go([0-9]+)\.([0-9]+).*/\1.\2.0/')"
}
