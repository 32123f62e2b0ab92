#!/bin/bash
# Where the main thread's time per proxied request goes (docs/benchmarks.md): each entry runs in turn
# under `wrk -t1 -c50` with node's --cpu-prof (50 µs sampling), WARM s (default 5) then SECS s (default
# 20), and scripts/cpuprofile-per-request.mjs prints the sampled µs per request by group (socket
# writes, GC, gatehouse, undici, node.js, ...; module loading at start-up apart) and the functions
# that differ most from the first entry. Sampled time is not CPU time (a write's syscall is counted
# whole, GC helper threads not at all): use it to see where a difference lies, gc-per-request.sh and
# count-instructions.sh to measure it.
#
#   scripts/profile-per-request.sh [label:tree ...]    (default: bare:bare dp:.)
#
# Entries as in gc-per-request.sh (PLUGINS, NODE_FLAGS likewise); profiles stay in $OUT (default
# /tmp/gatehouse-cpuprofile/<label>) for Chrome DevTools. The data plane runs from tsc's files (DP_SCRIPT,
# default data-plane/dist/main.js): the same code as the bundle, whose one file would put gatehouse's
# code, undici and node.js's own JS in one group.
set -euo pipefail
export DP_SCRIPT=${DP_SCRIPT:-data-plane/dist/main.js}
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gatehouse-cpuprofile}
base=${PORT_BASE:-38980}
source scripts/one-route-gateway.sh "$@"

dirs=()
for entry in "${entries[@]}"; do
  entry_dir "$entry"
  prof=(--cpu-prof "--cpu-prof-dir=$out" --cpu-prof-interval 50)
  start_entry "$tree" "$out/process.log" node "${prof[@]}"
  warm=$(wrk -t1 -c50 -d"${WARM:-5}s" "${wrk_headers[@]}" "$url" | grep -oP '\d+(?= requests in)')
  measured=$(wrk -t1 -c50 -d"${SECS:-20}s" "${wrk_headers[@]}" "$url" | grep -oP '\d+(?= requests in)')
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  # The profile covers the whole process, so every request it saw counts.
  echo $((warm + measured)) >"$out/requests"
  dirs+=("$out")
done
node scripts/cpuprofile-per-request.mjs "${dirs[@]}"
