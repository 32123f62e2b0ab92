#!/bin/bash
# Garbage-collector work and CPU per proxied request, by thread (docs/benchmarks.md): what the bench's
# "µs CPU/req" is made of besides the proxy's own code. Each entry runs in turn under `wrk -t1 -c50`
# with node's --trace-gc: after WARM s (default 10), a SECS s window (default 20) prints
#   - CPU µs per request of the main thread and of all other threads (GC helpers, compiler threads),
#     from /proc/<pid>/task/*/stat;
#   - KB allocated per request (heap growth between collections), the scavenges and mark-compacts in
#     the window with their main-thread ms per request, and the bytes per request a scavenge promoted
#     to the old generation: objects that outlive two scavenges (in-flight ones only, when all is well)
#     are what the major GCs then have to mark.
# These move by a few per cent between identical runs where CPU time moves by ±20 %, so they tell a
# retention bug (e.g. 6 KB per request promoted) from noise at once.
#
#   scripts/gc-per-request.sh [label:tree ...]    (default: bare:bare dp:.)
#
# `bare` is scripts/bare-undici-proxy.mjs (`bare-spec`: sending SPEC's headers); anything else a built tree (`npm run build`) whose
# data plane is started as the chart runs it (data-plane/bundle/main.js; DP_SCRIPT: scripts/one-route-gateway.sh), against this tree's control plane with one
# route (PLUGINS, a JSON list, gives it plugins: scripts/one-route-gateway.sh). Needs wrk. NODE_FLAGS adds
# node flags to every entry (e.g. --max-semi-space-size=16).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${PORT_BASE:-38680}
source scripts/one-route-gateway.sh "$@"

# Per-thread CPU ticks: "main <ticks>" for the main thread, "other <ticks>" for each other one.
ticks() { for t in /proc/"$1"/task/*; do [ "${t##*/}" = "$1" ] && echo "main $(awk '{print $14 + $15}' "$t/stat")" || echo "other $(awk '{print $14 + $15}' "$t/stat")"; done; }

for entry in "${entries[@]}"; do
  label=${entry%%:*} tree=${entry#*:}
  log="$data/$label.gc.log"
  start_entry "$tree" "$log" node --trace-gc
  wrk -t1 -c50 -d"${WARM:-10}s" "${wrk_headers[@]}" "$url" >/dev/null
  before=$(ticks "$pid")
  from=$(wc -l <"$log")
  requests=$(wrk -t1 -c50 -d"${SECS:-20}s" "${wrk_headers[@]}" "$url" | grep -oP '\d+(?= requests in)')
  after=$(ticks "$pid")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  LABEL=$label REQUESTS=$requests FROM=$from BEFORE=$before AFTER=$after TICK_HZ=$(getconf CLK_TCK) node --input-type=module -e '
    import { readFileSync } from "node:fs";
    const { LABEL, REQUESTS, FROM, BEFORE, AFTER, TICK_HZ } = process.env;
    const requests = Number(REQUESTS);
    const sum = (text, kind) => text.split("\n").filter((l) => l.startsWith(kind + " ")).reduce((s, l) => s + Number(l.split(" ")[1]), 0);
    const us = (kind) => (((sum(AFTER, kind) - sum(BEFORE, kind)) / Number(TICK_HZ)) * 1e6) / requests;
    // --trace-gc lines: "Scavenge 35.5 (47.5) -> 29.0 (47.5) MB, 0.60 / 0.00 ms" (+ "(+ 12.0 ms in N steps" for incremental marking).
    const gc = /(Scavenge|Mark-Compact) ([\d.]+) \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB, ([\d.]+) \/ [\d.]+ ms(?:  \(\+ ([\d.]+) ms)?/;
    let previous = null, allocated = 0, promoted = 0;
    const count = { Scavenge: 0, "Mark-Compact": 0 }, ms = { Scavenge: 0, "Mark-Compact": 0 };
    for (const line of readFileSync(process.argv[1], "utf8").split("\n").slice(Number(FROM))) {
      const m = gc.exec(line);
      if (!m) continue;
      const [, kind, from, to, pause, incremental] = m;
      if (previous !== null) {
        allocated += Number(from) - previous;
        if (kind === "Scavenge") promoted += Math.max(0, Number(to) - previous);
      }
      previous = Number(to);
      count[kind]++;
      ms[kind] += Number(pause) + Number(incremental ?? 0);
    }
    const perRequest = (mb) => (mb * 1024 * 1024) / requests;
    console.log(`${LABEL}: ${requests} requests; CPU µs/request: main thread ${us("main").toFixed(2)}, other threads ${us("other").toFixed(2)}, total ${(us("main") + us("other")).toFixed(2)}`);
    console.log(`  allocated ${(perRequest(allocated) / 1024).toFixed(2)} KB/request; ${count.Scavenge} scavenges (${((ms.Scavenge * 1000) / requests).toFixed(2)} µs/request), ${count["Mark-Compact"]} mark-compacts (${((ms["Mark-Compact"] * 1000) / requests).toFixed(2)} µs/request, main thread); promoted ${perRequest(promoted).toFixed(0)} B/request`);
  ' "$log"
done
