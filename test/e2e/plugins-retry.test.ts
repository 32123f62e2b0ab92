/**
 * retry through a real control plane and data plane, attempts counted at real upstreams: a flaky
 * upstream is retried until it answers, a refused target is skipped for the next one (with the
 * whole body of a PUT), attempts and backoff are respected; never retried: a POST, a request whose
 * body already went upstream, a response that already started streaming; `enabled: false` does
 * nothing; bad configurations are refused naming the field, the store unchanged.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { createHash } from 'node:crypto';
import { listen } from '#proto/listen';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { expectRefusedPluginConfig } from '../helpers/refused-plugin-config.js';
import { freePort } from '../helpers/free-port.js';
import { httpRequest } from '../helpers/http-request.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;
/** Answers 200, writes half a body, then resets the connection; counts what it receives. */
let cutter: Server;
let cutterSeen = 0;
let deadTarget: string;

const retry = (name: string, config: unknown, extra: Record<string, unknown> = {}) => ({
  ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url] }),
  plugins: [{ name: 'retry', ...(config as object) }],
  ...extra,
});
const seen = (prefix: string) => u.requests.filter((r) => r.url.startsWith(prefix));

beforeAll(async () => {
  u = await startUpstream('retry-upstream');
  cutter = createServer((req, res) => {
    cutterSeen++;
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100' });
    res.write('x'.repeat(50));
    setTimeout(() => res.socket?.destroy(), 20);
  });
  const cutterPort = await listen(cutter, 0, '127.0.0.1');
  deadTarget = `http://127.0.0.1:${await freePort()}`;
  gw = await startGateway();
  await createApis(gw, [
    retry('flaky', { config: { attempts: 3, backoff: '10ms' } }),
    retry('slow-backoff', { config: { attempts: 3, backoff: '200ms' } }),
    retry('statuses', { config: { attempts: 3, backoff: '0s', statuses: [502] } }),
    retry('by-method', { config: { attempts: 3, backoff: '0s', predicate: 'statusCode >= 500 && request.Method == "GET"' } }),
    retry('retry-off', { enabled: false, config: { attempts: 3, backoff: '0s' } }),
    {
      ...apiDefinition({ name: 'two-targets', listenPath: '/two-targets/*', targets: [deadTarget, u.url] }),
      plugins: [{ name: 'retry', config: { attempts: 2, backoff: '0s' } }],
    },
    {
      ...apiDefinition({ name: 'cut', listenPath: '/cut/*', targets: [`http://127.0.0.1:${cutterPort}`] }),
      plugins: [{ name: 'retry', config: { attempts: 3, backoff: '0s' } }],
    },
  ]);
}, 60_000);

afterAll(async () => {
  const problems = gw ? await gw.stop() : '';
  await u?.close();
  await new Promise<void>((resolve) => (cutter ? cutter.close(() => resolve()) : resolve()));
  expect(problems).toBe('');
});

beforeEach(() => {
  u.reset();
  u.setBehaviour({ kind: 'fixed' });
});

/** Fails the first `failures` requests with `status`, then answers 200. */
function flaky(failures: number, status = 503): void {
  let count = 0;
  u.setBehaviour(() => (++count <= failures ? { kind: 'fixed', status, body: '"try again"' } : { kind: 'fixed' }));
}

test('a flaky upstream is retried until it answers: the client gets the 200, the upstream saw every attempt', async () => {
  flaky(2);
  const res = await gw.dp.request('GET', '/flaky/x?q=1');
  expect(res.status).toBe(200);
  expect(res.json).toEqual({ upstream: 'retry-upstream', method: 'GET', url: '/flaky/x?q=1' });
  expect(seen('/flaky/').length).toBe(3);
});

test('attempts are respected: after the last one the client gets the last upstream answer', async () => {
  flaky(10);
  const res = await gw.dp.request('GET', '/flaky/x');
  expect(res.status).toBe(503);
  expect(res.json).toBe('try again');
  expect(seen('/flaky/').length).toBe(3);
});

test('a POST is never duplicated: counted once at the upstream, with or without a body', async () => {
  flaky(10);
  const withBody = await gw.dp.request('POST', '/flaky/order', { body: '{"item":1}' });
  expect(withBody.status).toBe(503);
  const empty = await gw.dp.request('POST', '/flaky/order');
  expect(empty.status).toBe(503);
  expect(seen('/flaky/').map((r) => r.method)).toEqual(['POST', 'POST']);
});

test('a PUT whose body already went upstream is not retried', async () => {
  flaky(10);
  const res = await gw.dp.request('PUT', '/flaky/doc', { body: 'x'.repeat(10_000) });
  expect(res.status).toBe(503);
  expect(seen('/flaky/').length).toBe(1);
  expect(seen('/flaky/')[0]!.bodyLength).toBe(10_000);
});

test('backoff is waited before each retry, doubling (200 ms, then 400 ms)', async () => {
  flaky(2);
  const started = Date.now();
  const res = await gw.dp.request('GET', '/slow-backoff/x');
  expect(res.status).toBe(200);
  expect(Date.now() - started).toBeGreaterThanOrEqual(600);
  expect(seen('/slow-backoff/').length).toBe(3);
});

test('a refused target is retried on the next target, a PUT with its whole body (no byte had gone upstream)', async () => {
  const body = 'b'.repeat(50_000);
  for (let i = 0; i < 2; i++) {
    // Whichever target the round robin starts with, each request reaches the live one.
    const res = await gw.dp.request('PUT', '/two-targets/doc', { body });
    expect(res.status).toBe(200);
  }
  expect(seen('/two-targets/').map((r) => [r.method, r.bodyLength, r.bodySha256])).toEqual([
    ['PUT', 50_000, createHash('sha256').update(body).digest('hex')],
    ['PUT', 50_000, createHash('sha256').update(body).digest('hex')],
  ]);
});

test('a response that started streaming is never retried: the cut reaches the client, the upstream saw one request', async () => {
  cutterSeen = 0;
  await expect(httpRequest(`${gw.dp.proxyUrl}/cut/x`, { timeoutMs: 5_000 })).rejects.toThrow();
  expect(cutterSeen).toBe(1);
});

/** An upstream of its own for one test, counting the requests, the TCP connections it was sent and those closed. */
async function countingUpstream(answer: (n: number, res: ServerResponse) => void) {
  const counts = { requests: 0, connections: 0, closed: 0 };
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => answer(++counts.requests, res));
  });
  server.on('connection', (socket) => {
    counts.connections++;
    socket.on('close', () => counts.closed++);
  });
  const port = await listen(server, 0, '127.0.0.1');
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return { counts, origin: `http://127.0.0.1:${port}`, close };
}

test('a response of 1 MiB, more than a parked attempt holds before pausing the upstream, reaches the client whole', async () => {
  const body = Buffer.alloc(1024 * 1024, 'abcdefgh');
  const big = await countingUpstream((_n, res) => {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(body.length) });
    res.end(body);
  });
  try {
    await createApis(gw, [
      { ...apiDefinition({ name: 'big', listenPath: '/big/*', targets: [big.origin] }), plugins: [{ name: 'retry', config: { attempts: 2, backoff: '0s' } }] },
    ]);
    const res = await httpRequest(`${gw.dp.proxyUrl}/big/x`);
    expect(res.status).toBe(200);
    expect(res.body.length).toBe(body.length);
    expect(res.sha256).toBe(createHash('sha256').update(body).digest('hex'));
    expect(big.counts.requests).toBe(1);
  } finally {
    await big.close();
  }
});

test('a complete answer that is retried leaves its connection open (it is not aborted: the DP keeps it for reuse)', async () => {
  const upstream = await countingUpstream((n, res) => {
    const text = n === 1 ? '"try again"' : '"ok"';
    res.writeHead(n === 1 ? 503 : 200, { 'content-type': 'application/json', 'content-length': String(text.length) });
    res.end(text);
  });
  try {
    await createApis(gw, [
      {
        ...apiDefinition({ name: 'reuse', listenPath: '/reuse/*', targets: [upstream.origin] }),
        plugins: [{ name: 'retry', config: { attempts: 2, backoff: '0s' } }],
      },
    ]);
    const res = await gw.dp.request('GET', '/reuse/x');
    expect([res.status, res.json]).toEqual([200, 'ok']);
    // undici frees a connection on the next turn of the event loop, so the retry itself goes over a second one.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(upstream.counts).toEqual({ requests: 2, connections: 2, closed: 0 });
  } finally {
    await upstream.close();
  }
});

test('statuses: only those (and connection failures) are retried', async () => {
  flaky(1, 503);
  expect((await gw.dp.request('GET', '/statuses/x')).status).toBe(503);
  expect(seen('/statuses/').length).toBe(1);
  u.reset();
  flaky(1, 502);
  expect((await gw.dp.request('GET', '/statuses/x')).status).toBe(200);
  expect(seen('/statuses/').length).toBe(2);
});

test('a predicate may look at request.Method', async () => {
  flaky(1);
  expect((await gw.dp.request('DELETE', '/by-method/x')).status).toBe(503);
  flaky(1);
  expect((await gw.dp.request('GET', '/by-method/x')).status).toBe(200);
  expect(seen('/by-method/').map((r) => r.method)).toEqual(['DELETE', 'GET', 'GET']);
});

test('enabled: false does nothing', async () => {
  flaky(10);
  expect((await gw.dp.request('GET', '/retry-off/x')).status).toBe(503);
  expect(seen('/retry-off/').length).toBe(1);
});

test('the stored definition shows the normalised config', async () => {
  const res = await gw.admin.getApi('statuses');
  expect(res.body.plugins).toEqual([
    {
      name: 'retry',
      enabled: true,
      config: { attempts: 3, backoff: '0s', predicate: 'statusCode == 0 || statusCode == 502', methods: ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE'] },
    },
  ]);
});

test.each([
  ['attempts 0', { attempts: 0 }, 'plugins[0].config.attempts must be at least 1'],
  ['a backoff that is not a duration', { backoff: 'later' }, 'plugins[0].config.backoff must be a duration from "0s" to "10s", e.g. "100ms"'],
  [
    'code as a predicate',
    { predicate: 'require("fs")' },
    'plugins[0].config.predicate is not a valid predicate: expected statusCode, grpcStatus, request.Method, a number or a string, found "require" at position 1',
  ],
  [
    'predicate and statuses together',
    { predicate: 'statusCode == 500', statuses: [500] },
    'plugins[0].config.statuses must not be given together with predicate',
  ],
])('%s is refused with 400 naming the field, on create and on update (store unchanged)', async (_row, config, message) => {
  const definition = apiDefinition({ name: 'retry-bad', listenPath: '/retry-bad/*', targets: [u.url] });
  await expectRefusedPluginConfig(gw, { definition, existing: 'flaky', plugins: [{ name: 'retry', config }] }, message);
});
