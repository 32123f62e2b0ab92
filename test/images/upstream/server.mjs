// An HTTP echo server for tests: every request is answered with JSON naming the host that served it
// (the pod name in Kubernetes) and what arrived: {host, method, url, headers, bodyLength}.
//   ?delay=<ms>    answer after ms (at most 60000), for requests in flight during a drain
//   ?status=<code> answer with that status
// PORT (default 8080). SIGTERM: stop accepting, finish the requests in flight, exit.
import { createServer } from 'node:http';
import { hostname } from 'node:os';

const host = hostname();
const server = createServer((req, res) => {
  let bodyLength = 0;
  req.on('data', (chunk) => (bodyLength += chunk.length));
  req.on('end', () => {
    const query = new URL(req.url ?? '/', 'http://upstream').searchParams;
    const delay = Math.min(Number(query.get('delay')) || 0, 60_000);
    const status = Number(query.get('status')) || 200;
    const body = JSON.stringify({ host, method: req.method, url: req.url, headers: req.headers, bodyLength });
    setTimeout(() => {
      res.writeHead(status >= 200 && status <= 599 ? status : 200, { 'content-type': 'application/json', 'x-upstream-host': host });
      res.end(body);
    }, delay);
  });
});
server.listen(Number(process.env.PORT) || 8080, () => console.log(`upstream ${host} listening on ${JSON.stringify(server.address())}`));
process.on('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
  // Requests in flight get at most the longest delay.
  setTimeout(() => process.exit(0), 61_000).unref();
});
