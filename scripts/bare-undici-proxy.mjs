// The bench's "bare undici proxy" (README "Benchmark"): the floor a Node.js proxy on undici costs per
// request, with no gateway feature at all: no routing, no header rules, no X-Forwarded-*, no
// request id, no traceparent, no metrics, no log. One undici Pool to one upstream, the request
// streamed up and the response streamed back with pool.stream. Not part of the product.
//   node scripts/bare-undici-proxy.mjs <port> <upstream origin>   (prints "ready" once listening)
import { createServer } from 'node:http';
import { Pool } from 'undici';

const [port, origin] = process.argv.slice(2);
const pool = new Pool(origin);

createServer((req, res) => {
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
  pool.stream(
    { method: req.method, path: req.url, headers: req.headers, body: hasBody ? req : null },
    ({ statusCode, headers }) => {
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
