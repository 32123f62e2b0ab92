/**
 * request_mirror through a real control plane and data plane, with real primary and mirror upstreams: the mirror
 * gets what the primary gets (method, rewritten path, query, headers after request_transformer and the gateway's
 * rules, body) with a `-shadow` Host; the client's answer is the primary's whether the mirror is down, answers 500
 * or holds its request (the client is not kept waiting meanwhile); percentage 0 copies nothing and 50 about half;
 * a body over 1 MiB reaches the primary whole and the mirror not at all; WebSocket handshakes and gRPC calls are not
 * copied; outcomes are counted; bad configs are a 400 naming the field.
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { WebSocket } from 'undici';
import { WebSocketServer } from 'ws';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { freePort } from '../helpers/free-port.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { expectRefusedPluginConfig } from '../helpers/refused-plugin-config.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
/** The primary upstream (echo) and the mirrors: answering (echo by default), holding every request, or none listening. */
let primary: Upstream;
let mirror: Upstream;
let slow: Upstream;
let downUrl: string;

const mirrored = (name: string, target: string, extra: Record<string, unknown> = {}, percentage?: number) => ({
  ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [primary.url], ...extra }),
  plugins: [...((extra.plugins as unknown[]) ?? []), { name: 'request_mirror', config: { target, ...(percentage !== undefined && { percentage }) } }],
});

beforeAll(async () => {
  [primary, mirror, slow] = await Promise.all([
    startUpstream('primary', { kind: 'echo' }),
    startUpstream('mirror', { kind: 'echo' }),
    startUpstream('slow-mirror', { kind: 'hang' }),
  ]);
  downUrl = `http://127.0.0.1:${await freePort()}`;
  gw = await startGateway();
  await createApis(gw, [
    {
      ...apiDefinition({ name: 'copied', listenPath: '/copied/*', targets: [`${primary.url}/base`], stripPath: true }),
      plugins: [
        { name: 'request_transformer', config: { add: { headers: { 'X-Added': 'by-gateway' }, querystring: { v: '2' } }, remove: { headers: ['X-Secret'] } } },
        { name: 'request_mirror', config: { target: mirror.url } },
      ],
    },
    mirrored('failing', mirror.url),
    mirrored('down', downUrl),
    mirrored('slow', slow.url, { responseHeaderTimeout: '3s' }),
    mirrored('none', mirror.url, {}, 0),
    mirrored('half', mirror.url, {}, 50),
    mirrored('large', mirror.url),
    mirrored('static', mirror.url),
  ]);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, primary, mirror, slow)).toBe('');
});

const at = (u: Upstream, prefix: string): RecordedRequest[] => u.requests.filter((r) => r.url.startsWith(prefix));

/** Polls `probe` until `ok` holds of its value (the probe's source names what was awaited). */
function until<T>(probe: () => T | Promise<T>, ok: (value: T) => boolean, timeoutMs?: number): Promise<T> {
  return pollUntil(
    async () => {
      const value = await probe();
      return ok(value) ? value : undefined;
    },
    { what: `${probe.toString()} to satisfy ${ok.toString()}`, timeoutMs },
  );
}

async function metric(route: string, outcome: string): Promise<number> {
  const text = (await httpRequest(`${gw.dp.statusUrl}/metrics`)).text;
  const m = new RegExp(`gatehouse_mirror_requests_total\\{route="api:${route}",outcome="${outcome}"\\} (\\d+)`).exec(text);
  return m ? Number(m[1]) : 0;
}

test('the mirror gets the method, rewritten path, query, headers and body the primary gets, with a -shadow Host', async () => {
  const body = Buffer.from('{"order":42}');
  const res = await gw.dp.request('POST', '/copied/orders/7?x=1', { body, headers: { 'content-type': 'application/json', 'x-client': 'c1', 'x-secret': 's' } });
  expect(res.status).toBe(200);
  const [copy] = await until(
    () => at(mirror, '/base/orders/7'),
    (c) => c.length === 1,
  );
  const sent = at(primary, '/base/orders/7')[0]!;
  expect(copy!.method).toBe('POST');
  expect(copy!.url).toBe(sent.url);
  expect(copy!.url).toBe('/base/orders/7?x=1&v=2');
  expect(copy!.bodyLength).toBe(body.length);
  expect(copy!.bodySha256).toBe(sent.bodySha256);
  expect(sent.headers.host).toBe(primary.hostHeader);
  expect(copy!.headers.host).toBe(`127.0.0.1-shadow:${primary.port}`);
  const { host: _h, connection: _c, ...copied } = copy!.headers;
  const { host: _h2, connection: _c2, ...forwarded } = sent.headers;
  expect(copied).toEqual(forwarded);
  expect(copied).toMatchObject({ 'x-client': 'c1', 'x-added': 'by-gateway', 'x-request-id': res.headers['x-request-id'] });
  expect(copied['x-secret']).toBeUndefined();
  await until(
    () => metric('copied', 'responded'),
    (n) => n === 1,
  );
});

test("a mirror answering 500 leaves the client the primary's answer; counted as server_error", async () => {
  mirror.setBehaviour((r) => (r.url.startsWith('/failing') ? { kind: 'fixed', status: 500, body: 'mirror broke' } : { kind: 'echo' }));
  const res = await gw.dp.request('GET', '/failing/x');
  expect(res.status).toBe(200);
  expect(res.json).toMatchObject({ method: 'GET', url: '/failing/x' });
  await until(
    () => metric('failing', 'server_error'),
    (n) => n === 1,
  );
  mirror.setBehaviour({ kind: 'echo' });
});

test("a mirror nobody listens on leaves the client the primary's answer; counted as error", async () => {
  for (let i = 0; i < 3; i++) expect((await gw.dp.request('POST', '/down/x', { body: 'payload' })).status).toBe(200);
  expect(at(primary, '/down/x')).toHaveLength(3);
  await until(
    () => metric('down', 'error'),
    (n) => n === 3,
  );
});

test("a mirror holding its request does not delay the client; it times out on the route's response_header_timeout", async () => {
  const before = at(slow, '/slow/held').length;
  const started = Date.now();
  const res = await gw.dp.request('GET', '/slow/held');
  expect(res.status).toBe(200);
  // Waiting on the mirror would have taken its 3 s timeout.
  expect(Date.now() - started).toBeLessThan(2_500);
  // The mirror has the copy and has not answered, the timeout not passed: the client had its answer meanwhile.
  await until(
    () => at(slow, '/slow/held').length,
    (n) => n === before + 1,
  );
  expect(await metric('slow', 'timeout')).toBe(0);
  await until(
    () => metric('slow', 'timeout'),
    (n) => n === 1,
    10_000,
  );
});

test('percentage 0 copies nothing; 50 copies some, not all', async () => {
  for (let i = 0; i < 20; i++) expect((await gw.dp.request('GET', `/none/${i}`)).status).toBe(200);
  const N = 100;
  for (let i = 0; i < N; i++) expect((await gw.dp.request('GET', `/half/${i}`)).status).toBe(200);
  // A copy after those arrives, so the ones before it had time to.
  await gw.dp.request('GET', '/static/after-sampling');
  await until(
    () => at(mirror, '/static/after-sampling').length,
    (n) => n === 1,
  );
  await until(
    () => metric('half', 'responded'),
    (n) => n === at(mirror, '/half/').length,
  );
  expect(at(mirror, '/none/')).toHaveLength(0);
  // Binomial(100, 0.5): outside 20..80 with probability below 1e-9.
  expect(at(mirror, '/half/').length).toBeGreaterThanOrEqual(20);
  expect(at(mirror, '/half/').length).toBeLessThanOrEqual(80);
  expect(at(primary, '/half/')).toHaveLength(N);
});

test('a body over 1 MiB reaches the primary whole and the mirror not; counted as body_too_large', async () => {
  const big = Buffer.alloc(1024 ** 2 + 1, 0x61);
  const res = await gw.dp.request('POST', '/large/upload', { body: big });
  expect(res.status).toBe(200);
  expect(res.json).toMatchObject({ bodyLength: big.length });
  // Sent chunked, the size is known only while it streams: the copy is given up then, the primary still whole.
  const chunked = await gw.dp.request('POST', '/large/chunked', { body: big, headers: { 'transfer-encoding': 'chunked' } });
  expect(chunked.status).toBe(200);
  expect(chunked.json).toMatchObject({ bodyLength: big.length });
  const within = await gw.dp.request('POST', '/large/within', { body: Buffer.alloc(1024 ** 2, 0x62) });
  expect(within.status).toBe(200);
  await until(
    () => at(mirror, '/large/within'),
    (c) => c.length === 1 && c[0]!.bodyLength === 1024 ** 2,
  );
  expect(at(mirror, '/large/upload')).toHaveLength(0);
  expect(at(mirror, '/large/chunked')).toHaveLength(0);
  expect(at(mirror, '/large/')).toHaveLength(1);
  await until(
    () => metric('large', 'body_too_large'),
    (n) => n === 2,
  );
});

test('a WebSocket handshake and a gRPC call are not mirrored', async () => {
  const wsServer = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await once(wsServer, 'listening');
  try {
    await createApis(gw, [mirrored('ws-copied', mirror.url, { targets: [`http://127.0.0.1:${(wsServer.address() as AddressInfo).port}`] })]);
    const socket = new WebSocket(`${gw.dp.proxyUrl.replace(/^http/, 'ws')}/ws-copied/chat`);
    await new Promise((resolve, reject) => {
      socket.addEventListener('open', resolve, { once: true });
      socket.addEventListener('error', reject, { once: true });
    });
    socket.close();
    const call = await gw.dp.request('POST', '/static/grpc-call', { body: Buffer.alloc(5), headers: { 'content-type': 'application/grpc' } });
    expect(at(primary, '/static/grpc-call')).toHaveLength(1);
    expect(call.status).toBe(200);
    // A copy after those arrives, so theirs would have had time to.
    await gw.dp.request('GET', '/static/after-upgrade');
    await until(
      () => at(mirror, '/static/after-upgrade').length,
      (n) => n === 1,
    );
    expect(at(mirror, '/ws-copied')).toHaveLength(0);
    expect(at(mirror, '/static/grpc-call')).toHaveLength(0);
  } finally {
    for (const client of wsServer.clients) client.terminate();
    await new Promise((resolve) => wsServer.close(resolve));
  }
});

test.each<[string, unknown, string]>([
  ['no target', {}, 'plugins[0].config.target is required'],
  ['a placeholder', { target: 'http://{svc}:8080' }, 'plugins[0].config.target must not contain placeholders (the mirror target is one fixed origin)'],
  ['a path', { target: 'http://m:1/v2' }, 'plugins[0].config.target must be an origin such as "http://orders-v2:8080" (no path, query or fragment)'],
  ['a percentage over 100', { target: 'http://m:1', percentage: 100.5 }, 'plugins[0].config.percentage must be at most 100'],
])('%s is refused with 400 naming the field, store unchanged', async (_row, config, message) => {
  await expectRefusedPluginConfig(
    gw,
    {
      definition: apiDefinition({ name: 'refused', listenPath: '/refused/*', targets: [primary.url] }),
      existing: 'static',
      plugins: [{ name: 'request_mirror', config }],
    },
    message,
  );
});
