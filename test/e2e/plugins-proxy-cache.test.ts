/**
 * proxy_cache through a real control plane and data plane, against an upstream of this file's own
 * that counts the requests it gets per URL (each answer carries that count, so a replayed body is
 * told from a fresh one): Miss then Hit (one upstream request, same bytes and headers, Age, a new
 * X-Request-Id), ttl expiry, what is never stored (POST, statuses not listed, no-store / private /
 * Set-Cookie / Vary: *, Authorization without public), a request's no-cache and no-store, the key
 * (canonical query, vary_query_params, vary_headers), Vary: Accept-Encoding with compression, a
 * body over max_entry_size, an API update dropping its entries, key_auth still refusing and CORS
 * headers per request on hits, and a bad configuration refused with the store unchanged.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { listen } from '#proto/listen';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { expectRefusedPluginConfig } from '../helpers/refused-plugin-config.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';

let gw: Gateway;
let upstream: Server;
let upstreamUrl: string;

/** Requests the upstream got, by URL as received. */
const seen = new Map<string, number>();
const count = (url: string): number => seen.get(url) ?? 0;

/** Text that compresses, over compression's min_size. */
const TEXT = 'proxy cache body '.repeat(200);
const BIG = Buffer.alloc(4096, 'x');

function handle(req: IncomingMessage, res: ServerResponse): void {
  const url = req.url ?? '/';
  const n = (seen.get(url) ?? 0) + 1;
  seen.set(url, n);
  const kind = url.split('?')[0]!.split('/').pop();
  const json = (status: number, headers: Record<string, string> = {}) => {
    const body = JSON.stringify({ url, n, method: req.method });
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-served': String(n), ...headers });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  switch (kind) {
    case 'plain':
      json(200, { etag: `"e${n}"`, 'x-upstream': 'yes' });
      return;
    case 'missing':
      json(404);
      return;
    case 'failing':
      json(500);
      return;
    case 'no-store':
      json(200, { 'cache-control': 'no-store' });
      return;
    case 'private':
      json(200, { 'cache-control': 'private, max-age=60' });
      return;
    case 'cookie':
      json(200, { 'set-cookie': 'session=abc' });
      return;
    case 'vary-star':
      json(200, { vary: '*' });
      return;
    case 'public':
      json(200, { 'cache-control': 'public, max-age=60' });
      return;
    case 'text': {
      res.writeHead(200, { 'content-type': 'text/plain', 'x-served': String(n) });
      return void res.end(`${n} ${TEXT}`);
    }
    case 'big':
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': BIG.length, 'x-served': String(n) });
      return void res.end(BIG);
    case 'big-chunked':
      // No Content-Length: the size is known only as the body streams.
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'x-served': String(n) });
      res.write(BIG.subarray(0, 2048));
      return void setTimeout(() => res.end(BIG.subarray(2048)), 10);
    default:
      json(200);
      return;
  }
}

const cached = (name: string, config: Record<string, unknown> = {}, others: unknown[] = []) => ({
  ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstreamUrl] }),
  plugins: [...others, { name: 'proxy_cache', config }],
});

const KEY = 'proxy-cache-key-0123456789';

beforeAll(async () => {
  upstream = createServer(handle);
  upstreamUrl = `http://127.0.0.1:${await listen(upstream, 0, '127.0.0.1')}`;
  gw = await startGateway();
  await createApis(gw, [
    cached('pc'),
    cached('pc-short', { ttl: '1s' }),
    cached('pc-vary', { vary_headers: ['X-Tenant'] }),
    cached('pc-query', { vary_query_params: ['a'] }),
    cached('pc-noquery', { vary_query_params: [] }),
    cached('pc-gzip', {}, [{ name: 'compression', config: { encodings: ['gzip'] } }]),
    cached('pc-small', { max_entry_size: '1K' }),
    cached('pc-update'),
    cached('pc-key', {}, [{ name: 'key_auth', config: {} }]),
    cached('pc-cors', {}, [{ name: 'cors', config: { domains: ['https://a.example', 'https://b.example'] } }]),
    cached('pc-nocc', { cache_control: false }),
    cached('pc-nocc-authz', { cache_control: false, vary_headers: ['Authorization'] }),
    {
      ...apiDefinition({ name: 'pc-hosts', hosts: ['*.cache.test'], listenPath: '/pc-hosts/*', targets: [upstreamUrl], preserveHost: true }),
      plugins: [{ name: 'proxy_cache', config: {} }],
    },
  ]);
  const created = await gw.admin.request('POST', '/credentials/key_auth', { body: { username: 'cache-user', key: KEY } });
  expect(created.status).toBe(201);
  await gw.admin.waitForDataPlanes(created, gw.dps);
}, 60_000);

afterAll(async () => {
  const problems = gw ? await gw.stop() : '';
  upstream?.closeAllConnections();
  await new Promise((resolve) => upstream?.close(resolve));
  expect(problems).toBe('');
});

const get = (path: string, headers: Record<string, string> = {}, method = 'GET') => gw.dp.request(method, path, { headers });

/** The headers a hit must replay as the miss sent them (Date, Age, X-Request-Id and X-Cache-Status differ by nature). */
const REPLAYED = ['content-type', 'content-length', 'etag', 'x-upstream', 'x-served'];
const replayed = (headers: Record<string, unknown>) => Object.fromEntries(REPLAYED.map((h) => [h, headers[h]]));

test('a miss is stored and the next request is a hit: upstream asked once, same body and headers, Age, a new X-Request-Id', async () => {
  const miss = await get('/pc/hit/plain');
  expect(miss.status).toBe(200);
  expect(miss.headers['x-cache-status']).toBe('Miss');
  expect(miss.headers.age).toBeUndefined();
  const hit = await get('/pc/hit/plain');
  expect(hit.status).toBe(200);
  expect(hit.headers['x-cache-status']).toBe('Hit');
  expect(hit.headers.age).toMatch(/^\d+$/);
  expect(hit.body.equals(miss.body)).toBe(true);
  expect(replayed(hit.headers)).toEqual(replayed(miss.headers));
  expect(hit.headers['x-request-id']).toMatch(/.+/);
  expect(hit.headers['x-request-id']).not.toBe(miss.headers['x-request-id']);
  // A client's own request id is the one it gets back, never the stored one.
  expect((await get('/pc/hit/plain', { 'x-request-id': 'client-chosen-id' })).headers['x-request-id']).toBe('client-chosen-id');
  expect(count('/pc/hit/plain')).toBe(1);
});

test('an entry expires after its ttl', async () => {
  expect((await get('/pc-short/ttl/plain')).headers['x-cache-status']).toBe('Miss');
  expect((await get('/pc-short/ttl/plain')).headers['x-cache-status']).toBe('Hit');
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const after = await get('/pc-short/ttl/plain');
  expect(after.headers['x-cache-status']).toBe('Miss');
  expect(after.json).toMatchObject({ n: 2 });
  expect(count('/pc-short/ttl/plain')).toBe(2);
});

test('POST is never cached, and is marked Bypass', async () => {
  for (let i = 0; i < 2; i++) expect((await get('/pc/post/plain', {}, 'POST')).headers['x-cache-status']).toBe('Bypass');
  expect(count('/pc/post/plain')).toBe(2);
});

test('a status outside statuses is not stored; 404 (a default one) is', async () => {
  for (let i = 0; i < 2; i++) {
    const res = await get('/pc/status/failing');
    expect(res.status).toBe(500);
    expect(res.headers['x-cache-status']).toBe('Miss');
  }
  expect(count('/pc/status/failing')).toBe(2);
  expect((await get('/pc/status/missing')).headers['x-cache-status']).toBe('Miss');
  const hit = await get('/pc/status/missing');
  expect(hit.status).toBe(404);
  expect(hit.headers['x-cache-status']).toBe('Hit');
  expect(count('/pc/status/missing')).toBe(1);
});

test.each(['no-store', 'private', 'cookie', 'vary-star'])('a %s response is not stored', async (kind) => {
  for (let i = 0; i < 2; i++) expect((await get(`/pc/never/${kind}`)).headers['x-cache-status']).toBe('Miss');
  expect(count(`/pc/never/${kind}`)).toBe(2);
});

test('a request with Authorization is stored only when the response says public', async () => {
  const auth = { authorization: 'Bearer someone' };
  for (let i = 0; i < 2; i++) expect((await get('/pc/authz/plain', auth)).headers['x-cache-status']).toBe('Miss');
  expect(count('/pc/authz/plain')).toBe(2);
  expect((await get('/pc/authz/public', auth)).headers['x-cache-status']).toBe('Miss');
  expect((await get('/pc/authz/public', auth)).headers['x-cache-status']).toBe('Hit');
  expect(count('/pc/authz/public')).toBe(1);
});

test('a max-age from the response wins over ttl', async () => {
  // pc-short's ttl is 1s, the response's max-age 60 s.
  expect((await get('/pc-short/maxage/public')).headers['x-cache-status']).toBe('Miss');
  await new Promise((resolve) => setTimeout(resolve, 1100));
  expect((await get('/pc-short/maxage/public')).headers['x-cache-status']).toBe('Hit');
  expect(count('/pc-short/maxage/public')).toBe(1);
});

test("a request's no-cache skips the lookup and stores the fresh response; no-store skips both", async () => {
  expect((await get('/pc/refresh/plain')).json).toMatchObject({ n: 1 });
  const refreshed = await get('/pc/refresh/plain', { 'cache-control': 'no-cache' });
  expect(refreshed.headers['x-cache-status']).toBe('Bypass');
  expect(refreshed.json).toMatchObject({ n: 2 });
  const hit = await get('/pc/refresh/plain');
  expect(hit.headers['x-cache-status']).toBe('Hit');
  expect(hit.json).toMatchObject({ n: 2 });
  const unstored = await get('/pc/refresh/plain', { 'cache-control': 'no-store' });
  expect(unstored.headers['x-cache-status']).toBe('Bypass');
  expect(unstored.json).toMatchObject({ n: 3 });
  expect((await get('/pc/refresh/plain')).json).toMatchObject({ n: 2 });
  expect(count('/pc/refresh/plain')).toBe(3);
});

test("without cache_control a request's Authorization keeps its response out of the cache, unless vary_headers keys it", async () => {
  for (const who of ['alice', 'bob']) expect((await get('/pc-nocc/authz/public', { authorization: `Bearer ${who}` })).headers['x-cache-status']).toBe('Miss');
  expect(count('/pc-nocc/authz/public')).toBe(2);
  // Keyed by Authorization: each credential gets its own entry, and never another's.
  const as = (who: string) => get('/pc-nocc-authz/authz/plain', { authorization: `Bearer ${who}` });
  expect((await as('alice')).headers['x-cache-status']).toBe('Miss');
  expect((await as('bob')).headers['x-cache-status']).toBe('Miss');
  expect((await as('alice')).headers['x-cache-status']).toBe('Hit');
  expect((await as('bob')).headers['x-cache-status']).toBe('Hit');
  expect(count('/pc-nocc-authz/authz/plain')).toBe(2);
});

test("one route serving several hosts keeps an entry per Host (any case), never one host's answer for another", async () => {
  const asHost = (host: string) => gw.dp.request('GET', '/pc-hosts/x/plain', { headers: { host } });
  expect((await asHost('a.cache.test')).headers['x-cache-status']).toBe('Miss');
  expect((await asHost('b.cache.test')).headers['x-cache-status']).toBe('Miss');
  expect((await asHost('A.Cache.Test')).headers['x-cache-status']).toBe('Hit');
  expect((await asHost('b.cache.test')).headers['x-cache-status']).toBe('Hit');
  expect(count('/pc-hosts/x/plain')).toBe(2);
});

test('without cache_control the directives are ignored and ttl applies', async () => {
  expect((await get('/pc-nocc/x/no-store')).headers['x-cache-status']).toBe('Miss');
  expect((await get('/pc-nocc/x/no-store', { 'cache-control': 'no-cache' })).headers['x-cache-status']).toBe('Hit');
  expect(count('/pc-nocc/x/no-store')).toBe(1);
});

test('the whole query is keyed in canonical order, vary_query_params narrows it, [] ignores it', async () => {
  expect((await get('/pc/q/plain?b=2&a=1')).headers['x-cache-status']).toBe('Miss');
  expect((await get('/pc/q/plain?a=1&b=2')).headers['x-cache-status']).toBe('Hit');
  expect((await get('/pc/q/plain?a=1&b=3')).headers['x-cache-status']).toBe('Miss');

  expect((await get('/pc-query/q/plain?a=1&x=1')).headers['x-cache-status']).toBe('Miss');
  expect((await get('/pc-query/q/plain?x=2&a=1')).headers['x-cache-status']).toBe('Hit');
  expect((await get('/pc-query/q/plain?a=2&x=1')).headers['x-cache-status']).toBe('Miss');

  expect((await get('/pc-noquery/q/plain?a=1')).headers['x-cache-status']).toBe('Miss');
  expect((await get('/pc-noquery/q/plain?b=7')).headers['x-cache-status']).toBe('Hit');
});

test('vary_headers values are part of the key', async () => {
  const a = await get('/pc-vary/v/plain', { 'x-tenant': 'a' });
  const b = await get('/pc-vary/v/plain', { 'x-tenant': 'b' });
  expect([a.headers['x-cache-status'], b.headers['x-cache-status']]).toEqual(['Miss', 'Miss']);
  const again = await get('/pc-vary/v/plain', { 'X-Tenant': 'a' });
  expect(again.headers['x-cache-status']).toBe('Hit');
  expect(again.body.equals(a.body)).toBe(true);
  expect(count('/pc-vary/v/plain')).toBe(2);
});

test('with compression, gzip and identity clients each get their own entry (Vary: Accept-Encoding)', async () => {
  const gzip = { 'accept-encoding': 'gzip' };
  const plainMiss = await get('/pc-gzip/z/text');
  const gzipMiss = await get('/pc-gzip/z/text', gzip);
  expect([plainMiss.headers['x-cache-status'], gzipMiss.headers['x-cache-status']]).toEqual(['Miss', 'Miss']);
  expect(gzipMiss.headers['content-encoding']).toBe('gzip');
  const gzipHit = await get('/pc-gzip/z/text', gzip);
  const plainHit = await get('/pc-gzip/z/text');
  expect([gzipHit.headers['x-cache-status'], plainHit.headers['x-cache-status']]).toEqual(['Hit', 'Hit']);
  expect(gzipHit.headers['content-encoding']).toBe('gzip');
  expect(gzipHit.headers.vary).toBe('Accept-Encoding');
  expect(gunzipSync(gzipHit.body).toString()).toBe(gunzipSync(gzipMiss.body).toString());
  expect(gunzipSync(gzipHit.body).toString()).toBe(`2 ${TEXT}`);
  expect(plainHit.headers['content-encoding']).toBeUndefined();
  expect(plainHit.text).toBe(`1 ${TEXT}`);
  expect(count('/pc-gzip/z/text')).toBe(2);
});

test.each(['big', 'big-chunked'])('a %s body over max_entry_size reaches the client whole but is not stored', async (kind) => {
  for (let i = 0; i < 2; i++) {
    const res = await get(`/pc-small/s/${kind}`);
    expect(res.headers['x-cache-status']).toBe('Miss');
    expect(res.body.equals(BIG)).toBe(true);
  }
  expect(count(`/pc-small/s/${kind}`)).toBe(2);
});

test('updating the API drops what its former definition stored', async () => {
  expect((await get('/pc-update/u/plain')).headers['x-cache-status']).toBe('Miss');
  expect((await get('/pc-update/u/plain')).headers['x-cache-status']).toBe('Hit');
  const updated = await gw.admin.updateApi('pc-update', cached('pc-update', { ttl: '1m' }));
  expect(updated.status).toBe(200);
  await gw.admin.waitForDataPlanes(updated, gw.dps);
  const after = await get('/pc-update/u/plain');
  expect(after.headers['x-cache-status']).toBe('Miss');
  expect(after.json).toMatchObject({ n: 2 });
  expect(count('/pc-update/u/plain')).toBe(2);
});

test('key_auth on the route still refuses a request whose answer is cached', async () => {
  expect((await get('/pc-key/k/plain', { apikey: KEY })).headers['x-cache-status']).toBe('Miss');
  expect((await get('/pc-key/k/plain', { apikey: KEY })).headers['x-cache-status']).toBe('Hit');
  const missing = await get('/pc-key/k/plain');
  expect(missing.status).toBe(401);
  expect(missing.headers['x-cache-status']).toBeUndefined();
  expect((await get('/pc-key/k/plain', { apikey: 'not-a-key-0123456789' })).status).toBe(401);
  expect(count('/pc-key/k/plain')).toBe(1);
});

test("CORS headers are the current request's on a hit", async () => {
  const miss = await get('/pc-cors/c/plain', { origin: 'https://a.example' });
  expect(miss.headers['x-cache-status']).toBe('Miss');
  expect(miss.headers['access-control-allow-origin']).toBe('https://a.example');
  const hit = await get('/pc-cors/c/plain', { origin: 'https://b.example' });
  expect(hit.headers['x-cache-status']).toBe('Hit');
  expect(hit.headers['access-control-allow-origin']).toBe('https://b.example');
  expect(hit.headers.vary).toBe('Origin');
  const noOrigin = await get('/pc-cors/c/plain');
  expect(noOrigin.headers['x-cache-status']).toBe('Hit');
  expect(noOrigin.headers['access-control-allow-origin']).toBeUndefined();
  expect(count('/pc-cors/c/plain')).toBe(1);
});

test('HEAD is cached apart from GET, with its Content-Length', async () => {
  const head = await get('/pc/head/plain', {}, 'HEAD');
  expect(head.headers['x-cache-status']).toBe('Miss');
  const hit = await get('/pc/head/plain', {}, 'HEAD');
  expect(hit.headers['x-cache-status']).toBe('Hit');
  expect(hit.headers['content-length']).toBe(head.headers['content-length']);
  expect(hit.body).toHaveLength(0);
  expect((await get('/pc/head/plain')).headers['x-cache-status']).toBe('Miss');
  expect(count('/pc/head/plain')).toBe(2);
});

test('defaults are stored and shown; a bad configuration is refused naming the field, the store unchanged', async () => {
  const shown = await gw.admin.getApi('pc');
  // Every member shown with its default (the full list is the unit test's, proto/src/plugins/proxy-cache.test.ts).
  expect(Object.keys(shown.body.plugins[0].config).sort()).toEqual([
    'cache_control',
    'content_types',
    'max_entry_size',
    'methods',
    'per_consumer',
    'statuses',
    'ttl',
    'vary_headers',
    'vary_query_params',
  ]);
  expect(shown.body.plugins[0].config).toMatchObject({
    ttl: '30s',
    statuses: [200, 301, 404],
    vary_query_params: null,
    max_entry_size: '1MB',
    per_consumer: false,
  });
  await expectRefusedPluginConfig(
    gw,
    {
      definition: apiDefinition({ name: 'pc-bad', listenPath: '/pc-bad/*', targets: [upstreamUrl] }),
      existing: 'pc',
      plugins: [{ name: 'proxy_cache', config: { ttl: '2d' } }],
    },
    'plugins[0].config.ttl must be a duration from "1s" to "24h", e.g. "30s"',
  );
});
