# Sourced by scripts/count-instructions.sh, gc-per-request.sh and alloc-per-request.sh (not run on its own): from the
# repository root, with $base set, starts a node upstream answering "ok" on $upstream_port and this
# tree's control plane (a fresh data dir, a random admin password) holding one API, /bench/*, plain or
# with the plugins in $PLUGINS (a JSON list, e.g. '[{"name":"retry","config":{"attempts":3}}]').
# Sets the ports a data plane uses ($proxy_port, $status_port, $grpc_port), $url (a request to that
# API through $proxy_port) and $pids (killed, with $data removed, at exit; callers add their own). Defines start_entry (below).
# The entries to measure, label:tree, from the caller's arguments ("$@" passed to source): by default
# the bare proxy and this tree's data plane.
here=$(pwd)
entries=("$@")
[ ${#entries[@]} -eq 0 ] && entries=(bare:bare "dp:$here")

# entry_dir <label:tree[:VAR=value,...]>: sets $label and $tree, $entry_env (the entry's own variables for its data
# plane, e.g. `on:.:ACCESS_LOG=on,LOG_LEVEL=info`), and $out to an empty $OUT/<label>.
entry_dir() {
  label=${1%%:*} tree=${1#*:} entry_env=
  if [[ $tree == *:* ]]; then entry_env=${tree#*:} tree=${tree%%:*}; fi
  out="$OUT/$label"
  rm -rf "$out" && mkdir -p "$out"
}

upstream_port=$base admin_port=$((base + 1)) grpc_port=$((base + 2)) proxy_port=$((base + 3)) status_port=$((base + 4))
data=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$data"; }
trap cleanup EXIT

node -e "require('http').createServer((q,s)=>{q.resume();q.on('end',()=>{s.writeHead(200,{'content-type':'text/plain','content-length':2});s.end('ok')})}).listen($upstream_port,'127.0.0.1')" &
pids+=($!)
password=$(node -e "console.log(require('crypto').randomBytes(16).toString('hex'))")
# The data planes present it (the control plane would otherwise require one of its own making).
join_token=$(node -e "console.log(require('crypto').randomBytes(24).toString('hex'))")
ADMIN_HOST=127.0.0.1 GRPC_HOST=127.0.0.1 ADMIN_PORT=$admin_port GRPC_PORT=$grpc_port GRPC_JOIN_TOKEN=$join_token DATA_DIR=$data ADMIN_PASSWORD=$password LOG_LEVEL=warn \
  node control-plane/bundle/main.js >"${CP_LOG:-/dev/null}" 2>&1 &
pids+=($!)
for _ in $(seq 100); do curl -sf "localhost:$admin_port/readyz" >/dev/null && break; sleep 0.1; done
token=$(curl -s -XPOST "localhost:$admin_port/login" -H 'content-type: application/json' -d "{\"username\":\"admin\",\"password\":\"$password\"}" |
  node -pe 'JSON.parse(require("fs").readFileSync(0)).access_token')
# JWT=1: the route is the bench's jwt row (scripts/bench.mjs jwtRow): an oauth2 plugin whose server checks HS256
# tokens, and every request carries the same signed token ($wrk_headers, $curl_headers), so the DP's cache answers.
wrk_headers=() curl_headers=()
plugins=${PLUGINS:-[]}
if [ "${JWT:-0}" = 1 ]; then
  secret=$(node -e "console.log(require('crypto').randomBytes(32).toString('hex'))")
  curl -sf -XPOST "localhost:$admin_port/oauth/servers" -H "authorization: Bearer $token" -H 'content-type: application/json' \
    -d "{\"name\":\"bench-auth\",\"oauth_endpoints\":{\"token\":{\"listen_path\":\"/bench-auth/token\",\"upstreams\":{\"targets\":[{\"target\":\"http://127.0.0.1:$upstream_port\"}]}}},\"token_strategy\":{\"name\":\"jwt\",\"settings\":[{\"alg\":\"HS256\",\"key\":\"$secret\"}]}}" >/dev/null
  plugins=$(PLUGINS="$plugins" node -e 'console.log(JSON.stringify([{ name: "oauth2", enabled: true, config: { server_name: "bench-auth" } }, ...JSON.parse(process.env.PLUGINS)]))')
  jwt=$(SECRET=$secret node --input-type=module -e "import { SignJWT } from 'jose'; console.log(await new SignJWT({ sub: 'bench' }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('1h').sign(new TextEncoder().encode(process.env.SECRET)))")
  wrk_headers=(-H "Authorization: Bearer $jwt") curl_headers=(-H "Authorization: Bearer $jwt")
fi
curl -sf -XPOST "localhost:$admin_port/apis" -H "authorization: Bearer $token" -H 'content-type: application/json' \
  -d "{\"name\":\"bench\",\"proxy\":{\"listen_path\":\"/bench/*\",\"upstreams\":{\"targets\":[{\"target\":\"http://127.0.0.1:$upstream_port\"}]}},\"plugins\":$plugins}" >/dev/null
url="http://127.0.0.1:$proxy_port/bench/x"

# start_entry <tree> <log> <command...>: starts an entry of the measuring scripts under <command> (`node`
# and its flags, after valgrind when counting), output to <log>, and waits until it serves $url; sets
# $pid. <tree> `bare` is scripts/bare-undici-proxy.mjs, `bare-spec` the same with SPEC's headers (its `spec` mode); anything else a built tree whose data plane is
# started as the Helm chart runs it. NODE_FLAGS adds node flags to every entry; DP_SCRIPT (e.g.
# data-plane/dist/main.js) picks the data plane's script in every tree.
start_entry() {
  local tree=$1 log=$2
  shift 2
  if [ "$tree" = bare ] || [ "$tree" = bare-spec ]; then
    "$@" ${NODE_FLAGS:-} scripts/bare-undici-proxy.mjs "$proxy_port" "http://127.0.0.1:$upstream_port" "$([ "$tree" = bare-spec ] && echo spec)" >"$log" 2>&1 &
  else
    # The chart's script, data-plane/bundle/main.js, in a tree that has one (older trees: tsc's files); DP_SCRIPT overrides.
    local script=${DP_SCRIPT:-data-plane/bundle/main.js}
    [ -n "${DP_SCRIPT:-}" ] || [ -f "$tree/$script" ] || script=data-plane/dist/main.js
    # With the image's environment (scripts/image-env.mjs; a variable already set keeps its value).
    local image_env
    image_env=$(node "$here/scripts/image-env.mjs")
    (cd "$tree" && { [ -z "$image_env" ] || export $image_env; } && export PROXY_HOST=127.0.0.1 STATUS_HOST=127.0.0.1 PROXY_PORT=$proxy_port STATUS_PORT=$status_port CONTROL_PLANE_ADDR=127.0.0.1:$grpc_port \
      GRPC_JOIN_TOKEN=$join_token DATAPLANE_ID=measured LOG_LEVEL=warn && { [ -z "${entry_env:-}" ] || export ${entry_env//,/ }; } && exec "$@" --max-semi-space-size=8 ${NODE_FLAGS:-} "$script" >"$log" 2>&1) &
  fi
  pid=$!
  for _ in $(seq 300); do curl -sf "${curl_headers[@]}" "$url" >/dev/null && break; sleep 0.2; done
}
