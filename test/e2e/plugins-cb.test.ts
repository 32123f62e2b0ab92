/**
 * cb through a real control plane and data plane, traffic counted at real upstreams: the breaker
 * trips after its threshold and then answers 503 without upstream traffic, lets one probe through
 * after sleep_window and recovers (or opens again), is per target (with retry, requests move on
 * to the healthy target), keeps its state across snapshots while its config is unchanged, shows
 * its state on the DP's /metrics; timeout and max_concurrent_requests; `enabled: false` does
 * nothing; bad configurations are refused naming the field, the store unchanged.
 */
import { createServer } from 'node:http';
import { listen } from '#proto/listen';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { expectRefusedPluginConfig } from '../helpers/refused-plugin-config.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;
let healthy: Upstream;

const SLEEP_MS = 400;
const cb = (name: string, config: unknown, extra: Partial<Parameters<typeof apiDefinition>[0]> = {}) => ({
  ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url], ...extra }),
  plugins: [{ name: 'cb', ...(config as object) }],
});
const seen = (prefix: string) => u.requests.filter((r) => r.url.startsWith(prefix)).length;
const get = (path: string) => gw.dp.request('GET', path);
const stateOf = async (route: string, target: string): Promise<string | undefined> => {
  const text = (await httpRequest(`${gw.dp.statusUrl}/metrics`)).text;
  return text
    .split('\n')
    .find((l) => l.startsWith(`gatehouse_circuit_breaker_state{route="api:${route}",target="${target}"}`))
    ?.split(' ')[1];
};

beforeAll(async () => {
  u = await startUpstream('cb-upstream');
  healthy = await startUpstream('cb-healthy');
  gw = await startGateway();
  await createApis(gw, [
    cb('trip', { config: { error_percent_threshold: 50, request_volume_threshold: 4, sleep_window: SLEEP_MS } }),
    cb('streak', { config: { consecutive_failures: 2, sleep_window: 60_000 } }),
    cb('keep', { config: { consecutive_failures: 1, sleep_window: 60_000 } }),
    cb('slow', { config: { timeout: 100, consecutive_failures: 1, sleep_window: 60_000 } }),
    cb('busy', { config: { max_concurrent_requests: 1 } }),
    cb('cb-off', { enabled: false, config: { consecutive_failures: 1 } }),
    {
      ...apiDefinition({ name: 'pair', listenPath: '/pair/*', targets: [u.url, healthy.url] }),
      plugins: [
        { name: 'cb', config: { consecutive_failures: 1, sleep_window: 60_000 } },
        { name: 'retry', config: { attempts: 2, backoff: '0s' } },
      ],
    },
  ]);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u, healthy)).toBe('');
});

beforeEach(() => {
  u.reset();
  healthy.reset();
  u.setBehaviour({ kind: 'fixed' });
});

test('trips at the error percentage once the volume is reached, then answers 503 without touching the upstream; half-open probe and recovery', async () => {
  u.setBehaviour({ kind: 'fixed', status: 500 });
  for (let i = 0; i < 4; i++) expect((await get('/trip/x')).status).toBe(500);
  expect(seen('/trip/')).toBe(4);
  expect(await stateOf('trip', u.url)).toBe('2');

  for (let i = 0; i < 3; i++) {
    const refused = await get('/trip/x');
    expect(refused.status).toBe(503);
    expect(refused.headers['content-type']).toBe('application/json');
    expect(refused.json).toBe('upstream circuit open');
    expect(refused.headers['x-request-id']).toBeDefined();
  }
  expect(seen('/trip/')).toBe(4);

  // After sleep_window: one probe; it fails, so the breaker opens again at once.
  await new Promise((r) => setTimeout(r, SLEEP_MS + 50));
  expect(await stateOf('trip', u.url)).toBe('1');
  expect((await get('/trip/x')).status).toBe(500);
  expect(seen('/trip/')).toBe(5);
  expect((await get('/trip/x')).status).toBe(503);
  expect(seen('/trip/')).toBe(5);

  // The next probe succeeds: closed again, traffic flows.
  u.setBehaviour({ kind: 'fixed' });
  await new Promise((r) => setTimeout(r, SLEEP_MS + 50));
  expect((await get('/trip/x')).status).toBe(200);
  expect(await stateOf('trip', u.url)).toBe('0');
  for (let i = 0; i < 3; i++) expect((await get('/trip/x')).status).toBe(200);
  expect(seen('/trip/')).toBe(9);
});

test('consecutive_failures trips after that many errors in a row', async () => {
  u.setBehaviour({ kind: 'fixed', status: 502 });
  expect((await get('/streak/x')).status).toBe(502);
  expect(await stateOf('streak', u.url)).toBe('0');
  expect((await get('/streak/x')).status).toBe(502);
  expect((await get('/streak/x')).status).toBe(503);
  expect(seen('/streak/')).toBe(2);
});

test('breakers are per target: with retry, an open target is skipped for the healthy one, which alone gets the traffic', async () => {
  u.setBehaviour({ kind: 'fixed', status: 503 });
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await get('/pair/x')).status);
  expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
  expect(seen('/pair/')).toBe(1); // the one failure that opened its breaker
  expect(healthy.requests.length).toBe(6);
  expect(await stateOf('pair', u.url)).toBe('2');
  expect(await stateOf('pair', healthy.url)).toBe('0');
});

test('the state survives a new snapshot while the cb config is unchanged; a changed config starts closed', async () => {
  u.setBehaviour({ kind: 'fixed', status: 500 });
  expect((await get('/keep/x')).status).toBe(500);
  expect((await get('/keep/x')).status).toBe(503);

  // Another API changes: a new snapshot, this route's breaker is kept.
  const other = await gw.admin.createApi(cb('unrelated', { config: {} }));
  await gw.admin.waitForDataPlanes(other, gw.dps);
  expect((await get('/keep/x')).status).toBe(503);
  expect(seen('/keep/')).toBe(1);

  // The cb config itself changes: a new breaker, closed.
  const changed = await gw.admin.updateApi('keep', { plugins: [{ name: 'cb', config: { consecutive_failures: 2, sleep_window: 60_000 } }] });
  expect(changed.status).toBe(200);
  await gw.admin.waitForDataPlanes(changed, gw.dps);
  expect((await get('/keep/x')).status).toBe(500);
  expect(seen('/keep/')).toBe(2);
});

test('timeout: no response headers in time is a 504 and an error for the breaker', async () => {
  u.setBehaviour({ kind: 'delay', ms: 1_000 });
  const slow = await get('/slow/x');
  expect(slow.status).toBe(504);
  expect(slow.json).toBe('gateway timeout');
  expect((await get('/slow/x')).status).toBe(503);
  expect(seen('/slow/')).toBe(1);
});

test("timeout: the timed-out attempt's upstream request is cut at once, not left waiting until the route's response_header_timeout", async () => {
  // An upstream that never answers and notes when the gateway gives up on each request.
  const cut: number[] = [];
  const received: number[] = [];
  const silent = createServer((_req, res) => {
    received.push(Date.now());
    res.on('close', () => cut.push(Date.now()));
  });
  const port = await listen(silent, 0, '127.0.0.1');
  try {
    const api = {
      ...apiDefinition({ name: 'abandon', listenPath: '/abandon/*', targets: [`http://127.0.0.1:${port}`], responseHeaderTimeout: '30s' }),
      plugins: [{ name: 'cb', config: { timeout: 150, consecutive_failures: 100 } }],
    };
    await createApis(gw, [api]);
    const answered = await get('/abandon/x');
    expect(answered.status).toBe(504);
    expect(received).toHaveLength(1);
    // Without the cut, the upstream's response would stay open for the route's 30 s.
    await pollUntil(async () => (cut.length === 1 ? true : undefined), { what: 'the upstream request to be cut', timeoutMs: 3_000 });
    expect(cut[0]! - received[0]!).toBeLessThan(3_000);
  } finally {
    silent.closeAllConnections();
    await new Promise((resolve) => silent.close(resolve));
  }
});

test('max_concurrent_requests: a request past the limit is refused with 503 while the others run', async () => {
  u.setBehaviour({ kind: 'delay', ms: 300 });
  const first = get('/busy/x');
  await u.waitForRequests(1);
  const second = await get('/busy/x');
  expect(second.status).toBe(503);
  expect((await first).status).toBe(200);
  expect((await get('/busy/x')).status).toBe(200);
});

test('enabled: false does nothing', async () => {
  u.setBehaviour({ kind: 'fixed', status: 500 });
  for (let i = 0; i < 3; i++) expect((await get('/cb-off/x')).status).toBe(500);
  expect(seen('/cb-off/')).toBe(3);
});

test.each([
  ['error_percent_threshold 0', { error_percent_threshold: 0 }, 'plugins[0].config.error_percent_threshold must be at least 1'],
  ['a sleep_window that is not a number', { sleep_window: '5s' }, 'plugins[0].config.sleep_window must be an integer'],
  [
    'a bad predicate',
    { predicate: 'statusCode >> 2' },
    'plugins[0].config.predicate is not a valid predicate: expected statusCode, grpcStatus, request.Method, a number or a string, found ">" at position 13',
  ],
])('%s is refused with 400 naming the field, on create and on update (store unchanged)', async (_row, config, message) => {
  const definition = apiDefinition({ name: 'cb-bad', listenPath: '/cb-bad/*', targets: [u.url] });
  await expectRefusedPluginConfig(gw, { definition, existing: 'trip', plugins: [{ name: 'cb', config }] }, message);
});
