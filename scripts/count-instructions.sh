#!/bin/bash
# User-space instructions per proxied request, counted by valgrind's callgrind (docs/benchmarks.md):
# unlike CPU time on a shared 2-core box (±20 % between identical runs), the count of a steady window
# hardly moves, so it can tell a 2 % change. Kernel time (the socket syscalls, about half of the CPU per
# request) is not counted; it is the same for the DP and the bare proxy (`strace -c`).
#
#   scripts/count-instructions.sh [label:tree ...]    (default: bare:bare dp:.)
#
# Each entry runs under callgrind in turn: `bare` is scripts/bare-undici-proxy.mjs, `bare-spec` the same sending SPEC's headers, anything else a built
# tree (`npm run build`) whose data plane (data-plane/bundle/main.js, DP_SCRIPT to pick another) is started against this tree's control plane with
# one plain route. wrk -c10 warms it up (WARM s, default 60: the JIT must have settled at valgrind's
# speed), then ROUNDS windows (default 3) of SECS s (default 20) are counted between callgrind_control
# -z and -d. Prints, per window, the requests served and instructions per request of the main thread and
# of all threads (GC helpers and compiler threads included, which vary more). NODE_FLAGS adds node flags
# to every entry, as in gc-per-request.sh. Needs valgrind and wrk
# (`apt-get install valgrind wrk`); dumps go to $OUT (default /tmp/gatehouse-callgrind) for
# callgrind_annotate. FUNCTIONS=1 also names the JIT-compiled JavaScript (node's --perf-basic-prof) and ends with
# the instructions per request of each function in every entry's last window (scripts/callgrind-functions.mjs; with
# DP_SCRIPT=data-plane/dist/main.js the DP's undici functions keep the names they have in the bare proxy).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gatehouse-callgrind}
base=${PORT_BASE:-38180}
source scripts/one-route-gateway.sh "$@"
functions=()
flags=${NODE_FLAGS:-}

for entry in "${entries[@]}"; do
  entry_dir "$entry"
  # --perf-basic-prof also starts V8's log, which would land in the working directory.
  [ "${FUNCTIONS:-0}" = 1 ] && NODE_FLAGS="$flags --perf-basic-prof --logfile=$out/v8.log --no-logfile-per-isolate"
  vg=(valgrind --tool=callgrind --separate-threads=yes --smc-check=all-non-file "--callgrind-out-file=$out/cg.%p")
  start_entry "$tree" "$out/process.log" "${vg[@]}" node
  wrk -t1 -c10 -d"${WARM:-60}s" "${wrk_headers[@]}" "$url" >/dev/null
  for round in $(seq "${ROUNDS:-3}"); do
    callgrind_control -z "$pid" >/dev/null 2>&1
    requests=$(wrk -t1 -c10 -d"${SECS:-20}s" "${wrk_headers[@]}" "$url" | grep -oP '\d+(?= requests in)')
    callgrind_control -d "$pid" >/dev/null 2>&1
    sleep 1
    # Dump files are cg.<pid>.<dump number>-<thread number>; thread 01 is the main thread.
    main=$(grep -m1 -hoP '^(summary|totals): \K\d+' "$out"/cg.*."$round"-01)
    all=$(cat "$out"/cg.*."$round"-* | grep -oP '^totals: \K\d+' | paste -sd+ | bc)
    echo "$label window $round: $requests requests, instructions/request main thread $((main / requests)), all threads $((all / requests))"
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  if [ "${FUNCTIONS:-0}" = 1 ]; then
    # valgrind runs node in its own process: the map is named after the pid started.
    mv "/tmp/perf-$pid.map" "$out/perf.map"
    functions+=("$label:$(ls "$out"/cg.*."${ROUNDS:-3}"-01):$out/perf.map:$requests")
  fi
done
if [ ${#functions[@]} -gt 0 ]; then node scripts/callgrind-functions.mjs "${functions[@]}"; fi
