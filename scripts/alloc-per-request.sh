#!/bin/bash
# Bytes allocated per proxied request, by the function that allocated them (docs/benchmarks.md): each
# entry runs in turn under `wrk -t1 -c50`, WARM s (default 5) unmeasured, then SECS s (default 10)
# under V8's sampling heap profiler with collected objects included (scripts/alloc-sampler.mjs, one
# sample per ALLOC_INTERVAL bytes, default 256), and scripts/allocation-per-request.mjs prints each
# entry's bytes per request, the functions that allocated most, and those whose bytes per request
# differ most from the first entry's, with their callers. Allocation is counted, not timed, so it
# moves by a few per cent between runs where CPU time moves by ±20 %; it is what the scavenges of
# gc-per-request.sh are paid for.
#
#   scripts/alloc-per-request.sh [label:tree ...]    (default: bare:bare dp:.)
#
# Entries as in gc-per-request.sh (PLUGINS, NODE_FLAGS likewise). The data plane runs from tsc's files
# (DP_SCRIPT, default data-plane/dist/main.js): the same code as the bundle, but with undici's functions
# in undici's own files, so that they line up with the bare proxy's.
set -euo pipefail
export DP_SCRIPT=${DP_SCRIPT:-data-plane/dist/main.js}
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gatehouse-allocations}
base=${PORT_BASE:-39080}
source scripts/one-route-gateway.sh "$@"

files=()
for entry in "${entries[@]}"; do
  entry_dir "$entry"
  ALLOC_START="$out/start" ALLOC_STOP="$out/stop" ALLOC_OUT="$out/profile.json" \
    start_entry "$tree" "$out/process.log" node --import "$here/scripts/alloc-sampler.mjs"
  wrk -t1 -c50 -d"${WARM:-5}s" "${wrk_headers[@]}" "$url" >/dev/null
  touch "$out/start"
  for _ in $(seq 100); do [ -f "$out/profile.json.sampling" ] && break; sleep 0.1; done
  wrk -t1 -c50 -d"${SECS:-10}s" "${wrk_headers[@]}" "$url" | grep -oP '\d+(?= requests in)' >"$out/requests"
  touch "$out/stop"
  for _ in $(seq 300); do [ -s "$out/profile.json" ] && break; sleep 0.1; done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  files+=("$out")
done
node scripts/allocation-per-request.mjs "${files[@]}"
