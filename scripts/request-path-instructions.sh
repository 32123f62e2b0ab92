#!/bin/bash
# Instructions per request of the access log and of tracing, in process (scripts/request-path-cost.mjs under
# valgrind's callgrind): each entry runs twice, with N and 2N iterations, and the difference of the two counts over
# the 2N iterations it adds is the count per request, node's start and module loading cancelled. Counted, not timed:
# the machine's load does not move it. Compare entries of one run: `on − off` is what the access log adds,
# `traced − off` what tracing adds over propagation alone.
#
#   scripts/request-path-instructions.sh label:tree[:VAR=value,...] ...
#   e.g. off:.:ACCESS_LOG=off on:.:ACCESS_LOG=on all:.:ACCESS_LOG=off,OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318
#
# An OTLP endpoint named in an entry must be listening: SINK_PORT=4318 starts a node server there that answers every
# export 200 (outside valgrind). N (default 10000). Main thread and all threads (V8's GC helpers and compiler threads
# included, which vary more). Needs valgrind; dumps in $OUT (default /tmp/gatehouse-request-path).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gatehouse-request-path}
N=${N:-10000}
rm -rf "$OUT" && mkdir -p "$OUT"
if [ -n "${SINK_PORT:-}" ]; then
  node -e "require('http').createServer((q,s)=>{q.resume();q.on('end',()=>{s.writeHead(200,{'content-type':q.headers['content-type']||'application/x-protobuf'});s.end(q.headers['content-type']==='application/json'?'{}':'')})}).listen($SINK_PORT,'127.0.0.1')" &
  sink=$!
  trap 'kill $sink' EXIT
  sleep 0.5
fi
count() { # <file prefix> <thread selector>: instructions of the dump's main thread / all threads
  if [ "$2" = main ]; then grep -m1 -hoP '^(summary|totals): \K\d+' "$1"-01; else cat "$1"-* | grep -oP '^totals: \K\d+' | paste -sd+ | bc; fi
}
# Every run at once: a count does not depend on how the runs share the cores.
runs=()
for entry in "$@"; do
  label=${entry%%:*} rest=${entry#*:} env=
  tree=$rest
  if [[ $rest == *:* ]]; then tree=${rest%%:*} env=${rest#*:}; fi
  for n in "$N" "$((2 * N))"; do
    (
      [ -z "$env" ] || export ${env//,/ }
      valgrind --tool=callgrind --separate-threads=yes "--callgrind-out-file=$OUT/$label.$n" node scripts/request-path-cost.mjs "$tree" "$n" >/dev/null 2>"$OUT/$label.$n.log"
    ) &
    runs+=($!)
  done
done
wait "${runs[@]}"
for entry in "$@"; do
  label=${entry%%:*}
  main=$(( ($(count "$OUT/$label.$((2 * N))" main) - $(count "$OUT/$label.$N" main)) / (2 * N) ))
  all=$(( ($(count "$OUT/$label.$((2 * N))" all) - $(count "$OUT/$label.$N" all)) / (2 * N) ))
  echo "$label: instructions per request main thread $main, all threads $all ($(grep -h 'µs' "$OUT/$label.$((2 * N)).log"))"
done
