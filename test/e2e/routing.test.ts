/**
 * Matching through a real control plane + data plane (docs/proxy.md "Proxy behaviour"):
 * which API gets a request, priorities, header conditions, round-robin, and the API life cycle
 * (inactive, reactivated, listen_path changed, deleted).
 */
import { apiDefinition } from '../helpers/api-definition.js';
import type { AdminResponse } from '../helpers/admin-client.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const NO_ROUTE_BODY = '"no API found with those values"';

let gw: Gateway;
let upstream: Upstream;
const rr: Upstream[] = [];

/** Each API targets `<upstream>/hit/<api name>`, so the upstream's request line says which API routed. */
function hitTarget(api: string): string {
  return `${upstream.url}/hit/${api}`;
}

/** Name of the API that routed the request, or `status <n>` when none did. */
async function routedTo(method: string, path: string, host?: string): Promise<string> {
  const res = await gw.dp.request(method, path, { headers: host === undefined ? {} : { host } });
  if (res.status !== 200) return `status ${res.status}`;
  const url = String((res.json as { url?: unknown }).url ?? '');
  const match = /^\/hit\/([^/?]+)/.exec(url);
  return match ? match[1] : `unexpected upstream url ${url}`;
}

async function createAll(definitions: Record<string, unknown>[]): Promise<AdminResponse> {
  let last: AdminResponse | undefined;
  for (const definition of definitions) {
    last = await gw.admin.createApi(definition);
    if (last.status !== 201) throw new Error(`creating ${String(definition.name)} failed: ${last.status} ${last.text}`);
  }
  return last!;
}

beforeAll(async () => {
  upstream = await startUpstream('routing');
  for (const name of ['t1', 't2', 't3']) rr.push(await startUpstream(name));
  gw = await startGateway();
  const last = await createAll([
    apiDefinition({ name: 'host-only', hosts: ['hostonly.test'], targets: [hitTarget('host-only')] }),
    apiDefinition({ name: 'method-only', methods: ['PURGE'], targets: [hitTarget('method-only')] }),
    apiDefinition({ name: 'all-three', hosts: ['multi.test'], methods: ['GET'], listenPath: '/multi/*', targets: [hitTarget('all-three')] }),
    apiDefinition({ name: 'two-hosts', hosts: ['one.test', 'two.test'], listenPath: '/twohosts/*', targets: [hitTarget('two-hosts')] }),
    apiDefinition({ name: 'two-methods', methods: ['GET', 'POST'], listenPath: '/twomethods/*', targets: [hitTarget('two-methods')] }),
    apiDefinition({ name: 'foo', listenPath: '/foo/*', targets: [hitTarget('foo')] }),
    apiDefinition({ name: 'exact', listenPath: '/exact', targets: [hitTarget('exact')] }),
    apiDefinition({ name: 'wild-sub', hosts: ['*.wild.test'], listenPath: '/w/*', targets: [hitTarget('wild-sub')] }),
    apiDefinition({ name: 'wild-tld', hosts: ['wildtld.*'], listenPath: '/w/*', targets: [hitTarget('wild-tld')] }),
    // Created short prefix first on purpose: creation order must not decide priority.
    apiDefinition({ name: 'prio-short', listenPath: '/prio/*', targets: [hitTarget('prio-short')] }),
    apiDefinition({ name: 'prio-long', listenPath: '/prio/long/*', targets: [hitTarget('prio-long')] }),
    apiDefinition({ name: 'prio-longest', listenPath: '/prio/long/longer/*', targets: [hitTarget('prio-longest')] }),
    // Name order is the reverse of condition count, so the name tie-break cannot stand in for it.
    apiDefinition({ name: 'cond-a-none', listenPath: '/cond/*', targets: [hitTarget('cond-a-none')] }),
    apiDefinition({ name: 'cond-m-method', listenPath: '/cond/*', methods: ['GET'], targets: [hitTarget('cond-m-method')] }),
    apiDefinition({ name: 'cond-z-host-method', listenPath: '/cond/*', hosts: ['cond.test'], methods: ['GET'], targets: [hitTarget('cond-z-host-method')] }),
    apiDefinition({ name: 'param', listenPath: '/users/{user}/profile', targets: [`${upstream.url}/hit/param/{user}`] }),
    apiDefinition({ name: 'regex', listenPath: '/orders/{id:[0-9]+}/*', targets: [`${upstream.url}/hit/regex/{id}`] }),
    apiDefinition({ name: 'rr', listenPath: '/rr/*', targets: rr.map((u) => u.url) }),
    apiDefinition({ name: 'rr-other', listenPath: '/rr-other/*', targets: [rr[0].url, rr[1].url] }),
    {
      name: 'weighted',
      proxy: {
        listen_path: '/weighted/*',
        upstreams: {
          balancing: 'weight',
          targets: [
            { target: rr[0].url, weight: 3 },
            { target: rr[1].url, weight: 1 },
          ],
        },
      },
    },
    // The DP's own /healthz, /readyz, /metrics live on the status port: on the proxy port they are user routes.
    apiDefinition({ name: 'user-healthz', listenPath: '/healthz', targets: [hitTarget('user-healthz')] }),
    apiDefinition({ name: 'user-status', listenPath: '/metrics/*', targets: [hitTarget('user-status')] }),
  ]);
  await gw.admin.waitForDataPlanes(last, gw.dps);
});

afterAll(async () => {
  const problems = await gw?.stop();
  await Promise.all([upstream, ...rr].filter(Boolean).map((u) => u.close()));
  expect(problems ?? '').toBe('');
});

describe('seed routing rules 1–8', () => {
  test.each([
    // rule 1: one condition is enough
    { rule: 'rule 1: hosts only, any path', method: 'GET', path: '/anything/at/all', host: 'hostonly.test', expected: 'host-only' },
    { rule: 'rule 1: methods only, any path', method: 'PURGE', path: '/whatever', host: undefined, expected: 'method-only' },
    // rule 2: every configured condition must hold
    { rule: 'rule 2: host, method and path all match', method: 'GET', path: '/multi/x', host: 'multi.test', expected: 'all-three' },
    { rule: 'rule 2: wrong host', method: 'GET', path: '/multi/x', host: 'other.test', expected: 'status 404' },
    { rule: 'rule 2: wrong method', method: 'POST', path: '/multi/x', host: 'multi.test', expected: 'status 404' },
    { rule: 'rule 2: wrong path', method: 'GET', path: '/multix', host: 'multi.test', expected: 'status 404' },
    { rule: 'rule 2: no Host condition met (default host)', method: 'GET', path: '/multi/x', host: undefined, expected: 'status 404' },
    // rule 3: any one value of a condition
    { rule: 'rule 3: first of two hosts', method: 'GET', path: '/twohosts/a', host: 'one.test', expected: 'two-hosts' },
    { rule: 'rule 3: second of two hosts', method: 'GET', path: '/twohosts/a', host: 'two.test', expected: 'two-hosts' },
    { rule: 'rule 3: first of two methods', method: 'GET', path: '/twomethods/a', host: undefined, expected: 'two-methods' },
    { rule: 'rule 3: second of two methods', method: 'POST', path: '/twomethods/a', host: undefined, expected: 'two-methods' },
    { rule: 'rule 5: method not listed', method: 'DELETE', path: '/twomethods/a', host: undefined, expected: 'status 404' },
    { rule: 'rule 5: methods-only API, other method', method: 'GET', path: '/whatever', host: undefined, expected: 'status 404' },
    { rule: 'rule 5: hosts-only API, other host', method: 'GET', path: '/anything/at/all', host: 'nothostonly.test', expected: 'status 404' },
    // rule 4: listen_path prefix
    { rule: 'rule 4: /foo/* matches /foo', method: 'GET', path: '/foo', host: undefined, expected: 'foo' },
    { rule: 'rule 4: /foo/* matches /foo/', method: 'GET', path: '/foo/', host: undefined, expected: 'foo' },
    { rule: 'rule 4: /foo/* matches /foo/a/b/c', method: 'GET', path: '/foo/a/b/c', host: undefined, expected: 'foo' },
    { rule: 'rule 4: /foo/* never matches /foobar', method: 'GET', path: '/foobar', host: undefined, expected: 'status 404' },
    { rule: 'rule 4: /foo/* never matches /', method: 'GET', path: '/', host: undefined, expected: 'status 404' },
    { rule: 'rule 4: exact listen path matches itself', method: 'GET', path: '/exact', host: undefined, expected: 'exact' },
    { rule: 'rule 4: exact listen path with a query', method: 'GET', path: '/exact?x=1', host: undefined, expected: 'exact' },
    { rule: 'rule 4: exact listen path does not match below it', method: 'GET', path: '/exact/more', host: undefined, expected: 'status 404' },
    // hosts: case-insensitive, port removed, wildcards
    { rule: 'host: case-insensitive, port ignored', method: 'GET', path: '/multi/x', host: 'MULTI.Test:8080', expected: 'all-three' },
    { rule: 'host: *.wild.test matches a.wild.test', method: 'GET', path: '/w/x', host: 'a.wild.test', expected: 'wild-sub' },
    { rule: 'host: *.wild.test matches x.y.wild.test', method: 'GET', path: '/w/x', host: 'x.y.wild.test', expected: 'wild-sub' },
    { rule: 'host: *.wild.test does not match wild.test', method: 'GET', path: '/w/x', host: 'wild.test', expected: 'status 404' },
    { rule: 'host: wildtld.* matches wildtld.com', method: 'GET', path: '/w/x', host: 'wildtld.com', expected: 'wild-tld' },
    { rule: 'host: wildtld.* does not match notwildtld.com', method: 'GET', path: '/w/x', host: 'notwildtld.com', expected: 'status 404' },
    // rule 6: longest prefix first, whatever the creation order
    { rule: 'rule 6: longest prefix wins (created last)', method: 'GET', path: '/prio/long/longer/x', host: undefined, expected: 'prio-longest' },
    { rule: 'rule 6: middle prefix', method: 'GET', path: '/prio/long/x', host: undefined, expected: 'prio-long' },
    { rule: 'rule 6: middle prefix, bare', method: 'GET', path: '/prio/long', host: undefined, expected: 'prio-long' },
    { rule: 'rule 6: short prefix still serves the rest', method: 'GET', path: '/prio/other', host: undefined, expected: 'prio-short' },
    { rule: 'rule 6: /prio/longer is not under /prio/long/*', method: 'GET', path: '/prio/longer', host: undefined, expected: 'prio-short' },
    // equal prefixes: more conditions first
    { rule: 'priority: host+method beats method', method: 'GET', path: '/cond/x', host: 'cond.test', expected: 'cond-z-host-method' },
    { rule: 'priority: method beats no condition', method: 'GET', path: '/cond/x', host: undefined, expected: 'cond-m-method' },
    { rule: 'priority: no-condition API catches other methods', method: 'POST', path: '/cond/x', host: 'cond.test', expected: 'cond-a-none' },
    // rule 8: named parameters
    { rule: 'rule 8: {user} matches one segment', method: 'GET', path: '/users/bob/profile', host: undefined, expected: 'param' },
    { rule: 'rule 8: {user} never spans two segments', method: 'GET', path: '/users/bob/x/profile', host: undefined, expected: 'status 404' },
    { rule: 'rule 8: {id:[0-9]+} matches digits', method: 'GET', path: '/orders/42/items', host: undefined, expected: 'regex' },
    { rule: 'rule 8: {id:[0-9]+} is anchored (rejects 42a)', method: 'GET', path: '/orders/42a/items', host: undefined, expected: 'status 404' },
    { rule: 'rule 8: {id:[0-9]+} rejects letters', method: 'GET', path: '/orders/abc/items', host: undefined, expected: 'status 404' },
    // the status endpoints never shadow user routes on the proxy port
    { rule: 'proxy port: /healthz is a user route', method: 'GET', path: '/healthz', host: undefined, expected: 'user-healthz' },
    { rule: 'proxy port: /metrics is a user route', method: 'GET', path: '/metrics', host: undefined, expected: 'user-status' },
    { rule: 'proxy port: /readyz is not served by the gateway', method: 'GET', path: '/readyz', host: undefined, expected: 'status 404' },
  ])('$rule: $method $path (host $host) → $expected', async ({ method, path, host, expected }) => {
    expect(await routedTo(method, path, host)).toBe(expected);
  });

  test('rule 8: captured values replace the placeholders in the target', async () => {
    upstream.reset();
    expect((await gw.dp.request('GET', '/users/alice/profile')).status).toBe(200);
    expect(upstream.last()?.url).toBe('/hit/param/alice');
    expect((await gw.dp.request('GET', '/orders/1234/items')).status).toBe(200);
    expect(upstream.last()?.url).toBe('/hit/regex/1234');
  });

  test('no match: 404 with the fixed JSON body', async () => {
    const before = upstream.requests.length;
    const res = await gw.dp.request('GET', '/foobar');
    expect(res.status).toBe(404);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.text).toBe(NO_ROUTE_BODY);
    expect(upstream.requests.length).toBe(before);
  });
});

describe('round-robin', () => {
  test('successive requests go to successive targets, in order, wrapping around', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await gw.dp.request('GET', `/rr/${i}`);
      expect(res.status).toBe(200);
      seen.push(String(res.headers['x-upstream']));
    }
    const names = rr.map((u) => u.name);
    const start = names.indexOf(seen[0]);
    expect(start).toBeGreaterThanOrEqual(0);
    expect(seen).toEqual(seen.map((_, i) => names[(start + i) % names.length]));
    for (const u of rr) expect(u.requests.length).toBeGreaterThanOrEqual(2);
  });

  test('the rotation is per API: requests to another API in between do not move it', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await gw.dp.request('GET', `/rr/${i}`);
      expect(res.status).toBe(200);
      seen.push(String(res.headers['x-upstream']));
      expect((await gw.dp.request('GET', `/rr-other/${i}`)).status).toBe(200);
    }
    const names = rr.map((u) => u.name);
    const start = names.indexOf(seen[0]);
    expect(start).toBeGreaterThanOrEqual(0);
    expect(seen).toEqual(seen.map((_, i) => names[(start + i) % names.length]));
  });
});

describe('weighted balancing', () => {
  test('weights 3:1 give 6 and 2 requests out of 8', async () => {
    for (const u of rr) u.reset();
    for (let i = 0; i < 8; i++) expect((await gw.dp.request('GET', `/weighted/${i}`)).status).toBe(200);
    expect([rr[0].requests.length, rr[1].requests.length]).toEqual([6, 2]);
  });
});

// Each test runs the life cycle of an API of its own, created routed: tests run in any order.
describe('API life cycle through the proxy', () => {
  const life = (name: string, listenPath: string): Record<string, unknown> => apiDefinition({ name, listenPath, targets: [`${upstream.url}/hit/${name}`] });

  async function createRouted(name: string, listenPath: string): Promise<void> {
    const created = await gw.admin.createApi(life(name, listenPath));
    expect(created.status).toBe(201);
    await gw.admin.waitForDataPlanes(created, gw.dps);
    expect(await routedTo('GET', listenPath.replace('*', 'a'))).toBe(name);
  }

  test('created → routed; inactive → 404 but listed; active again → routed', async () => {
    await createRouted('life', '/life/*');

    const off = await gw.admin.updateApi('life', { active: false });
    expect(off.status).toBe(200);
    expect(off.body.active).toBe(false);
    await gw.admin.waitForDataPlanes(off, gw.dps);
    const res = await gw.dp.request('GET', '/life/a');
    expect(res.status).toBe(404);
    expect(res.text).toBe(NO_ROUTE_BODY);
    const listed = await gw.admin.listApis();
    expect(listed.status).toBe(200);
    expect(listed.body.find((api: { name: string }) => api.name === 'life')).toMatchObject({ name: 'life', active: false });

    const on = await gw.admin.updateApi('life', { active: true });
    expect(on.status).toBe(200);
    await gw.admin.waitForDataPlanes(on, gw.dps);
    expect(await routedTo('GET', '/life/a')).toBe('life');
  });

  test('listen_path changed: the old path is 404, the new one routed', async () => {
    await createRouted('life-moved', '/life-moved/*');
    const moved = await gw.admin.updateApi('life-moved', { proxy: { listen_path: '/moved/*' } });
    expect(moved.status).toBe(200);
    expect(moved.body.proxy.listen_path).toBe('/moved/*');
    await gw.admin.waitForDataPlanes(moved, gw.dps);
    expect(await routedTo('GET', '/life-moved/a')).toBe('status 404');
    expect(await routedTo('GET', '/moved/a')).toBe('life-moved');
  });

  test('deleted → 404 and gone from the listing', async () => {
    await createRouted('life-deleted', '/life-deleted/*');
    const deleted = await gw.admin.deleteApi('life-deleted');
    expect(deleted.status).toBe(204);
    await gw.admin.waitForDataPlanes(deleted, gw.dps);
    const res = await gw.dp.request('GET', '/life-deleted/a');
    expect(res.status).toBe(404);
    expect(res.text).toBe(NO_ROUTE_BODY);
    const listed = await gw.admin.listApis();
    expect(listed.body.map((api: { name: string }) => api.name)).not.toContain('life-deleted');
  });
});

// A test of its own per scenario, each with its own APIs and upstreams: tests run in any order.
describe('header conditions (proxy.match_headers)', () => {
  /** `<prefix>-stable` and `<prefix>-canary` on `/<prefix>/*`, each to an upstream of its own, the canary on `X-Canary: true`. */
  async function canaryPair(prefix: string): Promise<{ stable: Upstream; canary: Upstream; close(): Promise<void> }> {
    const stable = await startUpstream(`${prefix}-stable`);
    const canary = await startUpstream(`${prefix}-canary`);
    const last = await createAll([
      apiDefinition({ name: `${prefix}-stable`, listenPath: `/${prefix}/*`, targets: [stable.url] }),
      apiDefinition({ name: `${prefix}-canary`, listenPath: `/${prefix}/*`, matchHeaders: { 'X-Canary': ['true'] }, targets: [canary.url] }),
    ]);
    await gw.admin.waitForDataPlanes(last, gw.dps);
    return {
      stable,
      canary,
      async close() {
        for (const name of [`${prefix}-stable`, `${prefix}-canary`]) await gw.admin.deleteApi(name);
        await Promise.all([stable.close(), canary.close()]);
      },
    };
  }

  /** The upstream that answered (its name), or `status <n>`. */
  async function servedBy(path: string, headers: Record<string, string | string[]>): Promise<string> {
    const res = await gw.dp.request('GET', path, { headers });
    return res.status === 200 ? String(res.headers['x-upstream']) : `status ${res.status}`;
  }

  test('X-Canary: true goes to the canary upstream, everything else to the stable one', async () => {
    const pair = await canaryPair('hm-split');
    try {
      expect(await servedBy('/hm-split/a', { 'X-Canary': 'true' })).toBe('hm-split-canary');
      expect(await servedBy('/hm-split/a', { 'x-canary': 'true' })).toBe('hm-split-canary');
      expect(await servedBy('/hm-split/a', {})).toBe('hm-split-stable');
      expect(await servedBy('/hm-split/a', { 'X-Canary': 'false' })).toBe('hm-split-stable');
      expect(await servedBy('/hm-split/a', { 'X-Canary': 'TRUE' })).toBe('hm-split-stable');
      // Sent twice, one of them listed: node joins them ("false, true"), and an element matches.
      expect(await servedBy('/hm-split/a', { 'X-Canary': ['false', 'true'] })).toBe('hm-split-canary');
      expect(pair.canary.requests.length).toBe(3);
      expect(pair.stable.requests.length).toBe(3);
      // The header is the client's: it goes upstream as sent.
      expect(pair.canary.last()?.headers['x-canary']).toBe('false, true');
    } finally {
      await pair.close();
    }
  });

  test('the condition changed through the admin API takes effect on the data planes; equal conditions are a 409', async () => {
    const pair = await canaryPair('hm-change');
    try {
      expect(await servedBy('/hm-change/a', { 'X-Canary': 'true' })).toBe('hm-change-canary');
      // A merge patch names the header as stored (lower case) to replace its values.
      const changed = await gw.admin.updateApi('hm-change-canary', { proxy: { match_headers: { 'x-canary': ['yes', 'always'] } } });
      expect(changed.status).toBe(200);
      expect(changed.body.proxy.match_headers).toEqual({ 'x-canary': ['always', 'yes'] });
      await gw.admin.waitForDataPlanes(changed, gw.dps);
      expect(await servedBy('/hm-change/a', { 'X-Canary': 'yes' })).toBe('hm-change-canary');
      expect(await servedBy('/hm-change/a', { 'X-Canary': 'true' })).toBe('hm-change-stable');

      const twin = await gw.admin.createApi(
        apiDefinition({ name: 'hm-change-twin', listenPath: '/hm-change/*', matchHeaders: { 'X-CANARY': ['yes', 'always'] }, targets: [pair.canary.url] }),
      );
      expect(twin.status).toBe(409);
      expect(twin.body).toEqual({ error: 'api listen path is already registered' });
      // Without its condition the canary would be the stable route's twin.
      const dropped = await gw.admin.updateApi('hm-change-canary', { proxy: { match_headers: { 'x-canary': null } } });
      expect(dropped.status).toBe(409);
      const another = await gw.admin.updateApi('hm-change-canary', { proxy: { match_headers: { 'x-canary': null, 'x-beta': ['1'] } } });
      expect(another.status).toBe(200);
      await gw.admin.waitForDataPlanes(another, gw.dps);
      expect(await servedBy('/hm-change/a', { 'X-Canary': 'yes' })).toBe('hm-change-stable');
      expect(await servedBy('/hm-change/a', { 'X-Beta': '1' })).toBe('hm-change-canary');
    } finally {
      await pair.close();
    }
  });

  test('explain says why a request missed the canary', async () => {
    const pair = await canaryPair('hm-explain');
    try {
      const res = await gw.admin.request('POST', '/explain', { body: { method: 'GET', path: '/hm-explain/a', headers: { 'X-Canary': 'false' } } });
      expect(res.status).toBe(200);
      expect(res.body.route).toMatchObject({ name: 'hm-explain-stable' });
      // The shared root routes (hosts-only, methods-only APIs) are candidates too: only this pair's are looked at.
      const ours = (candidates: Array<{ name: string }>) => candidates.filter((c) => c.name.startsWith('hm-explain-'));
      expect(ours(res.body.candidates)).toEqual([
        expect.objectContaining({
          name: 'hm-explain-canary',
          match_headers: { 'x-canary': ['true'] },
          reasons: ['header_mismatch'],
          details: ['header x-canary is "false"; the route requires "true"'],
        }),
      ]);
      const hit = await gw.admin.request('POST', '/explain', { body: { method: 'GET', path: '/hm-explain/a', headers: { 'X-Canary': 'true' } } });
      expect(hit.body.route).toMatchObject({ name: 'hm-explain-canary', match_headers: { 'x-canary': ['true'] } });
      expect(ours(hit.body.candidates)).toEqual([
        expect.objectContaining({ name: 'hm-explain-stable', reasons: ['lower_priority'], outranked_by: expect.objectContaining({ rule: 'more_conditions' }) }),
      ]);
      // What explain says is what the data plane does.
      expect(await servedBy('/hm-explain/a', { 'X-Canary': 'false' })).toBe('hm-explain-stable');
    } finally {
      await pair.close();
    }
  });
});
