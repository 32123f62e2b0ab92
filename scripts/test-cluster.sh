#!/usr/bin/env bash
# A real one-node Kubernetes for the cluster tests (test/cluster/), built from
# the parts scripts/test-tools.sh builds (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, CoreDNS, pause,
# metrics-server) and Debian's containerd, runc and CNI plugins.
#
# Usage: bash scripts/test-cluster.sh up       # start (reuses a node that is up)
#        bash scripts/test-cluster.sh down     # stop; leaves nothing behind
#        bash scripts/test-cluster.sh status   # exit 0 when up; prints the kubeconfig
#        bash scripts/test-cluster.sh exec CMD...  # run CMD inside the node's network, KUBECONFIG set
#        bash scripts/test-cluster.sh load ARCHIVE...  # import OCI archives into the node's containerd
#
# Design
# - Network: everything runs in the network namespace gatehouse-node
#   (`ip netns`), entered with `nsenter --net` only, so every process stays in
#   the host's mount namespace (kubelet's volume mounts must be seen by
#   containerd). The namespace has lo, a veth pair gh-node/gh-end (both ends
#   inside) whose gh-node holds the node IP 10.250.0.10 (and routing the Service range 10.96.0.0/16, whose
#   ClusterIPs kube-proxy DNATs), and the CNI bridge cni0 with the pods
#   (10.244.0.0/24). It has no default route and no link to the host: pods,
#   Services, NodePorts and the apiserver (https://10.250.0.10:6443) are
#   reachable only from inside it, and nothing routes out. Tests enter it:
#   `nsenter --net=/var/run/netns/gatehouse-node` (or `... exec` above).
#   Its iptables rules (kube-proxy, portmap) live and die with it.
# - Auth: a CA and the apiserver's serving certificate (SANs: node IP, the
#   `kubernetes` Service IP and names), a service-account key pair, and static
#   tokens: admin (system:masters), the kubelet (system:node:gatehouse-node,
#   authorized by the Node authorizer), controller-manager, scheduler and
#   kube-proxy under their built-in RBAC identities, metrics-server under the
#   RBAC its own manifests give it. The kubelet and metrics-server serve
#   certificates of the same CA (kubelet: the node IP; metrics-server: its
#   Service name), and each client checks them.
# - Resource metrics: metrics-server runs as a process in the namespace (like
#   the other daemons), scrapes the kubelet's /metrics/resource every 10 s and
#   serves metrics.k8s.io through the apiserver's aggregation layer (APIService
#   v1beta1.metrics.k8s.io -> a selectorless Service whose EndpointSlice names
#   the node IP). `kubectl top` and HorizontalPodAutoscalers work; the
#   controller-manager syncs HPAs every 5 s (default 15 s) to keep tests short.
# - State: all under $GATEHOUSE_NODE_DIR (default /var/lib/gatehouse-node):
#   etcd data, containerd's root/state/socket (its own config, not the
#   system's), runc's state root, kubelet's root dir and pod logs, CNI config
#   and IP allocations, network namespaces of pods (containerd's
#   netns_mounts_under_state_dir), logs and pid files. Each `up` starts from an
#   empty directory: a fresh cluster, images imported again.
# - Images: nothing can be pulled. `up` packs the pause binary (the sandbox
#   image, containerd's sandbox_image) and the CoreDNS binary into one-layer
#   OCI images written by hand, and imports them.
# - `down`: kills the containers through runc's state root, then every
#   process whose command line names the node directory (daemons and
#   containerd's shims, all started here), unmounts everything under the node
#   directory, removes the containers' cgroups, deletes the network namespace
#   and the directory. It works the same after a crash (kill -9 of anything),
#   and `up` runs it first when a previous node is half there.
#
# The kubelet settings are the ones this machine's kernel needs: cgroup v1
# (failCgroupV1: false, cgroupfs driver, no QoS cgroups, no node allocatable
# enforcement), no local storage isolation (the eviction manager cannot stat
# the root device), and containerd's restrict_oom_score_adj (a process here
# may not lower its oom_score_adj).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

D="${GATEHOUSE_NODE_DIR:-/var/lib/gatehouse-node}"
NETNS=gatehouse-node
NETNS_PATH="/var/run/netns/$NETNS"
NODE_NAME=gatehouse-node
NODE_IP=10.250.0.10
SERVICE_CIDR=10.96.0.0/16
KUBERNETES_SERVICE_IP=10.96.0.1
DNS_SERVICE_IP=10.96.0.10
CLUSTER_CIDR=10.244.0.0/16
POD_CIDR=10.244.0.0/24
APISERVER="https://$NODE_IP:6443"
KUBECONFIG_ADMIN="$D/admin.kubeconfig"
SOCK="$D/containerd/containerd.sock"
PAUSE_IMAGE="localhost/gatehouse/pause:3.10"
COREDNS_IMAGE="localhost/gatehouse/coredns:test"
METRICS_SERVER_PORT=4443
CNI_BIN_DIR="${GATEHOUSE_CNI_BIN_DIR:-/usr/lib/cni}"

in_netns() { nsenter --net="$NETNS_PATH" -- "$@"; }
kctl() { in_netns "$BIN_DIR/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# --- down -------------------------------------------------------------------
# Pids of processes whose command line names the node directory.
node_pids() {
  local p cmd
  for p in /proc/[0-9]*; do
    cmd="$(cat "$p/cmdline" 2>/dev/null | tr '\0' ' ')"
    [[ "$cmd" == *"$D/"* || "$cmd" == *"$D "* ]] || continue
    [[ "${p#/proc/}" == "$$" || "${p#/proc/}" == "$BASHPID" ]] && continue
    echo "${p#/proc/}"
  done
}

kill_containers() {
  local root="$D/runc/k8s.io" id
  [[ -d "$root" ]] || return 0
  for id in $(runc --root "$root" list -q 2>/dev/null); do
    runc --root "$root" kill --all "$id" KILL >/dev/null 2>&1 || true
  done
  sleep 0.5
  for id in $(runc --root "$root" list -q 2>/dev/null); do
    runc --root "$root" delete --force "$id" >/dev/null 2>&1 || true
  done
}

# The node's processes and all their descendants (containers are children of
# containerd's shims), collected before any dies and is reparented.
node_tree() {
  local roots
  roots="$(node_pids)"
  [[ -n "$roots" ]] || return 0
  ps -e -o pid=,ppid= | awk -v roots="$roots" '
    BEGIN { n = split(roots, r, /[ \n]+/); for (i = 1; i <= n; i++) if (r[i] != "") keep[r[i]] = 1 }
    { parent[$1] = $2 }
    END {
      do { changed = 0; for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } } while (changed)
      for (p in keep) print p
    }'
}

# SIGKILL: the node's state is deleted next, so nothing needs a graceful stop.
kill_node_processes() {
  local pids alive i p
  pids="$(node_tree)"
  [[ -n "$pids" ]] || return 0
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
  for i in $(seq 1 25); do
    alive=""
    for p in $pids; do [[ -d /proc/$p ]] && alive+=" $p"; done
    [[ -n "$alive" ]] || return 0
    sleep 0.2
  done
}

unmount_all() {
  local m i
  for i in 1 2 3; do
    # Deepest first; mountinfo escapes spaces as \040 (none of ours have any).
    mapfile -t mounts < <(awk -v d="$D" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
    ((${#mounts[@]} == 0)) && return 0
    for m in "${mounts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  done
}

# runc deletes a container's cgroups; what a killed runc left (and the parent
# containerd names after its namespace) goes here. rmdir only removes empty ones.
remove_cgroups() {
  local ids=() dir
  [[ -f "$D/cgroup-ids" ]] && mapfile -t ids <"$D/cgroup-ids"
  for dir in /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/unified/k8s.io; do
    [[ -d "$dir" ]] || continue
    for id in "${ids[@]}"; do [[ -d "$dir/$id" ]] && rmdir "$dir/$id" 2>/dev/null || true; done
    rmdir "$dir" 2>/dev/null || true
  done
}

# Remembers the containers' ids (their cgroup names) while runc's state is there.
record_container_ids() {
  local root="$D/runc/k8s.io"
  [[ -d "$root" ]] && ls "$root" >>"$D/cgroup-ids" 2>/dev/null || true
}

down() {
  local round
  [[ -d "$D" ]] && record_container_ids
  # The kubelet first, so that nothing restarts the containers killed next; then rounds until no
  # process is left (containerd may start a shim while it is being stopped).
  local kubelet
  kubelet="$(cat "$D/run/kubelet.pid" 2>/dev/null || true)"
  if [[ -n "$kubelet" ]] && tr '\0' ' ' 2>/dev/null <"/proc/$kubelet/cmdline" | grep -qF "$D/"; then kill -KILL "$kubelet" 2>/dev/null || true; fi
  for round in 1 2 3 4 5; do
    kill_containers
    kill_node_processes
    [[ -z "$(node_pids)" ]] && break
  done
  unmount_all
  remove_cgroups
  ip netns delete "$NETNS" 2>/dev/null || true
  [[ -e "$NETNS_PATH" ]] && { umount "$NETNS_PATH" 2>/dev/null || true; rm -f "$NETNS_PATH"; }
  if [[ -d "$D" ]]; then
    rm -rf "$D" 2>/dev/null || { unmount_all; rm -rf "$D"; }
  fi
  log "down"
}

# --- up ---------------------------------------------------------------------
need() {
  local missing=() b
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl coredns pause metrics-server; do
    [[ -x "$BIN_DIR/$b" ]] || missing+=("$b")
  done
  ((${#missing[@]} == 0)) || die "missing in $BIN_DIR: ${missing[*]} (run: bash scripts/test-tools.sh)"
  for b in containerd containerd-shim-runc-v2 runc ctr iptables nsenter openssl; do
    require_command "$b" "Debian packages containerd, runc, iptables, util-linux, openssl"
  done
  for b in bridge host-local loopback portmap; do
    [[ -x "$CNI_BIN_DIR/$b" ]] || die "CNI plugin $CNI_BIN_DIR/$b missing (Debian package containernetworking-plugins)"
  done
}

# Starts a daemon in the node's network namespace, in its own session, logging to logs/NAME.log.
start() { # name cmd...
  local name="$1"
  shift
  setsid nsenter --net="$NETNS_PATH" -- "$@" >"$D/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$D/run/$name.pid"
}

wait_for() { # what seconds cmd...
  local what="$1" secs="$2" i
  shift 2
  for ((i = 0; i < secs * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "$what not ready after ${secs}s (logs: $D/logs)"
}

make_network() {
  ip netns add "$NETNS"
  in_netns ip link set lo up
  # A veth pair with both ends inside: gh-node holds the node IP, gh-end drops
  # whatever is sent to it (the kernel here has no dummy interfaces).
  in_netns ip link add gh-node type veth peer name gh-end
  in_netns ip addr add "$NODE_IP/32" dev gh-node
  in_netns ip link set gh-end up
  in_netns ip link set gh-node up
  # ClusterIPs need a route for locally started connections to reach the OUTPUT
  # chain, where kube-proxy rewrites them to a pod.
  in_netns ip route add "$SERVICE_CIDR" dev gh-node
  in_netns sysctl -qw net.ipv4.ip_forward=1
  in_netns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

# A certificate signed by the node's CA: sign_cert NAME SUBJECT EXTENSIONS -> pki/NAME.{key,crt}
sign_cert() {
  local p="$D/pki"
  openssl req -newkey rsa:2048 -nodes -subj "$2" -keyout "$p/$1.key" -out "$p/$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$p/$1.ext"
  openssl x509 -req -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 30 \
    -extfile "$p/$1.ext" -out "$p/$1.crt" 2>/dev/null
}

make_pki() {
  local p="$D/pki"
  mkdir -p "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=gatehouse-node-ca" \
    -keyout "$p/ca.key" -out "$p/ca.crt" 2>/dev/null
  sign_cert apiserver /CN=kube-apiserver "$(printf 'subjectAltName=IP:%s,IP:%s,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth' \
    "$NODE_IP" "$KUBERNETES_SERVICE_IP")"
  # The front proxy's client certificate: the apiserver proxies aggregated APIs (metrics-server) with it.
  sign_cert front-proxy /CN=front-proxy-client extendedKeyUsage=clientAuth
  # Serving certificates: the kubelet's for its node IP (metrics-server connects there), metrics-server's for
  # the name the aggregator checks (<service>.<namespace>.svc).
  sign_cert kubelet "/CN=system:node:$NODE_NAME" "$(printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth' "$NODE_IP" "$NODE_NAME")"
  sign_cert metrics-server /CN=metrics-server "$(printf 'subjectAltName=DNS:metrics-server.kube-system.svc\nextendedKeyUsage=serverAuth')"
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  local user token
  : >"$p/tokens.csv"
  for user in admin kubelet controller-manager scheduler kube-proxy metrics-server; do
    token="$(openssl rand -hex 24)"
    case "$user" in
      admin) echo "$token,gatehouse-admin,gatehouse-admin,system:masters" ;;
      kubelet) echo "$token,system:node:$NODE_NAME,system:node:$NODE_NAME,system:nodes" ;;
      controller-manager) echo "$token,system:kube-controller-manager,system:kube-controller-manager" ;;
      scheduler) echo "$token,system:kube-scheduler,system:kube-scheduler" ;;
      kube-proxy) echo "$token,system:kube-proxy,system:kube-proxy" ;;
      metrics-server) echo "$token,system:metrics-server,system:metrics-server" ;;
    esac >>"$p/tokens.csv"
    write_kubeconfig "$D/$user.kubeconfig" "$token"
  done
  chmod 600 "$p"/*.key "$p/tokens.csv" "$D"/*.kubeconfig
}

write_kubeconfig() { # path token
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gatehouse-node
  cluster:
    server: $APISERVER
    certificate-authority: $D/pki/ca.crt
users:
- name: user
  user:
    token: $2
contexts:
- name: gatehouse-node
  context:
    cluster: gatehouse-node
    user: user
current-context: gatehouse-node
EOF
}

start_containerd() {
  mkdir -p "$D/containerd" "$D/runc" "$D/cni/net.d"
  cat >"$D/containerd/config.toml" <<EOF
version = 2
root = "$D/containerd/root"
state = "$D/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "$D/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$D/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$D/cni/net.d"
    max_conf_num = 1
EOF
  cat >"$D/cni/net.d/10-gatehouse.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "gatehouse",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$POD_CIDR" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$D/cni/networks"
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  start containerd containerd --config "$D/containerd/config.toml"
  wait_for containerd 30 ctr --address "$SOCK" version
}

# One-layer OCI image archive from a directory, written by hand (no builder needed).
oci_archive() { # name rootfs-dir out.tar config-json
  local name="$1" rootfs="$2" out="$3" cfg="$4" t layer ld ls cd cs md ms
  t="$(mktemp -d)"
  mkdir -p "$t/blobs/sha256"
  tar -C "$rootfs" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$t/layer.tar" .
  ld="$(sha256sum "$t/layer.tar" | cut -d' ' -f1)"
  ls="$(stat -c %s "$t/layer.tar")"
  mv "$t/layer.tar" "$t/blobs/sha256/$ld"
  printf '{"architecture":"amd64","os":"linux","config":%s,"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' "$cfg" "$ld" >"$t/config.json"
  cd="$(sha256sum "$t/config.json" | cut -d' ' -f1)"
  cs="$(stat -c %s "$t/config.json")"
  mv "$t/config.json" "$t/blobs/sha256/$cd"
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$cd" "$cs" "$ld" "$ls" >"$t/manifest.json"
  md="$(sha256sum "$t/manifest.json" | cut -d' ' -f1)"
  ms="$(stat -c %s "$t/manifest.json")"
  mv "$t/manifest.json" "$t/blobs/sha256/$md"
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$md" "$ms" "$name" "${name##*:}" >"$t/index.json"
  echo '{"imageLayoutVersion":"1.0.0"}' >"$t/oci-layout"
  tar -C "$t" -cf "$out" oci-layout index.json blobs
  rm -rf "$t"
}

import_archive() { # archive...
  local a
  for a in "$@"; do
    ctr --address "$SOCK" -n k8s.io images import "$a" >/dev/null || die "ctr images import $a failed"
  done
}

build_node_images() {
  local r="$D/images"
  mkdir -p "$r/pause/rootfs" "$r/coredns/rootfs/etc/coredns"
  cp "$BIN_DIR/pause" "$r/pause/rootfs/pause"
  oci_archive "$PAUSE_IMAGE" "$r/pause/rootfs" "$r/pause.tar" '{"Entrypoint":["/pause"],"User":"65535:65535"}'
  cp "$BIN_DIR/coredns" "$r/coredns/rootfs/coredns"
  oci_archive "$COREDNS_IMAGE" "$r/coredns/rootfs" "$r/coredns.tar" '{"Entrypoint":["/coredns"],"Cmd":["-conf","/etc/coredns/Corefile"]}'
  import_archive "$r/pause.tar" "$r/coredns.tar"
  rm -rf "$r"
}

start_control_plane() {
  mkdir -p "$D/etcd"
  start etcd "$BIN_DIR/etcd" --name "$NODE_NAME" --data-dir "$D/etcd" \
    --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "$NODE_NAME=http://127.0.0.1:2380" --unsafe-no-fsync --log-level warn
  local p="$D/pki"
  start kube-apiserver "$BIN_DIR/kube-apiserver" \
    --etcd-servers http://127.0.0.1:2379 \
    --bind-address 0.0.0.0 --secure-port 6443 --advertise-address "$NODE_IP" \
    --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
    --client-ca-file "$p/ca.crt" --token-auth-file "$p/tokens.csv" \
    --authorization-mode Node,RBAC --allow-privileged=true \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
    --kubelet-preferred-address-types InternalIP \
    --requestheader-client-ca-file "$p/ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$p/front-proxy.crt" --proxy-client-key-file "$p/front-proxy.key" \
    --enable-aggregator-routing=true --profiling=false
  wait_for kube-apiserver 180 kctl get --raw /readyz
  start kube-controller-manager "$BIN_DIR/kube-controller-manager" \
    --kubeconfig "$D/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$D/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$D/controller-manager.kubeconfig" \
    --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false \
    --allocate-node-cidrs=true --cluster-cidr "$CLUSTER_CIDR" --node-cidr-mask-size 24 \
    --service-cluster-ip-range "$SERVICE_CIDR" --controllers '*,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller' \
    --horizontal-pod-autoscaler-sync-period 5s \
    --bind-address 127.0.0.1 --secure-port 10257 --profiling=false
  start kube-scheduler "$BIN_DIR/kube-scheduler" \
    --kubeconfig "$D/scheduler.kubeconfig" \
    --authentication-kubeconfig "$D/scheduler.kubeconfig" \
    --authorization-kubeconfig "$D/scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 10259 --profiling=false
}

start_node() {
  mkdir -p "$D/kubelet" "$D/manifests" "$D/log/pods"
  cat >"$D/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
localStorageCapacityIsolation: false
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
imageServiceEndpoint: unix://$SOCK
staticPodPath: $D/manifests
podLogsDir: $D/log/pods
volumePluginDir: $D/kubelet/volume-plugins
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: cluster.local
resolvConf: ""
address: $NODE_IP
healthzBindAddress: 127.0.0.1
tlsCertFile: $D/pki/kubelet.crt
tlsPrivateKeyFile: $D/pki/kubelet.key
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
serializeImagePulls: false
# One node with a bounded disk: never evict the tests' pods for disk pressure.
evictionHard:
  memory.available: 100Mi
imageGCHighThresholdPercent: 100
EOF
  start kubelet "$BIN_DIR/kubelet" --config "$D/kubelet/config.yaml" \
    --kubeconfig "$D/kubelet.kubeconfig" --root-dir "$D/kubelet" --cert-dir "$D/kubelet/pki" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v 1
  cat >"$D/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: $D/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
clusterCIDR: $CLUSTER_CIDR
nodePortAddresses: [primary]
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Conntrack table sizes are the host's, not this namespace's: leave them alone.
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF
  start kube-proxy "$BIN_DIR/kube-proxy" --config "$D/kube-proxy.yaml"
}

node_ready() {
  [[ "$(kctl get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

start_coredns() {
  kctl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: { name: coredns, namespace: kube-system }
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: "system:coredns" }
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: "system:coredns" }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns" }
subjects: [{ kind: ServiceAccount, name: coredns, namespace: kube-system }]
---
apiVersion: v1
kind: ConfigMap
metadata: { name: coredns, namespace: kube-system }
data:
  # Cluster names only: nothing is forwarded out of the node.
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 30
        }
        cache 30
        loop
        loadbalance
    }
---
apiVersion: apps/v1
kind: Deployment
metadata: { name: coredns, namespace: kube-system, labels: { k8s-app: kube-dns } }
spec:
  replicas: 1
  selector: { matchLabels: { k8s-app: kube-dns } }
  template:
    metadata: { labels: { k8s-app: kube-dns } }
    spec:
      serviceAccountName: coredns
      dnsPolicy: Default
      priorityClassName: system-cluster-critical
      containers:
      - name: coredns
        image: $COREDNS_IMAGE
        imagePullPolicy: Never
        args: ["-conf", "/etc/coredns/Corefile"]
        ports:
        - { name: dns, containerPort: 53, protocol: UDP }
        - { name: dns-tcp, containerPort: 53, protocol: TCP }
        - { name: metrics, containerPort: 9153, protocol: TCP }
        volumeMounts: [{ name: config, mountPath: /etc/coredns, readOnly: true }]
        livenessProbe:
          httpGet: { path: /health, port: 8080 }
        readinessProbe:
          httpGet: { path: /ready, port: 8181 }
        resources:
          requests: { cpu: 50m, memory: 70Mi }
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
      volumes:
      - name: config
        configMap: { name: coredns }
---
apiVersion: v1
kind: Service
metadata: { name: kube-dns, namespace: kube-system, labels: { k8s-app: kube-dns } }
spec:
  selector: { k8s-app: kube-dns }
  clusterIP: $DNS_SERVICE_IP
  ports:
  - { name: dns, port: 53, protocol: UDP }
  - { name: dns-tcp, port: 53, protocol: TCP }
  - { name: metrics, port: 9153, protocol: TCP }
EOF
}

# metrics-server: a process in the namespace, serving metrics.k8s.io through the aggregation layer; its RBAC is
# that of metrics-server's own manifests (read pods and nodes, the kubelet's metrics, delegated authn/authz).
start_metrics_server() {
  local p="$D/pki"
  kctl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: { name: "system:metrics-server" }
rules:
- apiGroups: [""]
  resources: [nodes/metrics]
  verbs: [get]
- apiGroups: [""]
  resources: [pods, nodes]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: "system:metrics-server" }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:metrics-server" }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:metrics-server" }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: { name: "metrics-server:system:auth-delegator" }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:auth-delegator" }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:metrics-server" }]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: { name: "metrics-server-auth-reader", namespace: kube-system }
roleRef: { apiGroup: rbac.authorization.k8s.io, kind: Role, name: extension-apiserver-authentication-reader }
subjects: [{ apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:metrics-server" }]
---
apiVersion: v1
kind: Service
metadata: { name: metrics-server, namespace: kube-system }
spec:
  ports: [{ name: https, port: 443, targetPort: $METRICS_SERVER_PORT, protocol: TCP }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: metrics-server
  namespace: kube-system
  labels: { kubernetes.io/service-name: metrics-server, endpointslice.kubernetes.io/managed-by: test-cluster.sh }
addressType: IPv4
ports: [{ name: https, port: $METRICS_SERVER_PORT, protocol: TCP }]
endpoints: [{ addresses: ["$NODE_IP"], conditions: { ready: true } }]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: { name: v1beta1.metrics.k8s.io }
spec:
  group: metrics.k8s.io
  version: v1beta1
  service: { name: metrics-server, namespace: kube-system, port: 443 }
  caBundle: $(base64 -w0 "$p/ca.crt")
  groupPriorityMinimum: 100
  versionPriority: 100
EOF
  start metrics-server "$BIN_DIR/metrics-server" \
    --kubeconfig "$D/metrics-server.kubeconfig" \
    --authentication-kubeconfig "$D/metrics-server.kubeconfig" --authorization-kubeconfig "$D/metrics-server.kubeconfig" \
    --bind-address "$NODE_IP" --secure-port "$METRICS_SERVER_PORT" \
    --tls-cert-file "$p/metrics-server.crt" --tls-private-key-file "$p/metrics-server.key" \
    --kubelet-preferred-address-types InternalIP --kubelet-certificate-authority "$p/ca.crt" \
    --metric-resolution 10s --kubelet-request-timeout 5s
}

metrics_available() {
  [[ "$(kctl get apiservice v1beta1.metrics.k8s.io -o 'jsonpath={.status.conditions[?(@.type=="Available")].status}' 2>/dev/null)" == True ]]
}

# A node started without metrics-server (or whose metrics-server died) is not the node this script makes.
metrics_server_running() {
  local pid
  pid="$(cat "$D/run/metrics-server.pid" 2>/dev/null || true)"
  [[ -n "$pid" ]] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF "$D/"
}

is_up() {
  [[ -e "$NETNS_PATH" && -f "$KUBECONFIG_ADMIN" ]] && kctl get --raw /readyz >/dev/null 2>&1 && node_ready && metrics_server_running
}

up() {
  need
  if is_up; then
    log "already up"
    status
    return 0
  fi
  local t0
  t0=$(date +%s)
  down >/dev/null 2>&1 || true
  mkdir -p "$D/logs" "$D/run"
  make_network
  make_pki
  start_containerd
  build_node_images
  start_control_plane
  start_node
  wait_for "node $NODE_NAME" 120 node_ready
  start_coredns
  start_metrics_server
  wait_for coredns 120 kctl -n kube-system rollout status deployment/coredns --timeout=2s
  # Available once metrics-server has scraped the kubelet and the aggregator reaches it.
  wait_for "metrics.k8s.io" 120 metrics_available
  log "up in $(($(date +%s) - t0))s"
  status
}

status() {
  if is_up; then
    echo "kubeconfig: $KUBECONFIG_ADMIN"
    echo "containerd: $SOCK"
    echo "netns: $NETNS_PATH"
    return 0
  fi
  echo "down"
  return 1
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  exec)
    shift
    KUBECONFIG="$KUBECONFIG_ADMIN" PATH="$BIN_DIR:$PATH" in_netns "$@"
    ;;
  load)
    shift
    import_archive "$@"
    ;;
  *) die "usage: $0 up|down|status|exec CMD...|load ARCHIVE..." ;;
esac
