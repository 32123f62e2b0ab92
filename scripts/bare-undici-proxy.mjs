// The bench's "bare undici proxy" (docs/benchmarks.md): the floor a Node.js proxy on undici costs per
// request, with no gateway feature at all: no routing, no header rules, no X-Forwarded-*, no
// request id, no traceparent, no metrics, no log. One undici Pool to one upstream, the request
// streamed up and the response streamed back with pool.stream. Not part of the product.
//   node scripts/bare-undici-proxy.mjs <port> <upstream origin> [spec]   (prints "ready" once listening)
//
// With `spec`, it also does what SPEC's "Proxy behaviour" asks of every proxied request, as a hand-written
// proxy would and nothing more: hop-by-hop headers dropped both ways, the upstream's Host, X-Forwarded-For
// appended, -Proto and -Host set (the client's replaced: no proxy in front is trusted), an X-Request-Id (randomUUID) added when absent and returned to the client. No
// routing, rewrite, normalisation, timer, traceparent, metrics or log: the floor of SPEC's headers alone.
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [port, origin, mode] = process.argv.slice(2);
const pool = new Pool(origin);
const spec = mode === 'spec';
const upstreamHost = new URL(origin).host;
// Its own list rather than the gateway's (proto/src/http-fields.ts HOP_BY_HOP_HEADERS): the reference runs without
// the product's code, and test/e2e/forwarding.test.ts fails when what it sends upstream differs from what the DP sends.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'proxy-authenticate',
  'proxy-authorization',
]);

/** `headers` without hop-by-hop fields and those its Connection names. */
function endToEnd(headers) {
  const named = headers.connection
    ? String(headers.connection)
        .toLowerCase()
        .split(/\s*,\s*/)
    : [];
  const out = {};
  for (const name in headers) if (!HOP_BY_HOP.has(name) && !named.includes(name)) out[name] = headers[name];
  return out;
}

function upstreamHeaders(req, requestId) {
  const headers = endToEnd(req.headers);
  headers.host = upstreamHost;
  const xff = headers['x-forwarded-for'];
  headers['x-forwarded-for'] = xff === undefined ? req.socket.remoteAddress : `${xff}, ${req.socket.remoteAddress}`;
  headers['x-forwarded-proto'] = 'http';
  if (req.headers.host !== undefined) headers['x-forwarded-host'] = req.headers.host;
  else delete headers['x-forwarded-host'];
  headers['x-request-id'] = requestId;
  return headers;
}

createServer((req, res) => {
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  const requestId = spec ? (req.headers['x-request-id'] ?? randomUUID()) : undefined;
  pool.stream(
    { method: req.method, path: req.url, headers: spec ? upstreamHeaders(req, requestId) : req.headers, body: hasBody ? req : null },
    ({ statusCode, headers }) => {
      if (spec) {
        headers = endToEnd(headers);
        headers['x-request-id'] = requestId;
      }
      res.writeHead(statusCode, headers);
      return res;
    },
    (err) => {
      if (!err) return;
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    },
  );
}).listen(Number(port), '127.0.0.1', () => console.log('ready'));
// Exit on SIGTERM rather than being killed by it, so that `node --cpu-prof` writes its profile.
process.once('SIGTERM', () => process.exit(0));
