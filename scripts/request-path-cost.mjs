// The data plane's per-request access-log and tracing work in process, without sockets: what `ACCESS_LOG` and the
// `OTEL_*` variables add to a proxied request, the way the proxy calls it (proxy/dispatch.ts), from a built tree's
// dist/ files (`npm run build`). Each iteration makes a request id, starts the request's trace (propagation only, or
// the OpenTelemetry tracer as main.ts starts it), starts the access record, names the route and upstream, closes
// the response and finishes the record; every 100 iterations the event loop turns (1 ms), so the access log's writer and
// the span exporter do their work in the measured window.
//
//   [ACCESS_LOG=on] [OTEL_EXPORTER_OTLP_ENDPOINT=…] node scripts/request-path-cost.mjs [TREE] [N] >/dev/null
//
// Prints, on stderr, CPU µs per iteration of the measured N (default 20,000) after as many of warm-up. Under valgrind's
// callgrind, the difference of the instruction counts of a run of N and one of 2N, divided by N, is the count per
// iteration, start-up cancelled (scripts/request-path-instructions.sh). Access lines go to stdout, as in the DP.
import { EventEmitter } from 'node:events';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const tree = resolve(process.argv[2] ?? '.');
const n = Number(process.argv[3] ?? 20_000);
const load = (file) => import(pathToFileURL(resolve(tree, file)).href);

const [{ createLogger }, { createAccessLog }, { propagationOnly }, { startTracing }, { newRequestId }] = await Promise.all([
  load('proto/dist/logger.js'),
  load('data-plane/dist/proxy/access-log.js'),
  load('data-plane/dist/proxy/request-trace.js'),
  load('proto/dist/tracing.js'),
  load('proto/dist/traceparent.js'),
]);
const logger = createLogger('data-plane', 'info');
const accessLog = createAccessLog({ enabled: process.env.ACCESS_LOG !== 'off', sample: 1 }, logger);
let dropped = 0;
const tracing = await startTracing('data-plane', process.env, logger, { dropped: (_reason, spans) => (dropped += spans) });
let tracer = propagationOnly;
if (tracing) {
  const { createOtelRequestTracer } = await load('data-plane/dist/proxy/otel-request-tracer.js');
  // A tree whose tracer takes the Tracer alone (the SDK then samples by the environment itself).
  tracer = createOtelRequestTracer(typeof tracing.sampled === 'function' ? tracing : tracing.tracer);
}

const socket = { remoteAddress: '127.0.0.1', bytesWritten: 0 };
const traceparent = process.env.REQUEST_TRACEPARENT;
const req = {
  method: 'GET',
  url: '/bench/x?q=1',
  httpVersion: '1.1',
  httpVersionMajor: 1,
  headers: { host: '127.0.0.1:8080', 'user-agent': 'wrk', ...(traceparent && { traceparent }) },
  socket,
};

function once() {
  const requestId = newRequestId();
  const res = new EventEmitter();
  res.headersSent = true;
  res.statusCode = 200;
  res.writableFinished = true;
  const trace = tracer.start(req, res, requestId);
  const access = accessLog?.start(req, requestId, socket) ?? null;
  trace.route('api:bench');
  if (access) access.route = 'api:bench';
  trace.upstream('http://127.0.0.1:38180');
  if (access) access.upstream = 'http://127.0.0.1:38180';
  socket.bytesWritten += 100;
  res.emit('close');
  if (access) accessLog.finish(access, socket, 200, false);
  return trace.traceparent;
}

async function run(count) {
  for (let i = 0; i < count; i += 100) {
    for (let j = 0; j < 100; j++) once();
    // A millisecond for the exporter's round trips: spans are exported, not dropped for want of a turn.
    await new Promise((r) => setTimeout(r, 1));
  }
}

await run(n);
const before = process.cpuUsage();
await run(n);
const used = process.cpuUsage(before);
await tracing?.shutdown(10_000);
process.stderr.write(`${((used.user + used.system) / n).toFixed(2)} µs CPU per iteration over ${n}${tracing ? `, ${dropped} spans dropped` : ''}\n`);
process.exit(0);
