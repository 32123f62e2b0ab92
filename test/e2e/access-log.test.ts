/**
 * The data plane's access log: one JSON line per proxied request (every field checked), for
 * unmatched requests too, and for a client that leaves early (`aborted: true`); ACCESS_LOG_SAMPLE=0
 * and ACCESS_LOG=off write none. Unmatched requests are counted under route="(unmatched)".
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import type { DataPlane } from '../helpers/start-data-plane.js';
import { startDataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;
let unsampled: DataPlane;
let off: DataPlane;

beforeAll(async () => {
  u = await startUpstream('access-log');
  u.setBehaviour((req) => (req.url.includes('/slow') ? { kind: 'delay', ms: 3_000 } : { kind: 'fixed' }));
  gw = await startGateway();
  unsampled = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env: { ACCESS_LOG_SAMPLE: '0' } });
  off = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env: { ACCESS_LOG: 'off' } });
  const created = await gw.admin.createApi(apiDefinition({ name: 'logged', listenPath: '/logged/*', targets: [u.url] }));
  expect(created.status).toBe(201);
  await gw.admin.waitForDataPlanes(created, [gw.dp, unsampled, off]);
}, 60_000);

afterAll(async () => {
  await unsampled?.stop();
  await off?.stop();
  await gw?.stop();
  await u?.close();
});

type Entry = Record<string, unknown>;

function entries(dp: DataPlane, msg: string, requestId: string): Entry[] {
  return dp.process
    .lines()
    .map((line) => line.json)
    .filter((json): json is Entry => json !== undefined && json.msg === msg && json.requestId === requestId);
}

function waitForEntry(dp: DataPlane, msg: string, requestId: string): Promise<Entry> {
  return pollUntil(async () => entries(dp, msg, requestId)[0], {
    what: `a "${msg}" log line for request ${requestId}`,
    timeoutMs: 5_000,
    details: () => dp.recentLogs(),
  });
}

test('a proxied request: one line with every field', async () => {
  const res = await gw.dp.request('GET', '/logged/items?token=secret', { headers: { host: 'shop.test', 'x-request-id': 'access-proxied' } });
  expect(res.status).toBe(200);
  const entry = await waitForEntry(gw.dp, 'access', 'access-proxied');
  expect(entry).toEqual({
    level: 30,
    time: expect.any(Number),
    service: 'data-plane',
    msg: 'access',
    requestId: 'access-proxied',
    method: 'GET',
    path: '/logged/items',
    protocol: 'HTTP/1.1',
    host: 'shop.test',
    route: 'api:logged',
    upstream: u.url,
    status: 200,
    bytes: expect.any(Number),
    durationMs: expect.any(Number),
    clientIp: '127.0.0.1',
  });
  // Headers and body as written to the client's connection.
  expect(entry.bytes).toBeGreaterThan(res.body.length + 50);
  expect(entry.bytes).toBeLessThan(res.body.length + 1_000);
  expect(entry.durationMs).toBeGreaterThanOrEqual(0);
  expect(entries(gw.dp, 'access', 'access-proxied')).toHaveLength(1);
});

test('an unmatched request: a line with route and upstream null, status 404; the gateway error line has method and path', async () => {
  const res = await gw.dp.request('POST', '/nowhere/x?q=1', { headers: { 'x-request-id': 'access-unmatched' }, body: '{}' });
  expect(res.status).toBe(404);
  const entry = await waitForEntry(gw.dp, 'access', 'access-unmatched');
  expect(entry).toMatchObject({ method: 'POST', path: '/nowhere/x', route: null, upstream: null, status: 404, clientIp: '127.0.0.1' });
  expect(entry).not.toHaveProperty('aborted');
  expect(await waitForEntry(gw.dp, 'gateway error', 'access-unmatched')).toMatchObject({ method: 'POST', path: '/nowhere/x', code: 'NO_ROUTE' });
});

test('a client that leaves before the answer: status 499 and aborted: true', async () => {
  await expect(gw.dp.request('GET', '/logged/slow', { headers: { 'x-request-id': 'access-aborted' }, timeoutMs: 300 })).rejects.toThrow();
  const entry = await waitForEntry(gw.dp, 'access', 'access-aborted');
  expect(entry).toMatchObject({ path: '/logged/slow', route: 'api:logged', upstream: u.url, status: 499, aborted: true });
});

test('unmatched requests are counted under route="(unmatched)"', async () => {
  expect((await gw.dp.request('GET', '/unknown-route')).status).toBe(404);
  const metrics = await httpRequest(`${gw.dp.statusUrl}/metrics`);
  expect(metrics.text).toMatch(/gatehouse_proxy_requests_total\{route="\(unmatched\)",status="404"\} [1-9]/);
  expect(metrics.text).not.toContain('route=""');
});

/** Proxied requests, then an unmatched marker whose "gateway error" line, once seen, follows any access line. */
async function accessLinesFor(dp: DataPlane, prefix: string): Promise<Entry[]> {
  for (let i = 0; i < 5; i++) expect((await dp.request('GET', '/logged/a', { headers: { 'x-request-id': `${prefix}-${i}` } })).status).toBe(200);
  expect((await dp.request('GET', '/nowhere', { headers: { 'x-request-id': `${prefix}-marker` } })).status).toBe(404);
  await waitForEntry(dp, 'gateway error', `${prefix}-marker`);
  return dp.process.lines().flatMap((line) => (line.json?.msg === 'access' ? [line.json] : []));
}

test('ACCESS_LOG_SAMPLE=0: no access lines', async () => {
  expect(await accessLinesFor(unsampled, 'sample-0')).toEqual([]);
});

test('ACCESS_LOG=off: no access lines', async () => {
  expect(await accessLinesFor(off, 'off')).toEqual([]);
});

test('SIGTERM right after 200 requests: 200 whole lines, none lost from the batched writer', async () => {
  const raw: string[] = [];
  const dp = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, onLine: (line) => raw.push(line) });
  for (let round = 0; round < 10; round++) {
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => dp.request('GET', '/logged/drain', { headers: { 'x-request-id': `drain-${round}-${i}` } })),
    );
    for (const res of answers) expect(res.status).toBe(200);
  }
  expect(await dp.stop()).toEqual({ code: 0, signal: null });
  const lines = raw.filter((line) => line.includes('"requestId":"drain-'));
  const parsed = lines.map((line) => JSON.parse(line) as Entry);
  expect(parsed.every((entry) => entry.msg === 'access' && entry.path === '/logged/drain' && entry.status === 200)).toBe(true);
  expect(new Set(parsed.map((entry) => entry.requestId)).size).toBe(200);
  expect(lines).toHaveLength(200);
});
