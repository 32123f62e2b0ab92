/**
 * Upstream health checks through a real control plane and data plane, traffic counted at real
 * upstreams: active probes take a target whose health path fails out of the rotation and bring it
 * back once it passes; passive checks take a target out after proxied failures and back after the
 * ejection; with every target unhealthy the balancer fails open; one probe per target and check
 * however many APIs share them; the state survives unrelated writes and a changed check starts
 * afresh; the DP's gauge and log lines; bad checks are refused naming the field, the store unchanged.
 */
import type { AdminResponse } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { httpRequest } from '../helpers/http-request.js';
import { delay, pollUntil } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let a: Upstream;
let b: Upstream;
let c: Upstream;
/** What each upstream's /health answers (everything else is a 200). */
const healthStatus = new Map<Upstream, number>();

const ACTIVE = { path: '/health', interval: '150ms', timeout: '500ms', healthy_threshold: 2, unhealthy_threshold: 2 };
const checked = (name: string, targets: Upstream[], health_check: unknown) => {
  const api = apiDefinition({ name, listenPath: `/${name}/*`, targets: targets.map((u) => u.url) }) as { proxy: { upstreams: Record<string, unknown> } };
  api.proxy.upstreams.health_check = health_check;
  return api;
};
const get = (path: string) => gw.dp.request('GET', path);
const served = (u: Upstream, prefix: string) => u.requests.filter((r) => r.url.startsWith(prefix)).length;
const probes = (u: Upstream) => u.requests.filter((r) => r.url === '/health');
const healthOf = async (route: string, target: Upstream): Promise<string | undefined> => {
  const text = (await httpRequest(`${gw.dp.statusUrl}/metrics`)).text;
  return text
    .split('\n')
    .find((l) => l.startsWith(`gatehouse_upstream_target_healthy{route="api:${route}",target="${target.url}"}`))
    ?.split(' ')[1];
};
const waitForHealth = (route: string, target: Upstream, value: '0' | '1') =>
  pollUntil(async () => ((await healthOf(route, target)) === value ? true : undefined), {
    what: `${target.name} of ${route} at health ${value}`,
    details: () => gw.dp.recentLogs(20),
  });

/** Log lines reach this process through the DP's stdout pipe, possibly after a later HTTP answer. */
const waitForLog = (pattern: RegExp) =>
  pollUntil(async () => (pattern.test(gw.dp.recentLogs(300)) ? true : undefined), {
    what: `a DP log line matching ${pattern}`,
    details: () => gw.dp.recentLogs(20),
  });

beforeAll(async () => {
  [a, b, c] = await Promise.all([startUpstream('hc-a'), startUpstream('hc-b'), startUpstream('hc-c')]);
  for (const u of [a, b, c]) {
    u.setBehaviour((req) => (req.url === '/health' ? { kind: 'fixed', status: healthStatus.get(u) ?? 200 } : { kind: 'fixed' }));
  }
  gw = await startGateway();
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, a, b, c)).toBe('');
});

beforeEach(async () => {
  healthStatus.clear();
  let deleted: AdminResponse | undefined;
  for (const api of (await gw.admin.listApis()).body) deleted = await gw.admin.deleteApi(api.name);
  if (deleted) await gw.admin.waitForDataPlanes(deleted, gw.dps);
  for (const u of [a, b, c]) u.reset();
});

test('active: a target whose health path fails leaves the rotation, and comes back once it passes again', async () => {
  await createApis(gw, [checked('act', [a, b], { active: ACTIVE })]);
  await pollUntil(async () => (probes(a).length >= 1 && probes(b).length >= 1 ? true : undefined), { what: 'a probe of each target' });
  const probe = probes(a)[0]!;
  expect(probe.method).toBe('GET');
  expect(probe.headers.host).toBe(a.hostHeader);
  expect(probe.headers['user-agent']).toBe('gatehouse-health-check');

  healthStatus.set(a, 503);
  await waitForHealth('act', a, '0');
  expect(await healthOf('act', b)).toBe('1');
  for (let i = 0; i < 6; i++) expect((await get('/act/x')).status).toBe(200);
  expect(served(a, '/act/')).toBe(0);
  expect(served(b, '/act/')).toBe(6);
  await waitForLog(/"reason":"2 probes of \/health failed in a row \(the last: status 503\)","msg":"upstream target unhealthy"/);

  healthStatus.set(a, 200);
  await waitForHealth('act', a, '1');
  for (let i = 0; i < 6; i++) expect((await get('/act/x')).status).toBe(200);
  expect(served(a, '/act/')).toBe(3);
  expect(served(b, '/act/')).toBe(9);
  await waitForLog(/"reason":"2 probes of \/health succeeded in a row","msg":"upstream target healthy again"/);
});

test('passive: proxied failures take a target out for the ejection, then it gets traffic again', async () => {
  a.setBehaviour({ kind: 'fixed', status: 503 });
  try {
    await createApis(gw, [checked('pas', [a, b], { passive: { unhealthy_threshold: 2, ejection: '1s' } })]);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await get('/pas/x')).status);
    // Round robin: a, b, a (its second failure in a row takes it out), then b alone.
    expect(statuses).toEqual([503, 200, 503, 200, 200, 200, 200, 200]);
    expect(served(a, '/pas/')).toBe(2);
    expect(await healthOf('pas', a)).toBe('0');

    await waitForHealth('pas', a, '1');
    const after: number[] = [];
    for (let i = 0; i < 2; i++) after.push((await get('/pas/x')).status);
    expect(after.sort()).toEqual([200, 503]);
    expect(served(a, '/pas/')).toBe(3);
    await waitForLog(/"reason":"its ejection of 1000 ms ended","msg":"upstream target healthy again"/);
  } finally {
    a.setBehaviour((req) => (req.url === '/health' ? { kind: 'fixed', status: healthStatus.get(a) ?? 200 } : { kind: 'fixed' }));
  }
});

test("active with method, statuses and headers: HEAD with the check's Host; only the listed statuses are healthy", async () => {
  healthStatus.set(a, 418);
  await createApis(gw, [
    checked('opts', [a, b], { active: { ...ACTIVE, method: 'HEAD', statuses: [418], headers: { Host: 'health.internal', 'X-Probe': 'gatehouse' } } }),
  ]);
  // b answers 200, which this check does not count as healthy; a answers 418, which it does.
  await waitForHealth('opts', b, '0');
  expect(await healthOf('opts', a)).toBe('1');
  const probe = probes(a)[0]!;
  expect(probe.method).toBe('HEAD');
  expect(probe.headers).toMatchObject({ host: 'health.internal', 'x-probe': 'gatehouse', 'user-agent': 'gatehouse-health-check' });
  expect((await get('/opts/x')).status).toBe(200);
  expect(served(a, '/opts/')).toBe(1);
});

test('passive statuses: a 500 counts when listed, and a 503 then no longer does', async () => {
  a.setBehaviour((req) => ({ kind: 'fixed', status: req.url.includes('/five-hundred') ? 500 : 503 }));
  try {
    await createApis(gw, [checked('pas-statuses', [a], { passive: { unhealthy_threshold: 2, ejection: '1h', statuses: [500] } })]);
    for (let i = 0; i < 3; i++) expect((await get('/pas-statuses/x')).status).toBe(503);
    expect(await healthOf('pas-statuses', a)).toBe('1');
    for (let i = 0; i < 2; i++) expect((await get('/pas-statuses/five-hundred')).status).toBe(500);
    expect(await healthOf('pas-statuses', a)).toBe('0');
    await waitForLog(/"reason":"2 proxied requests failed in a row \(the last: 500\)","msg":"upstream target unhealthy"/);
  } finally {
    a.setBehaviour((req) => (req.url === '/health' ? { kind: 'fixed', status: healthStatus.get(a) ?? 200 } : { kind: 'fixed' }));
  }
});

test('passive: a target that refuses connections is taken out after its failures', async () => {
  const gone = await startUpstream('hc-gone');
  await gone.close();
  const api = checked('refused', [b], { passive: { unhealthy_threshold: 1, ejection: '1h' } }) as { proxy: { upstreams: { targets: unknown[] } } };
  api.proxy.upstreams.targets.unshift({ target: gone.url });
  await createApis(gw, [api]);
  const statuses: number[] = [];
  for (let i = 0; i < 5; i++) statuses.push((await get('/refused/x')).status);
  expect(statuses).toEqual([502, 200, 200, 200, 200]);
  expect(served(b, '/refused/')).toBe(4);
  await waitForLog(/"reason":"1 proxied request failed in a row \(the last: no response\)","msg":"upstream target unhealthy"/);
});

test('with every target unhealthy the balancer uses them all (fails open) rather than refusing', async () => {
  healthStatus.set(a, 500);
  healthStatus.set(b, 500);
  await createApis(gw, [checked('open', [a, b], { active: ACTIVE })]);
  await waitForHealth('open', a, '0');
  await waitForHealth('open', b, '0');
  for (let i = 0; i < 4; i++) expect((await get('/open/x')).status).toBe(200);
  expect(served(a, '/open/')).toBe(2);
  expect(served(b, '/open/')).toBe(2);
});

test('APIs sharing a target and a check share its probes', async () => {
  await createApis(
    gw,
    Array.from({ length: 6 }, (_, i) => checked(`share${i}`, [c], { active: { ...ACTIVE, interval: '300ms' } })),
  );
  c.reset();
  await delay(1500);
  // One checker: ~5 probes in 1.5 s at 300 ms (fewer on a slow machine), where six would send ~30.
  expect(probes(c).length).toBeGreaterThanOrEqual(1);
  expect(probes(c).length).toBeLessThanOrEqual(7);
  for (let i = 0; i < 6; i++) expect(await healthOf(`share${i}`, c)).toBe('1');
});

test('health survives unrelated writes; a changed check starts healthy', async () => {
  healthStatus.set(a, 503);
  await createApis(gw, [checked('keep', [a, b], { active: ACTIVE })]);
  await waitForHealth('keep', a, '0');

  await createApis(gw, [apiDefinition({ name: 'other', listenPath: '/other/*', targets: [c.url] })]);
  expect(await healthOf('keep', a)).toBe('0');
  for (let i = 0; i < 4; i++) expect((await get('/keep/x')).status).toBe(200);
  expect(served(a, '/keep/')).toBe(0);

  // A new check (another interval) is a new health, healthy until its own probes say otherwise.
  const changed = await gw.admin.updateApi('keep', { proxy: { upstreams: { health_check: { active: { ...ACTIVE, interval: '1h' } } } } });
  expect(changed.status).toBe(200);
  await gw.admin.waitForDataPlanes(changed, gw.dps);
  expect(await healthOf('keep', a)).toBe('1');
  for (let i = 0; i < 4; i++) expect((await get('/keep/x')).status).toBe(200);
  expect(served(a, '/keep/')).toBe(2);
});

test('a removed health check stops its probes and its gauge', async () => {
  await createApis(gw, [checked('gone', [c], { active: ACTIVE })]);
  await pollUntil(async () => (probes(c).length > 0 ? true : undefined), { what: 'a probe of c' });
  const deleted = await gw.admin.deleteApi('gone');
  expect(deleted.status).toBe(204);
  await gw.admin.waitForDataPlanes(deleted, gw.dps);
  await delay(300); // a probe already on its way may still land
  c.reset();
  await delay(600);
  expect(probes(c)).toHaveLength(0);
  expect(await healthOf('gone', c)).toBeUndefined();
});

test.each([
  [{}, 'proxy.upstreams.health_check must have "active", "passive" or both'],
  [{ active: {} }, 'proxy.upstreams.health_check.active.path is required (or grpc, for a gRPC health check)'],
  [{ active: { path: 'health' } }, 'proxy.upstreams.health_check.active.path must start with "/" and hold only printable ASCII without spaces or "#"'],
  [{ active: { path: '/h', interval: '10ms' } }, 'proxy.upstreams.health_check.active.interval must be a duration from "100ms" to "1h"'],
  [{ passive: { unhealthy_threshold: 0 } }, 'proxy.upstreams.health_check.passive.unhealthy_threshold must be an integer from 1 to 100'],
])('refuses health_check %j naming the field, the store unchanged', async (health_check, message) => {
  await createApis(gw, [apiDefinition({ name: 'existing', listenPath: '/existing/*', targets: [a.url] })]);
  const created = await gw.admin.createApi(checked('bad', [a], health_check));
  expect(created.status).toBe(400);
  expect(created.body).toEqual({ error: message });
  expect((await gw.admin.getApi('bad')).status).toBe(404);
  const before = await gw.admin.getApi('existing');
  const updated = await gw.admin.updateApi('existing', { proxy: { upstreams: { health_check } } });
  expect(updated.status).toBe(400);
  expect(updated.body).toEqual({ error: message });
  expect((await gw.admin.getApi('existing')).body).toEqual(before.body);
});

test('refuses a health check of a target whose host comes from the request', async () => {
  const api = apiDefinition({ name: 'tpl', listenPath: '/tpl/{svc}/*', targets: ['http://{svc}:9000'] }) as { proxy: { upstreams: Record<string, unknown> } };
  api.proxy.upstreams.health_check = { passive: {} };
  const created = await gw.admin.createApi(api);
  expect(created.status).toBe(400);
  expect(created.body).toEqual({ error: 'proxy.upstreams.health_check cannot check http://{svc}:9000: its host comes from the request' });
});

test('the stored definition shows the check with its defaults', async () => {
  await createApis(gw, [checked('shown', [a], { active: { path: '/health' }, passive: {} })]);
  expect((await gw.admin.getApi('shown')).body.proxy.upstreams.health_check).toEqual({
    active: { path: '/health', interval: '10s', timeout: '2s', healthy_threshold: 2, unhealthy_threshold: 3 },
    passive: { unhealthy_threshold: 5, ejection: '30s' },
  });
});
