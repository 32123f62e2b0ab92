#!/usr/bin/env bash
# Builds the container images the Kubernetes tests run, as OCI archives in a cache outside the repo,
# and hands them to a containerd:
#
#   docker.io/library/node:20-bookworm-slim   the base deploy/Dockerfile starts FROM: a local stand-in
#                                             (Debian bookworm from Debian's packages + this machine's Node 20)
#   localhost/gatehouse:test                  deploy/Dockerfile as written
#   localhost/gatehouse-test-upstream:test    test/images/upstream (an HTTP echo server on the same base)
#
#   ${GATEHOUSE_IMAGES_DIR:-$HOME/.cache/gatehouse/images}/<name>.oci.tar
#
# Why a stand-in base: no registry serves images here, so node:20-bookworm-slim cannot be pulled. It is
# made the way the official one is: a debootstrap --variant=minbase bookworm root filesystem (the apt
# mirror this machine uses) plus Node.js 20 and npm under /usr/local, copied from this machine.
#
# Idempotent: an archive is rebuilt only when its inputs change (for the Gatehouse image: the
# Dockerfile, .dockerignore and every file the build context takes from the working tree; for all: the
# base, whose key is the Debian suite and mirror, this machine's node binary and npm version). The
# builder's storage stays in the cache too, as a layer cache: a rebuild after a source change reuses the
# `npm ci` layers while package-lock.json is unchanged.
#
# The builds' RUN steps get the host network and, mounted for the build only, npm's settings of this
# machine (its CA file: npm's registry may be reached through a TLS-inspecting proxy).
#
# Usage: bash scripts/test-images.sh build            build what is missing or stale (as root)
#        bash scripts/test-images.sh load <address>   build, then import into containerd at <address>
#                                                     (namespace k8s.io), unless it already has them
#        bash scripts/test-images.sh names            GATEHOUSE_IMAGE=…, UPSTREAM_IMAGE=… (one a line)
#        FORCE=1 bash scripts/test-images.sh build    rebuild everything
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

# --- pinned -------------------------------------------------------------------
DEBIAN_SUITE="bookworm"
NODE_MAJOR="20"
BASE_IMAGE="docker.io/library/node:${NODE_MAJOR}-${DEBIAN_SUITE}-slim"
GATEHOUSE_IMAGE="localhost/gatehouse:test"
UPSTREAM_IMAGE="localhost/gatehouse-test-upstream:test"
# Bump when the way an image is built changes, so cached archives get rebuilt.
RECIPE="1"

UPSTREAM_CONTEXT="test/images/upstream"

archive_of() { echo "$IMAGES_DIR/$1.oci.tar"; }
stamp_of() { echo "$IMAGES_DIR/.$1.stamp"; }

names() {
  echo "GATEHOUSE_IMAGE=$GATEHOUSE_IMAGE"
  echo "UPSTREAM_IMAGE=$UPSTREAM_IMAGE"
}

is_cached() { # name key
  [[ -z "${FORCE:-}" && -f "$(archive_of "$1")" && -f "$(stamp_of "$1")" && "$(cat "$(stamp_of "$1")")" == "$2" ]]
}

# --- inputs -------------------------------------------------------------------
# The manifest digest an archive's index names (what `ctr images ls` shows once imported).
archive_digest() { tar -xOf "$1" index.json | node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).manifests[0].digest))'; }

# This machine's Debian mirror(s) for the suite, as "URI SUITE COMPONENT" lines (one-line and deb822
# sources alike); Debian's own when this machine is not bookworm.
debian_sources() {
  local lines
  lines="$(apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' 2>/dev/null |
    awk -v s="$DEBIAN_SUITE" '$2 == s || index($2, s "-") == 1' | sort -u)" || true
  if [[ -n "$lines" ]] && echo "$lines" | awk -v s="$DEBIAN_SUITE" '$2 == s' | grep -q .; then
    echo "$lines"
  else
    printf '%s\n' "http://deb.debian.org/debian/ $DEBIAN_SUITE main" "http://deb.debian.org/debian/ $DEBIAN_SUITE-updates main" \
      "http://deb.debian.org/debian-security/ $DEBIAN_SUITE-security main"
  fi
}

NODE_BIN=""
NPM_DIR=""
find_node() {
  NODE_BIN="$(readlink -f "$(command -v node)")" || die "node is not installed"
  local version
  version="$("$NODE_BIN" --version)"
  [[ "$version" == "v$NODE_MAJOR."* ]] || die "this machine's node is $version; the base stands in for Node $NODE_MAJOR"
  # npm-cli.js lives in <prefix>/lib/node_modules/npm/bin.
  NPM_DIR="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
  [[ -f "$NPM_DIR/package.json" && -f "$NPM_DIR/bin/npm-cli.js" ]] || die "npm's package directory not found (from $(command -v npm))"
}

base_key() {
  find_node
  local npm_version
  npm_version="$(node -p 'require(process.argv[1]).version' "$NPM_DIR/package.json")"
  echo "recipe=$RECIPE suite=$DEBIAN_SUITE node=$("$NODE_BIN" --version)/$(stat -c '%s-%Y' "$NODE_BIN") npm=$npm_version" \
    "mirrors=$(debian_sources | awk '{ print $1 }' | sort -u | tr '\n' ' ')"
}

# sha256 of the named files' paths and contents (working tree, so uncommitted edits count).
hash_files() {
  (cd "$REPO_ROOT" && while IFS= read -r f; do if [[ -f "$f" ]]; then printf '%s\n' "$f" && cat "$f"; fi; done) | sha256sum | cut -c1-32
}

# What the Gatehouse build reads: the Dockerfile, .dockerignore and every file (tracked or not, unless
# git-ignored) under the context paths .dockerignore lets in. Test files are left out, as .dockerignore
# does; dist/, bundles and node_modules are git-ignored.
gatehouse_key() {
  local roots base
  roots="$(cd "$REPO_ROOT" && sed -n -E 's|^!/?([^*]+[^/])/?$|\1|p' .dockerignore)"
  [[ -n "$roots" ]] || die ".dockerignore lets nothing in (expected !path lines)"
  base="$(archive_digest "$(archive_of base)")"
  # shellcheck disable=SC2086
  echo "recipe=$RECIPE base=$base inputs=$(
    {
      echo deploy/Dockerfile
      echo .dockerignore
      cd "$REPO_ROOT" && git ls-files --cached --others --exclude-standard -- $roots | grep -v -E '\.test\.ts$' | sort -u
    } | hash_files
  )"
}

upstream_key() {
  echo "recipe=$RECIPE base=$(archive_digest "$(archive_of base)") inputs=$(cd "$REPO_ROOT" && git ls-files --cached --others --exclude-standard -- "$UPSTREAM_CONTEXT" | sort | hash_files)"
}

# --- builder ------------------------------------------------------------------
# The builder's storage persists in the cache (--layers: a build whose package-lock.json did not change
# reuses the `npm ci` layers, and only compiles again); past STORAGE_LIMIT_MB it is emptied first.
WORK=""
STORE=""
STORAGE_DRIVER=""
STORAGE_LIMIT_MB="${GATEHOUSE_IMAGES_STORAGE_LIMIT_MB:-6000}"
unmount_under() { # dir: whatever a failed step left mounted below it, deepest first
  { findmnt -rn -o TARGET | grep -F "$1/" || true; } | sort -r | while IFS= read -r m; do umount -l "$m" || true; done
}

cleanup() {
  [[ -n "$WORK" && -d "$WORK" ]] || return 0
  if [[ -n "$STORAGE_DRIVER" ]]; then bah rm --all >/dev/null 2>&1 || true; fi
  unmount_under "$WORK"
  rm -rf "$WORK"
}

bah() { buildah --root "$STORE" --runroot "/run/gatehouse-images-$STORAGE_DRIVER" --storage-driver "$STORAGE_DRIVER" "$@"; }

start_builder() {
  [[ -n "$WORK" ]] && return 0
  require_command buildah "apt-get install buildah"
  require_root "building the images (debootstrap, buildah's chroot isolation)"
  WORK="$IMAGES_DIR/work"
  cleanup # a previous run that was killed
  mkdir -p "$WORK"
  trap cleanup EXIT
  # The FROM lines name short names (node:20-bookworm-slim): resolve them to docker.io, never pull.
  printf 'unqualified-search-registries = ["docker.io"]\nshort-name-mode = "permissive"\n' >"$WORK/registries.conf"
  export CONTAINERS_REGISTRIES_CONF="$WORK/registries.conf"
  # overlay when the kernel and filesystem allow it (much faster than vfs, which copies every layer).
  STORAGE_DRIVER="${GATEHOUSE_IMAGES_STORAGE_DRIVER:-overlay}"
  STORE="$IMAGES_DIR/storage-$STORAGE_DRIVER"
  if [[ -z "${GATEHOUSE_IMAGES_STORAGE_DRIVER:-}" ]] && ! bah info >/dev/null 2>&1; then
    STORAGE_DRIVER=vfs
    STORE="$IMAGES_DIR/storage-$STORAGE_DRIVER"
  fi
  if [[ -d "$STORE" ]] && (($(du -sm "$STORE" | cut -f1) > STORAGE_LIMIT_MB)); then
    log "builder storage over ${STORAGE_LIMIT_MB} MB: emptied"
    bah rm --all >/dev/null 2>&1 || true
    bah rmi --all --force >/dev/null 2>&1 || true
    unmount_under "$STORE"
    rm -rf "$STORE"
  fi
  bah rm --all >/dev/null 2>&1 || true # containers a killed build left
  log "builder storage: $STORAGE_DRIVER in $STORE"
}

# The archive and its stamp are replaced together at the end: an interrupted build keeps the previous pair.
push_archive() { # image name key
  local archive
  archive="$(archive_of "$2")"
  rm -f "$archive.tmp"
  bah push --quiet "$1" "oci-archive:$archive.tmp:$1" >/dev/null
  rm -f "$(stamp_of "$2")"
  mv -f "$archive.tmp" "$archive"
  echo "$3" >"$(stamp_of "$2")"
}

# --- the base stand-in ----------------------------------------------------------
debootstrap_rootfs() { # dir
  require_command debootstrap "apt-get install debootstrap"
  local mirror
  mirror="$(debian_sources | awk -v s="$DEBIAN_SUITE" '$2 == s { print $1; exit }')"
  mkdir -p "$IMAGES_DIR/debootstrap-cache"
  log "debootstrap --variant=minbase $DEBIAN_SUITE from $mirror"
  debootstrap --variant=minbase --cache-dir="$IMAGES_DIR/debootstrap-cache" "$DEBIAN_SUITE" "$1" "$mirror" >"$WORK/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -20 "$WORK/debootstrap.log")"
}

# Mimics what the official image adds to debian:bookworm-slim: node, npm, npx and corepack under
# /usr/local (node's headers too, for node-gyp), a `node` user (uid 1000), docker-entrypoint.sh, and
# nothing in apt's lists (an `apt-get install` needs its `apt-get update` first).
add_node() { # rootfs
  local root="$1" prefix
  prefix="$(dirname "$NPM_DIR")/../.."
  install -D -m 0755 "$NODE_BIN" "$root/usr/local/bin/node"
  mkdir -p "$root/usr/local/lib/node_modules"
  cp -a "$NPM_DIR" "$root/usr/local/lib/node_modules/npm"
  [[ -d "$(dirname "$NPM_DIR")/corepack" ]] && cp -a "$(dirname "$NPM_DIR")/corepack" "$root/usr/local/lib/node_modules/corepack"
  [[ -d "$prefix/include/node" ]] && mkdir -p "$root/usr/local/include" && cp -a "$prefix/include/node" "$root/usr/local/include/node"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
  [[ -d "$root/usr/local/lib/node_modules/corepack" ]] && ln -sf ../lib/node_modules/corepack/dist/corepack.js "$root/usr/local/bin/corepack"
  ln -sf node "$root/usr/local/bin/nodejs"
  cat >"$root/usr/local/bin/docker-entrypoint.sh" <<'EOF'
#!/bin/sh
set -e

# Run command with node if the first argument contains a "-" or is not a system command.
if [ "${1#-}" != "${1}" ] || [ -z "$(command -v "${1}")" ] || { [ -f "${1}" ] && ! [ -x "${1}" ]; }; then
  set -- node "$@"
fi

exec "$@"
EOF
  chmod 0755 "$root/usr/local/bin/docker-entrypoint.sh"

  # What node links against must come from the image's own Debian packages.
  local missing
  missing="$(env -u NODE_EXTRA_CA_CERTS chroot "$root" ldd /usr/local/bin/node | grep 'not found' || true)"
  [[ -z "$missing" ]] || die "node needs libraries the $DEBIAN_SUITE minbase lacks: $missing"
  env -u NODE_EXTRA_CA_CERTS chroot "$root" /usr/local/bin/node -e 'process.exit(0)' || die "node does not run in the $DEBIAN_SUITE root filesystem"
  chroot "$root" groupadd --gid 1000 node
  chroot "$root" useradd --uid 1000 --gid node --shell /bin/bash --create-home node

  # apt: this machine's Debian mirror (and the settings it needs to be reached), as deb822 sources.
  rm -f "$root/etc/apt/sources.list"
  debian_sources | awk '
    { suites[$1] = suites[$1] (index(" " suites[$1] " ", " " $2 " ") ? "" : " " $2); comps[$1] = comps[$1] (index(" " comps[$1] " ", " " $3 " ") ? "" : " " $3) }
    END { for (u in suites) printf "Types: deb\nURIs: %s\nSuites:%s\nComponents:%s\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n", u, suites[u], comps[u] }
  ' >"$root/etc/apt/sources.list.d/debian.sources"
  apt-config dump Acquire::http::Proxy Acquire::https::Proxy Acquire::Check-Valid-Until Acquire::Check-Date 2>/dev/null |
    grep -E '^Acquire::(https?::Proxy|Check-Valid-Until|Check-Date) ' >"$root/etc/apt/apt.conf.d/90mirror" || rm -f "$root/etc/apt/apt.conf.d/90mirror"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb "$root"/var/log/*.log "$root"/var/log/apt/*
  mkdir -p "$root/var/lib/apt/lists/partial"
  # The runtime provides /dev (debootstrap made device nodes in it).
  rm -rf "${root:?}"/dev/*
}

build_base() { # key
  local rootfs="$WORK/rootfs" ctr node_version
  timed "debootstrap $DEBIAN_SUITE" debootstrap_rootfs "$rootfs"
  find_node
  add_node "$rootfs"
  node_version="$("$NODE_BIN" --version)"
  tar --numeric-owner --xattrs -C "$rootfs" -cf "$WORK/rootfs.tar" .
  rm -rf "$rootfs"
  ctr="$(bah from scratch)"
  bah add --quiet "$ctr" "$WORK/rootfs.tar" / >/dev/null
  rm -f "$WORK/rootfs.tar"
  bah config --os linux --arch "$(dpkg --print-architecture)" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env "NODE_VERSION=${node_version#v}" \
    --entrypoint '["docker-entrypoint.sh"]' --cmd node \
    --label "org.opencontainers.image.description=Local stand-in for $BASE_IMAGE: debootstrap minbase $DEBIAN_SUITE + this machine's node $node_version" \
    "$ctr"
  bah commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
  push_archive "$BASE_IMAGE" base "$1"
}

# The builds below need the base in the builder's storage, under its name.
BASE_LOADED=""
load_base() {
  [[ -n "$BASE_LOADED" ]] && return 0
  bah tag "$(bah pull --quiet "oci-archive:$(archive_of base)" | tail -1)" "$BASE_IMAGE"
  BASE_LOADED=1
}

# npm's global settings for the builds' RUN steps: this machine's CA file (a TLS-inspecting proxy's CA
# lives there) and registry/proxy settings, mounted read-only over the image's empty /usr/local/etc
# (npm's globalconfig is <prefix>/etc/npmrc) for the build only: nothing of it is committed.
npm_build_etc() {
  local dir="$WORK/npm-etc" key value cafile
  [[ -d "$dir" ]] && return 0
  mkdir -p "$dir"
  : >"$dir/npmrc"
  cafile="$(npm config get cafile 2>/dev/null || true)"
  [[ "$cafile" == null || "$cafile" == undefined ]] && cafile=""
  cafile="${cafile:-${NODE_EXTRA_CA_CERTS:-}}"
  if [[ -n "$cafile" && -f "$cafile" ]]; then
    cp "$cafile" "$dir/build-ca.crt"
    echo "cafile=/usr/local/etc/build-ca.crt" >>"$dir/npmrc"
  fi
  for key in registry proxy https-proxy noproxy strict-ssl; do
    value="$(npm config get "$key" 2>/dev/null || true)"
    [[ -n "$value" && "$value" != null && "$value" != undefined ]] && echo "$key=$value" >>"$dir/npmrc"
  done
  return 0
}

build_from_dockerfile() { # name image dockerfile context key
  load_base
  npm_build_etc
  bah bud --isolation chroot --network host --pull-never --layers -v "$WORK/npm-etc:/usr/local/etc:ro" \
    -f "$3" -t "$2" "$4" >"$WORK/bud.log" 2>&1 || die "buildah bud -f $3 failed:
$(tail -40 "$WORK/bud.log")"
  log "$(grep -c -E '^--> Using cache' "$WORK/bud.log" || true) of $(grep -c -E '(^|\] )STEP [0-9]+/' "$WORK/bud.log" || true) steps from the layer cache"
  push_archive "$2" "$1" "$5"
}

build() {
  mkdir -p "$IMAGES_DIR"
  local t0 key built=0
  t0=$(date +%s)
  key="$(base_key)"
  if is_cached base "$key"; then
    log "$BASE_IMAGE cached ($(archive_of base))"
  else
    start_builder
    timed "$BASE_IMAGE built" build_base "$key"
    built=1
  fi
  # Both keys hold the base archive's digest: a rebuilt base rebuilds them.
  key="$(gatehouse_key)"
  if is_cached gatehouse "$key"; then
    log "$GATEHOUSE_IMAGE cached ($(archive_of gatehouse))"
  else
    start_builder
    timed "$GATEHOUSE_IMAGE built from deploy/Dockerfile" build_from_dockerfile gatehouse "$GATEHOUSE_IMAGE" "$REPO_ROOT/deploy/Dockerfile" "$REPO_ROOT" "$key"
    built=1
  fi
  key="$(upstream_key)"
  if is_cached upstream "$key"; then
    log "$UPSTREAM_IMAGE cached ($(archive_of upstream))"
  else
    start_builder
    timed "$UPSTREAM_IMAGE built" build_from_dockerfile upstream "$UPSTREAM_IMAGE" "$REPO_ROOT/$UPSTREAM_CONTEXT/Dockerfile" "$REPO_ROOT/$UPSTREAM_CONTEXT" "$key"
    built=1
  fi
  if [[ "$built" == 1 ]]; then log "done in $(($(date +%s) - t0))s"; fi
  names
}

# --- containerd ---------------------------------------------------------------
load() { # address
  local address="$1" name image archive digest listed
  require_command ctr "apt-get install containerd"
  build
  for name in gatehouse upstream; do
    if [[ "$name" == gatehouse ]]; then image="$GATEHOUSE_IMAGE"; else image="$UPSTREAM_IMAGE"; fi
    archive="$(archive_of "$name")"
    digest="$(archive_digest "$archive")"
    listed="$(ctr --address "$address" -n k8s.io images ls | awk -v n="$image" '$1 == n { print $3 }')"
    if [[ "$listed" == "$digest" ]]; then
      log "$image already in containerd ($digest)"
      continue
    fi
    timed "$image imported into containerd at $address" ctr --address "$address" -n k8s.io images import "$archive" >/dev/null
    listed="$(ctr --address "$address" -n k8s.io images ls | awk -v n="$image" '$1 == n { print $3 }')"
    [[ "$listed" == "$digest" ]] || die "containerd at $address does not list $image at $digest after the import (it lists: $(ctr --address "$address" -n k8s.io images ls -q | tr '\n' ' '))"
  done
}

# --- main ---------------------------------------------------------------------
locked() { # Serialises builds and imports (test files run in parallel and may all ask at once).
  mkdir -p "$IMAGES_DIR"
  exec 9>"$IMAGES_DIR/.lock"
  flock 9
  "$@"
}

case "${1:-}" in
  build) locked build ;;
  load)
    [[ -n "${2:-}" ]] || die "usage: $0 load <containerd address>"
    locked load "$2"
    ;;
  names) names ;;
  *) die "usage: $0 build | load <containerd address> | names" ;;
esac
