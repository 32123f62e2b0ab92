/**
 * balancing "least_conn" and "hash" through a real control plane and two real data planes, in front of real
 * upstream servers (docs/proxy.md "Proxy behaviour", Balancing). least_conn: new requests go to the target that holds
 * fewer in flight (a slow request, an open WebSocket), and what ended (answered, aborted by the client, a
 * closed WebSocket) no longer counts. hash: one header value, cookie or client address stays on one target
 * on both data planes, different ones spread, a request without a key is balanced round robin. The admin API
 * refuses hash without hash_on and hash_on without hash, naming the field.
 */
import { createServer, type Server } from 'node:http';
import { request as rawRequest } from 'node:http';
import { WebSocket as UndiciWebSocket } from 'undici';
import { WebSocketServer } from 'ws';
import { listen } from '#proto/listen';
import { createApis } from '../helpers/create-apis.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let ups: Upstream[];
/** Two targets that also accept WebSockets, answering plain requests with their name in x-upstream. */
let wsTargets: { name: string; url: string; server: Server; open: number }[];

const upstreams = (balancing: object, targets = ups.map((u) => u.url)) => ({ ...balancing, targets: targets.map((target) => ({ target })) });
const route = (name: string, balancing: object, targets?: string[]) => ({
  name,
  proxy: { listen_path: `/${name}/*`, upstreams: upstreams(balancing, targets) },
});

beforeAll(async () => {
  ups = [await startUpstream('a'), await startUpstream('b'), await startUpstream('c')];
  // /slow answers after 3 s (or when the client leaves): a request held in flight.
  for (const u of ups) u.setBehaviour((req) => (req.url.includes('/slow') ? { kind: 'delay', ms: 3_000 } : { kind: 'fixed' }));
  wsTargets = [];
  for (const name of ['ws-a', 'ws-b']) {
    const server = createServer((_req, res) => res.writeHead(200, { 'x-upstream': name }).end(name));
    const wss = new WebSocketServer({ noServer: true });
    const target = { name, url: '', server, open: 0 };
    server.on('upgrade', (req, socket, head) =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        target.open++;
        ws.on('close', () => target.open--);
      }),
    );
    target.url = `http://127.0.0.1:${await listen(server, 0, '127.0.0.1')}`;
    wsTargets.push(target);
  }
  gw = await startGateway({ dataPlanes: 2 });
  await createApis(gw, [
    route('lc', { balancing: 'least_conn' }, [ups[0]!.url, ups[1]!.url]),
    route(
      'lc-ws',
      { balancing: 'least_conn' },
      wsTargets.map((t) => t.url),
    ),
    route('by-user', { balancing: 'hash', hash_on: { source: 'header', name: 'X-User' } }),
    route('by-session', { balancing: 'hash', hash_on: { source: 'cookie', name: 'session' } }),
    route('by-ip', { balancing: 'hash', hash_on: { source: 'ip' } }),
    route('by-forwarded-ip', { balancing: 'hash', hash_on: { source: 'ip', trust_forward_headers: true } }),
  ]);
}, 60_000);

afterAll(async () => {
  const problems = gw ? await gw.stop() : '';
  for (const u of ups ?? []) await u.close();
  for (const t of wsTargets ?? []) {
    t.server.closeAllConnections();
    await new Promise<void>((resolve) => t.server.close(() => resolve()));
  }
  expect(problems).toBe('');
});

/** Which upstream answered each of `n` sequential requests. */
async function served(path: string, n: number, headers: Record<string, string> = {}, dp = gw.dp): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await dp.request('GET', path, { headers });
    expect(res.status).toBe(200);
    names.push(res.headers['x-upstream'] as string);
  }
  return names;
}
const tally = (names: string[]) => {
  const counts: Record<string, number> = {};
  for (const n of names) counts[n] = (counts[n] ?? 0) + 1;
  return counts;
};
const received = () => ups.reduce((sum, u) => sum + u.requests.filter((r) => r.url.includes('/slow')).length, 0);

/** A request to `path` left in flight; `abort()` is the client leaving. */
function inFlight(path: string): { done: Promise<string>; abort(): void } {
  const req = rawRequest(`${gw.dp.proxyUrl}${path}`, { agent: false });
  const done = new Promise<string>((resolve) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res.headers['x-upstream'] as string));
    });
    req.on('error', () => resolve('aborted'));
  });
  req.end();
  return { done, abort: () => req.destroy() };
}

describe('least_conn', () => {
  beforeEach(() => {
    for (const u of ups) u.reset();
  });

  test('new requests go to the target that does not hold a slow one; once it is answered they take turns again', async () => {
    const slow = inFlight('/lc/slow');
    await pollUntil(async () => (received() === 1 ? true : undefined), { what: 'the slow request at an upstream' });
    const busy = ups.find((u) => u.requests.length === 1)!.name;
    const other = busy === 'a' ? 'b' : 'a';
    // Round robin would alternate; least_conn sends every one of them to the idle target.
    expect(await served('/lc/fast', 6)).toEqual(Array(6).fill(other));
    expect(await slow.done).toBe(busy);
    expect(tally(await served('/lc/fast', 6))).toEqual({ a: 3, b: 3 });
  });

  test('requests the client aborted no longer count: afterwards the two targets take turns again', async () => {
    // Three (an odd number): counts left raised would differ between the targets and send everything to one.
    for (let i = 0; i < 3; i++) {
      const slow = inFlight('/lc/slow');
      await pollUntil(async () => (received() === i + 1 ? true : undefined), { what: `slow request ${i + 1} at an upstream` });
      slow.abort();
      expect(await slow.done).toBe('aborted');
    }
    expect(
      ups
        .slice(0, 2)
        .map((u) => u.requests.length)
        .sort(),
    ).toEqual([1, 2]);
    await pollUntil(async () => (new Set(await served('/lc/fast', 2)).size === 2 ? true : undefined), {
      what: 'requests to take turns once the aborted ones ended',
    });
  });

  test('an open WebSocket holds its target: requests go to the other until it closes', async () => {
    const socket = new UndiciWebSocket(`${gw.dp.proxyUrl.replace(/^http/, 'ws')}/lc-ws/chat`);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener('open', () => resolve(), { once: true });
      socket.addEventListener('error', () => reject(new Error('WebSocket failed')), { once: true });
    });
    const holder = await pollUntil(async () => wsTargets.find((t) => t.open === 1), { what: 'the WebSocket at a target' });
    const other = wsTargets.find((t) => t !== holder)!.name;
    expect(await served('/lc-ws/x', 4)).toEqual(Array(4).fill(other));
    socket.close();
    await pollUntil(async () => (holder.open === 0 ? true : undefined), { what: 'the WebSocket closed at its target' });
    await pollUntil(async () => (new Set(await served('/lc-ws/x', 2)).size === 2 ? true : undefined), {
      what: 'requests to take turns again once the WebSocket closed',
    });
  });
});

describe('hash', () => {
  const USERS = Array.from({ length: 12 }, (_, i) => `user-${i}`);

  test('one X-User stays on one target, on both data planes; different users spread over the targets', async () => {
    const targetOf = new Map<string, string>();
    for (const user of USERS) {
      const names = [...(await served('/by-user/x', 3, { 'x-user': user })), ...(await served('/by-user/x', 3, { 'x-user': user }, gw.dps[1]))];
      expect(new Set(names).size).toBe(1);
      targetOf.set(user, names[0]!);
    }
    expect(new Set(targetOf.values())).toEqual(new Set(['a', 'b', 'c']));
  });

  test('a request without the header, or with it empty, is balanced round robin', async () => {
    expect(tally(await served('/by-user/x', 6))).toEqual({ a: 2, b: 2, c: 2 });
    expect(tally(await served('/by-user/x', 6, { 'x-user': '' }))).toEqual({ a: 2, b: 2, c: 2 });
  });

  test('a cookie among others keys the target; without that cookie: round robin', async () => {
    const targets = new Set<string>();
    for (const session of USERS) {
      const names = await served('/by-session/x', 3, { cookie: `theme=dark; session=${session}; lang=en` });
      expect(new Set(names).size).toBe(1);
      targets.add(names[0]!);
    }
    expect(targets.size).toBeGreaterThan(1);
    expect(tally(await served('/by-session/x', 6, { cookie: 'theme=dark' }))).toEqual({ a: 2, b: 2, c: 2 });
  });

  test('source ip: one client address, one target (X-Forwarded-For and X-Real-IP ignored without TRUSTED_PROXIES, trust_forward_headers or not)', async () => {
    for (const path of ['/by-ip/x', '/by-forwarded-ip/x']) {
      const forged: string[] = [];
      for (let i = 0; i < USERS.length; i++)
        forged.push(...(await served(path, 1, { 'x-forwarded-for': `198.51.100.7, 203.0.113.${i}`, 'x-real-ip': `203.0.113.${i}` })));
      expect([path, new Set(forged).size]).toEqual([path, 1]);
    }
  });
});

describe('the admin API', () => {
  const base = (upstreamsPatch: object) => ({
    name: 'refused-balancing',
    proxy: { listen_path: '/refused-balancing/*', upstreams: { targets: [{ target: 'http://127.0.0.1:9' }], ...upstreamsPatch } },
  });

  test.each([
    ['hash without hash_on', { balancing: 'hash' }, 'proxy.upstreams.hash_on is required with balancing "hash"'],
    ['hash_on with least_conn', { balancing: 'least_conn', hash_on: { source: 'ip' } }, 'proxy.upstreams.hash_on can be given only with balancing "hash"'],
    ['a header without its name', { balancing: 'hash', hash_on: { source: 'header' } }, 'proxy.upstreams.hash_on.name is required with source "header"'],
    ['an unknown source', { balancing: 'hash', hash_on: { source: 'query' } }, 'proxy.upstreams.hash_on.source must be "ip", "header" or "cookie"'],
    ['an unknown balancing', { balancing: 'random' }, 'proxy.upstreams.balancing must be "roundrobin" (alias "rr"), "weight", "least_conn" or "hash"'],
  ])('refuses %s with a 400 naming the field, storing nothing', async (_name, upstreamsPatch, message) => {
    const res = await gw.admin.createApi(base(upstreamsPatch));
    expect([res.status, res.body]).toEqual([400, { error: message }]);
    expect((await gw.admin.getApi('refused-balancing')).status).toBe(404);
  });

  test('shows hash_on as stored; a switch away from hash must drop it (400 naming it, the definition unchanged)', async () => {
    const created = await gw.admin.createApi({
      ...route('switching', { balancing: 'hash', hash_on: { source: 'header', name: 'X-Tenant' } }),
      name: 'switching',
    });
    expect(created.status).toBe(201);
    const before = await gw.admin.getApi('switching');
    expect((before.body as { proxy: { upstreams: unknown } }).proxy.upstreams).toMatchObject({
      balancing: 'hash',
      hash_on: { source: 'header', name: 'x-tenant' },
    });
    const refused = await gw.admin.patchApi('switching', { proxy: { upstreams: { balancing: 'roundrobin' } } });
    expect([refused.status, refused.body]).toEqual([400, { error: 'proxy.upstreams.hash_on can be given only with balancing "hash"' }]);
    expect((await gw.admin.getApi('switching')).body).toEqual(before.body);
    const switched = await gw.admin.patchApi('switching', { proxy: { upstreams: { balancing: 'roundrobin', hash_on: null } } });
    expect(switched.status).toBe(200);
    expect((switched.body as { proxy: { upstreams: object } }).proxy.upstreams).not.toHaveProperty('hash_on');
  });
});
