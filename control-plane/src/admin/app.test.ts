/**
 * The real admin app on a real port (in-process), wired like main.ts: file store in a temp
 * DATA_DIR, snapshot builder, gRPC snapshot server, metrics. Driven with fetch.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { SignJWT, UnsecuredJWT } from 'jose';
import { CHANNEL_OPTIONS, loadGatehouseProto } from '#proto/grpc';
import { createLogger } from '#proto/logger';
import { openFileStore, readStoredContent } from '../store/file-store.js';
import type { DefinitionStore } from '../store/index.js';
import { createSnapshotBuilder, type SnapshotBuilder } from '../snapshot/snapshot-builder.js';
import { createSnapshotServer, type SnapshotServer } from '../grpc/snapshot-server.js';
import { createControlPlaneMetrics } from '../metrics/control-plane-metrics.js';
import { ADMIN_TOKEN_AUDIENCE, ADMIN_TOKEN_ISSUER, createAdminAuth, credentialFingerprint } from './admin-auth.js';
import { createAdminApp } from './app.js';
import { createLoginThrottle } from './login-throttle.js';
import { proxyDefaults } from '../../../test/helpers/proxy-defaults.js';

const logger = createLogger('control-plane', 'silent');
const proto = loadGatehouseProto();
const SECRET = 'test-secret-that-is-long-enough-for-hs256';
const PASSWORD = 'correct horse battery staple';
const VIEWER_PASSWORD = 'viewer password, long enough';
const TTL = 60;
/** Failed logins per key before backoff, and the first wait (doubling). */
const FREE_FAILURES = 3;
const BACKOFF_MS = 4_000;

let dir: string;
let store: DefinitionStore;
let builder: SnapshotBuilder;
let grpcServer: SnapshotServer;
let grpcPort: number;
let http: Server;
let base: string;
let clock: Date;
let token: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'gatehouse-admin-'));
  store = await openFileStore({ dataDir: dir, logger });
  builder = createSnapshotBuilder({ store, encodeSnapshot: proto.encodeSnapshot, logger });
  const metrics = createControlPlaneMetrics({
    snapshotVersion: () => builder.current().version,
    connectedDataPlanes: () => grpcServer.dataPlanes().length,
  });
  grpcServer = createSnapshotServer({
    snapshots: builder,
    service: proto.service,
    wrapPush: proto.wrapPush,
    credentials: grpc.ServerCredentials.createInsecure(),
    logger,
    callbacks: metrics.streamCallbacks,
  });
  grpcPort = await grpcServer.listen('127.0.0.1', 0);
  clock = new Date();
  const auth = createAdminAuth({
    user: 'admin',
    password: PASSWORD,
    viewer: { user: 'auditor', password: VIEWER_PASSWORD },
    jwtSecret: SECRET,
    tokenTtlSeconds: TTL,
    now: () => clock,
  });
  const loginThrottle = createLoginThrottle({ freeFailures: FREE_FAILURES, baseDelayMs: BACKOFF_MS, maxDelayMs: 60_000, now: () => clock.getTime() });
  const app = createAdminApp({ store, snapshots: builder, dataPlanes: () => grpcServer.dataPlanes(), auth, loginThrottle, metrics, logger });
  http = app.listen(0, '127.0.0.1');
  await once(http, 'listening');
  base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  token = ((await (await login('admin', PASSWORD)).json()) as { access_token: string }).access_token;
});

afterEach(async () => {
  http.closeAllConnections();
  await new Promise((resolve) => http.close(resolve));
  await grpcServer.close(1000);
  builder.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

function login(username: unknown, password: unknown): Promise<Response> {
  return fetch(`${base}/login`, { method: 'POST', body: JSON.stringify({ username, password }) });
}

async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

const target = (url = 'http://127.0.0.1:9000') => ({ balancing: 'roundrobin', targets: [{ target: url }] });
const apiBody = (name: string, extra: Record<string, unknown> = {}, proxy: Record<string, unknown> = {}) => ({
  name,
  ...extra,
  proxy: { listen_path: `/${name}/*`, upstreams: target(), ...proxy },
});
const serverBody = (name: string, listenPath = `/${name}/token`) => ({
  name,
  oauth_endpoints: { token: { listen_path: listenPath, methods: ['POST'], upstreams: target('http://127.0.0.1:9001/token') } },
  token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'k'.repeat(32) }] },
});
const oauth2 = (server: string) => [{ name: 'oauth2', enabled: true, config: { server_name: server } }];

describe('public endpoints', () => {
  test('/healthz', async () => {
    const res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  test('/readyz reports the snapshot version and hash', async () => {
    const res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ready: true, snapshot: { version: 1, hash: builder.current().hash } });
  });

  test('/readyz is 503 when the store is unreachable', async () => {
    await rm(dir, { recursive: true, force: true });
    const res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ ready: false });
  });

  test('/metrics is Prometheus text with request, snapshot and data-plane metrics', async () => {
    await call('GET', '/apis');
    const res = await fetch(`${base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toMatch(/gatehouse_admin_http_requests_total\{method="GET",route="\/apis",status="200"\} 1/);
    expect(text).toContain('gatehouse_snapshot_version 1');
    expect(text).toContain('gatehouse_connected_dataplanes 0');
    expect(text).toContain('gatehouse_snapshot_pushes_total{content="snapshot"} 0');
    expect(text).toContain('gatehouse_snapshot_pushes_total{content="delta"} 0');
  });
});

describe('login and admin tokens', () => {
  test('valid credentials → bearer token with expiry', async () => {
    const res = await login('admin', PASSWORD);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = await res.json();
    expect(body).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: TTL });
  });

  test.each([
    ['wrong password', 'admin', 'nope'],
    ['wrong user', 'root', PASSWORD],
    ['password missing', 'admin', undefined],
    ['password not a string', 'admin', 12345],
    ['both empty', '', ''],
  ])('%s → 401 invalid credentials', async (_name, username, password) => {
    const res = await login(username, password);
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ error: 'invalid credentials' });
  });

  test('malformed login body → 400', async () => {
    const res = await fetch(`${base}/login`, { method: 'POST', body: '{"username":' });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'malformed JSON body' });
  });

  const sign = (claims: Record<string, unknown>, opts: { secret?: string; alg?: string; exp?: number } = {}) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT(claims)
      .setProtectedHeader({ alg: opts.alg ?? 'HS256' })
      .setSubject('admin')
      .setIssuer(ADMIN_TOKEN_ISSUER)
      .setAudience(ADMIN_TOKEN_AUDIENCE)
      .setIssuedAt(now - 10)
      .setExpirationTime(opts.exp ?? now + 60)
      .sign(new TextEncoder().encode(opts.secret ?? SECRET));
  };

  const admin = () => ({ role: 'admin', cfp: credentialFingerprint('admin', 'admin', PASSWORD, SECRET) });

  test('a token signed like ours is accepted (the reference for the rows below)', async () => {
    expect((await call('GET', '/apis', undefined, { authorization: `Bearer ${await sign(admin())}` })).status).toBe(200);
  });

  test.each<[string, () => Promise<string | undefined>, string]>([
    ['no Authorization header', async () => undefined, 'missing bearer token'],
    ['Basic scheme', async () => 'Basic YWRtaW46YWRtaW4=', 'malformed authorization header'],
    ['Bearer without token', async () => 'Bearer', 'malformed authorization header'],
    ['not a JWT', async () => 'Bearer abc.def', 'malformed authorization header'],
    ['garbage JWT', async () => 'Bearer abc.def.ghi', 'invalid or expired token'],
    ['wrong signature', async () => `Bearer ${await sign(admin(), { secret: 'another-secret-another-secret-xx' })}`, 'invalid or expired token'],
    ['expired', async () => `Bearer ${await sign(admin(), { exp: Math.floor(Date.now() / 1000) - 120 })}`, 'invalid or expired token'],
    [
      'no credential fingerprint (a token of an earlier release)',
      async () => `Bearer ${await sign({ role: 'admin' })}`,
      'token was issued for credentials that changed; log in again',
    ],
    [
      'fingerprint of an earlier password',
      async () => `Bearer ${await sign({ role: 'admin', cfp: credentialFingerprint('admin', 'admin', 'old password', SECRET) })}`,
      'token was issued for credentials that changed; log in again',
    ],
    [
      'viewer fingerprint claiming the admin role',
      async () => `Bearer ${await sign({ role: 'admin', cfp: credentialFingerprint('viewer', 'auditor', VIEWER_PASSWORD, SECRET) })}`,
      'token was issued for credentials that changed; log in again',
    ],
    [
      'alg none',
      async () => `Bearer ${new UnsecuredJWT({ sub: 'admin', iss: ADMIN_TOKEN_ISSUER, aud: ADMIN_TOKEN_AUDIENCE, exp: 2e9 }).encode()}`,
      'invalid or expired token',
    ],
    ['HS512 with the right secret (alg not allowed)', async () => `Bearer ${await sign(admin(), { alg: 'HS512' })}`, 'invalid or expired token'],
    [
      'wrong audience',
      async () =>
        `Bearer ${await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('admin').setIssuer(ADMIN_TOKEN_ISSUER).setAudience('other').setExpirationTime('1m').sign(new TextEncoder().encode(SECRET))}`,
      'invalid or expired token',
    ],
  ])('%s → 401', async (_name, header, message) => {
    const value = await header();
    const res = await fetch(`${base}/apis`, { headers: value === undefined ? {} : { authorization: value } });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({ error: message });
  });

  test('an issued token expires after ADMIN_TOKEN_TTL', async () => {
    expect((await call('GET', '/apis')).status).toBe(200);
    clock = new Date(clock.getTime() + (TTL + 1) * 1000);
    expect(await call('GET', '/apis')).toMatchObject({ status: 401, body: { error: 'invalid or expired token' } });
  });

  test('auth is checked before the route: an unknown path without a token is 401', async () => {
    expect((await fetch(`${base}/nope`)).status).toBe(401);
  });
});

describe('viewer role (ADMIN_VIEWER_USER)', () => {
  let viewerToken: string;
  beforeEach(async () => {
    viewerToken = ((await (await login('auditor', VIEWER_PASSWORD)).json()) as { access_token: string }).access_token;
  });
  const viewer = () => ({ authorization: `Bearer ${viewerToken}` });

  test.each(['/apis', '/apis/r', '/oauth/servers', '/dataplanes'])('may read: GET %s → 200', async (path) => {
    expect((await call('POST', '/apis', apiBody('r'))).status).toBe(201);
    expect((await call('GET', path, undefined, viewer())).status).toBe(200);
  });

  test.each([
    ['POST /apis', 'POST', '/apis', apiBody('v')],
    ['PUT /apis/{name}', 'PUT', '/apis/v', { active: false }],
    ['PATCH /apis/{name}', 'PATCH', '/apis/v', { active: false }],
    ['DELETE /apis/{name}', 'DELETE', '/apis/v', undefined],
    ['POST /oauth/servers', 'POST', '/oauth/servers', serverBody('s')],
    ['DELETE /oauth/servers/{name}', 'DELETE', '/oauth/servers/s', undefined],
  ])('may not write: %s → 403, nothing changes', async (_name, method, path, body) => {
    expect((await call('POST', '/apis', apiBody('v'))).status).toBe(201);
    const version = builder.current().version;
    const res = await call(method, path, body, viewer());
    expect(res).toMatchObject({ status: 403, body: { error: 'this account is read-only (viewer)' } });
    expect(builder.current().version).toBe(version);
    expect((await call('GET', '/apis/v')).body).toMatchObject({ name: 'v', active: true });
  });

  test('the viewer password does not log in as admin, and the admin token still writes', async () => {
    expect((await login('admin', VIEWER_PASSWORD)).status).toBe(401);
    expect((await call('POST', '/apis', apiBody('w'))).status).toBe(201);
  });
});

describe('credential changes invalidate earlier tokens', () => {
  /** The same app, rebuilt as after a restart with other settings. */
  const verifyWith = (password: string, jwtSecret: string) =>
    createAdminAuth({ user: 'admin', password, jwtSecret, tokenTtlSeconds: TTL, now: () => clock }).verify(`Bearer ${token}`);

  test('same password and secret: still valid', async () => {
    await expect(verifyWith(PASSWORD, SECRET)).resolves.toEqual({ user: 'admin', role: 'admin' });
  });

  test('new password: 401', async () => {
    await expect(verifyWith('a new password', SECRET)).rejects.toMatchObject({ code: 'ADMIN_UNAUTHORIZED' });
  });

  test('new token secret: 401', async () => {
    await expect(verifyWith(PASSWORD, `${SECRET}-rotated`)).rejects.toMatchObject({ code: 'ADMIN_UNAUTHORIZED' });
  });
});

describe('login throttling', () => {
  const fail = () => login('admin', 'wrong');

  test(`${FREE_FAILURES} failures are answered 401, then 429 with Retry-After without checking the password`, async () => {
    for (let i = 0; i < FREE_FAILURES; i++) expect((await fail()).status).toBe(401);
    const throttled = await login('admin', PASSWORD);
    expect(throttled.status).toBe(429);
    expect(throttled.headers.get('retry-after')).toBe(String(BACKOFF_MS / 1000));
    expect(await throttled.json()).toEqual({ error: 'too many failed logins; retry later' });
  });

  test('after the wait the right password logs in, and success resets the count', async () => {
    for (let i = 0; i < FREE_FAILURES; i++) await fail();
    clock = new Date(clock.getTime() + BACKOFF_MS);
    expect((await login('admin', PASSWORD)).status).toBe(200);
    expect((await fail()).status).toBe(401);
    expect((await login('admin', PASSWORD)).status).toBe(200);
  });

  test('each failure past the free ones doubles the wait', async () => {
    for (let i = 0; i < FREE_FAILURES; i++) await fail();
    clock = new Date(clock.getTime() + BACKOFF_MS);
    expect((await fail()).status).toBe(401);
    expect((await fail()).headers.get('retry-after')).toBe(String((2 * BACKOFF_MS) / 1000));
  });

  test('the client address is throttled whatever user name it tries', async () => {
    for (let i = 0; i < FREE_FAILURES; i++) await login(`user-${i}`, 'wrong');
    expect((await login('auditor', VIEWER_PASSWORD)).status).toBe(429);
  });
});

describe('/apis', () => {
  test('GET /apis is [] when none', async () => {
    expect(await call('GET', '/apis')).toMatchObject({ status: 200, body: [] });
  });

  test('POST → 201, Location, stored definition with defaults, X-Snapshot-Version; durable on disk', async () => {
    const res = await call('POST', '/apis', apiBody('users'));
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe('/apis/users');
    expect(res.headers.get('x-snapshot-version')).toBe('2');
    expect(res.body).toEqual({
      name: 'users',
      active: true,
      hosts: [],
      proxy: {
        listen_path: '/users/*',
        upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://127.0.0.1:9000', weight: 1 }] },
        ...proxyDefaults(),
      },
      plugins: [],
    });
    expect((await call('GET', '/apis')).body).toEqual([res.body]);
    expect((await call('GET', '/apis/users')).body).toEqual(res.body);
    const stored = await readStoredContent(dir, logger);
    expect(JSON.parse(JSON.stringify({ revision: stored.revision, apis: stored.defs.apis, oauth_servers: stored.defs.oauthServers }))).toEqual({
      revision: 2,
      apis: [res.body],
      oauth_servers: [],
    });
    expect(builder.current().version).toBe(2);
  });

  test('GET/PUT/PATCH/DELETE of an unknown api → 404 api definition not found', async () => {
    for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
      const res = await call(method, '/apis/ghost', method === 'GET' || method === 'DELETE' ? undefined : { active: false });
      expect(res).toMatchObject({ status: 404, body: { error: 'api definition not found' } });
    }
  });

  test('409 api name is already registered', async () => {
    await call('POST', '/apis', apiBody('a'));
    const res = await call('POST', '/apis', apiBody('a', {}, { listen_path: '/other/*' }));
    expect(res).toMatchObject({ status: 409, body: { error: 'api name is already registered' } });
  });

  test.each([
    ['same listen_path', {}, {}],
    ['same listen_path, hosts in another order and case', { hosts: ['B.example.com', 'a.example.com'] }, {}],
    ['same listen_path and methods as a set', {}, { methods: ['post', 'GET'] }],
  ])('409 api listen path is already registered: %s', async (_name, extra, proxy) => {
    const first = { hosts: (extra as { hosts?: string[] }).hosts ? ['a.example.com', 'b.example.com'] : undefined };
    await call('POST', '/apis', apiBody('a', first, (proxy as { methods?: string[] }).methods ? { methods: ['GET', 'POST'] } : {}));
    const res = await call('POST', '/apis', apiBody('b', extra, { listen_path: '/a/*', ...proxy }));
    expect(res).toMatchObject({ status: 409, body: { error: 'api listen path is already registered' } });
    expect((await call('GET', '/apis')).body.map((a: { name: string }) => a.name)).toEqual(['a']);
  });

  test('same listen_path with different methods or hosts is not a conflict', async () => {
    await call('POST', '/apis', apiBody('a', {}, { methods: ['GET'] }));
    expect((await call('POST', '/apis', apiBody('b', {}, { listen_path: '/a/*', methods: ['POST'] }))).status).toBe(201);
    expect((await call('POST', '/apis', apiBody('c', { hosts: ['x.example.com'] }, { listen_path: '/a/*', methods: ['GET'] }))).status).toBe(201);
  });

  test('an inactive API still owns its listen path', async () => {
    await call('POST', '/apis', apiBody('a', { active: false }));
    expect((await call('POST', '/apis', apiBody('b', {}, { listen_path: '/a/*' }))).status).toBe(409);
  });

  test("PUT onto another API's listen path → 409, unchanged", async () => {
    await call('POST', '/apis', apiBody('a'));
    await call('POST', '/apis', apiBody('b'));
    const res = await call('PUT', '/apis/b', { proxy: { listen_path: '/a/*' } });
    expect(res).toMatchObject({ status: 409, body: { error: 'api listen path is already registered' } });
    expect((await call('GET', '/apis/b')).body.proxy.listen_path).toBe('/b/*');
  });

  test.each<[string, unknown, string]>([
    ['name missing', { proxy: { listen_path: '/x/*', upstreams: target() } }, 'name'],
    ['no routing condition', { name: 'x', proxy: { upstreams: target() } }, 'proxy.listen_path is required'],
    ['bad target URL', apiBody('x', {}, { upstreams: target('not a url') }), 'proxy.upstreams.targets[0].target'],
    ['bad listen_path regex (compile stage)', apiBody('x', {}, { listen_path: '/x/{id:[}' }), 'listen_path'],
    ['unknown plugin', apiBody('x', { plugins: [{ name: 'no_such_plugin', enabled: true }] }), 'no_such_plugin'],
    ['oauth2 names a missing server', apiBody('x', { plugins: oauth2('nope') }), 'nope'],
    ['body is an array', [apiBody('x')], 'JSON object'],
  ])('validation: %s → 400 naming the problem, store unchanged', async (_name, body, fragment) => {
    await call('POST', '/apis', apiBody('keep'));
    const before = (await call('GET', '/apis')).body;
    const res = await call('POST', '/apis', body);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.body.error).toContain(fragment);
    expect((await call('GET', '/apis')).body).toEqual(before);
    expect(builder.current().version).toBe(2);
  });

  test('malformed JSON → 400 malformed JSON body', async () => {
    expect(await call('POST', '/apis', '{"name": ')).toMatchObject({ status: 400, body: { error: 'malformed JSON body' } });
    expect(await call('POST', '/apis', 'null')).toMatchObject({ status: 400, body: { error: 'malformed JSON body' } });
  });

  test.each([
    ['GET', '/apis/%zz'],
    ['DELETE', '/apis/%E0%A4%A'],
    ['PUT', '/oauth/servers/%'],
  ])('%s %s, a path that does not decode → 400, store unchanged', async (method, path) => {
    await call('POST', '/apis', apiBody('kept'));
    const before = (await call('GET', '/apis')).body;
    expect(await call(method, path, method === 'PUT' ? {} : undefined)).toMatchObject({
      status: 400,
      body: { error: 'malformed percent-encoding in the request path' },
    });
    expect((await call('GET', '/apis')).body).toEqual(before);
  });

  test('a body over 1 MiB → 413 request body too large', async () => {
    const huge = JSON.stringify({ ...apiBody('big'), padding: 'x'.repeat(1024 * 1024) });
    const res = await call('POST', '/apis', huge);
    expect(res).toMatchObject({ status: 413, body: { error: 'request body too large' } });
    expect((await call('GET', '/apis')).body).toEqual([]);
  });

  test('JSON is parsed whatever the content type says', async () => {
    expect((await call('POST', '/apis', apiBody('a'), { 'content-type': 'text/plain' })).status).toBe(201);
  });

  test('PUT {"plugins":[...]} is a merge patch: only plugins change', async () => {
    await call('POST', '/oauth/servers', serverBody('auth'));
    const created = (await call('POST', '/apis', apiBody('a', { hosts: ['a.example.com'] }, { strip_path: true }))).body;
    const res = await call('PUT', '/apis/a', { plugins: oauth2('auth') });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...created, plugins: oauth2('auth') });
    expect(res.headers.get('x-snapshot-version')).toBe('4');
    expect((await call('GET', '/apis/a')).body).toEqual(res.body);
  });

  test('PUT {"active":false} deactivates and keeps it listed; {"active":true} reactivates', async () => {
    const created = (await call('POST', '/apis', apiBody('a'))).body;
    expect((await call('PUT', '/apis/a', { active: false })).body).toEqual({ ...created, active: false });
    expect((await call('GET', '/apis')).body).toEqual([{ ...created, active: false }]);
    expect((await call('PUT', '/apis/a', { active: true })).body).toEqual(created);
  });

  test('merge patch: nested objects merge, null removes (back to the default)', async () => {
    await call('POST', '/apis', apiBody('a', { hosts: ['a.example.com'] }, { strip_path: true }));
    const res = await call('PATCH', '/apis/a', { hosts: null, proxy: { append_path: true, strip_path: null } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ hosts: [], proxy: { listen_path: '/a/*', append_path: true, strip_path: false } });
  });

  test.each<[string, Record<string, unknown>, string[]]>([
    ['PUT with the proxy.hosts alias replaces the hosts, as hosts would', { proxy: { hosts: ['B.example.com'] } }, ['b.example.com']],
    [
      'PATCH with the alias and hosts: both replace the stored hosts together',
      { hosts: ['c.example.com'], proxy: { hosts: ['d.example.com'] } },
      ['c.example.com', 'd.example.com'],
    ],
    ['an empty alias clears them', { proxy: { hosts: [] } }, []],
    ['a null alias clears them too (null removes)', { proxy: { hosts: null } }, []],
    ['a patch without the alias leaves them', { proxy: { strip_path: true } }, ['a.example.com', 'x.example.com']],
  ])('%s', async (_name, patch, hosts) => {
    await call('POST', '/apis', apiBody('a', { hosts: ['a.example.com'] }, { hosts: ['x.example.com'] }));
    const res = await call(_name.startsWith('PATCH') ? 'PATCH' : 'PUT', '/apis/a', patch);
    expect(res.status).toBe(200);
    expect(res.body.hosts).toEqual(hosts);
    expect(res.body.proxy).not.toHaveProperty('hosts');
    expect((await call('GET', '/apis/a')).body.hosts).toEqual(hosts);
  });

  test('a malformed proxy.hosts in a PUT is named by the 400, store unchanged', async () => {
    await call('POST', '/apis', apiBody('a', { hosts: ['a.example.com'] }));
    const before = (await call('GET', '/apis/a')).body;
    const res = await call('PUT', '/apis/a', { proxy: { hosts: 'b.example.com' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toContain('proxy.hosts');
    expect((await call('GET', '/apis/a')).body).toEqual(before);
  });

  test('a PUT repeating the same name is fine; another name → 400', async () => {
    await call('POST', '/apis', apiBody('a'));
    expect((await call('PUT', '/apis/a', { name: 'a', active: false })).status).toBe(200);
    const res = await call('PUT', '/apis/a', { name: 'b' });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/name/);
    expect((await call('GET', '/apis/b')).status).toBe(404);
  });

  test('an invalid PUT leaves the stored definition and version unchanged', async () => {
    const created = (await call('POST', '/apis', apiBody('a'))).body;
    const res = await call('PUT', '/apis/a', { proxy: { upstreams: { targets: [] } } });
    expect(res.status).toBe(400);
    expect((await call('GET', '/apis/a')).body).toEqual(created);
    expect(builder.current().version).toBe(2);
  });

  test('a PUT that changes nothing keeps the snapshot version', async () => {
    await call('POST', '/apis', apiBody('a'));
    const res = await call('PUT', '/apis/a', {});
    expect(res.status).toBe(200);
    expect(res.headers.get('x-snapshot-version')).toBe('2');
  });

  test('DELETE → 204, gone from the list, new snapshot version', async () => {
    await call('POST', '/apis', apiBody('a'));
    const res = await call('DELETE', '/apis/a');
    expect(res.status).toBe(204);
    expect(res.body).toBeUndefined();
    expect(res.headers.get('x-snapshot-version')).toBe('3');
    expect((await call('GET', '/apis')).body).toEqual([]);
    expect((await call('GET', '/apis/a')).status).toBe(404);
  });

  test('concurrent POSTs of the same name: exactly one wins', async () => {
    const results = await Promise.all(Array.from({ length: 10 }, () => call('POST', '/apis', apiBody('same'))));
    expect(results.map((r) => r.status).sort()).toEqual([201, ...Array(9).fill(409)]);
  });
});

describe('/oauth/servers', () => {
  test('CRUD: POST 201 + Location, GET list/one, PUT merge, DELETE 204', async () => {
    expect((await call('GET', '/oauth/servers')).body).toEqual([]);
    const created = await call('POST', '/oauth/servers', serverBody('auth'));
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe('/oauth/servers/auth');
    expect(created.body).toMatchObject({
      name: 'auth',
      oauth_endpoints: { token: { listen_path: '/auth/token', methods: ['POST'], strip_path: false } },
      // The HS key is write-only: shown as the marker, stored as written.
      token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: '<redacted>' }], leeway: 0 },
    });
    expect((await call('GET', '/oauth/servers')).body).toEqual([created.body]);
    expect((await call('GET', '/oauth/servers/auth')).body).toEqual(created.body);
    const updated = await call('PUT', '/oauth/servers/auth', { token_strategy: { leeway: 30 } });
    expect(updated.status).toBe(200);
    expect(updated.body.token_strategy).toEqual({ ...created.body.token_strategy, leeway: 30 });
    expect(store.current().defs.oauthServers[0].token_strategy.settings).toEqual([{ alg: 'HS256', key: 'k'.repeat(32) }]);
    expect((await call('DELETE', '/oauth/servers/auth')).status).toBe(204);
    expect((await call('GET', '/oauth/servers')).body).toEqual([]);
  });

  test('404 oauth server not found', async () => {
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const res = await call(method, '/oauth/servers/ghost', method === 'PUT' ? {} : undefined);
      expect(res).toMatchObject({ status: 404, body: { error: 'oauth server not found' } });
    }
  });

  test('409 oauth server name is already registered', async () => {
    await call('POST', '/oauth/servers', serverBody('auth'));
    const res = await call('POST', '/oauth/servers', serverBody('auth', '/elsewhere/token'));
    expect(res).toMatchObject({ status: 409, body: { error: 'oauth server name is already registered' } });
  });

  test("409 on DELETE while an API's oauth2 plugin references it; the message names the API", async () => {
    await call('POST', '/oauth/servers', serverBody('auth'));
    await call('POST', '/apis', apiBody('orders', { plugins: oauth2('auth') }));
    const res = await call('DELETE', '/oauth/servers/auth');
    expect(res.status).toBe(409);
    expect(res.body.error).toContain('"orders"');
    expect((await call('GET', '/oauth/servers/auth')).status).toBe(200);
    await call('PUT', '/apis/orders', { plugins: [] });
    expect((await call('DELETE', '/oauth/servers/auth')).status).toBe(204);
  });

  test("an endpoint on an API's listen path → 409; an API on an endpoint's path → 409", async () => {
    await call('POST', '/apis', apiBody('a', {}, { listen_path: '/a/token', methods: ['POST'] }));
    expect((await call('POST', '/oauth/servers', serverBody('auth', '/a/token'))).status).toBe(409);
    await call('POST', '/oauth/servers', serverBody('auth2'));
    const res = await call('POST', '/apis', apiBody('b', {}, { listen_path: '/auth2/token', methods: ['POST'] }));
    expect(res).toMatchObject({ status: 409, body: { error: 'api listen path is already registered' } });
  });

  test('invalid server → 400, nothing stored', async () => {
    const res = await call('POST', '/oauth/servers', { ...serverBody('auth'), token_strategy: { name: 'magic' } });
    expect(res.status).toBe(400);
    expect(res.body.error).toContain('token_strategy.name');
    expect((await call('GET', '/oauth/servers')).body).toEqual([]);
  });
});

describe('routing of the admin API itself', () => {
  test('unknown path → 404 {"error":"not found"}', async () => {
    const res = await call('GET', '/nope');
    expect(res).toMatchObject({ status: 404, body: { error: 'not found' } });
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  });

  test('unsupported method on a known path → 405 with Allow', async () => {
    const res = await call('DELETE', '/apis');
    expect(res).toMatchObject({ status: 405, body: { error: 'method not allowed' } });
    expect(res.headers.get('allow')).toBe('GET, HEAD, POST');
  });
});

describe('/dataplanes', () => {
  test('lists a connected data plane with its ACKed version, and drops it when the stream closes', async () => {
    expect((await call('GET', '/dataplanes')).body).toEqual([]);
    const client = new proto.Client(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
    const stream = (
      client as unknown as { StreamSnapshots(): grpc.ClientDuplexStream<object, { nonce: string; snapshot: { version: number } }> }
    ).StreamSnapshots();
    stream.on('error', () => undefined);
    stream.on('data', (push) => stream.write({ ack: { version: push.snapshot.version, nonce: push.nonce } }));
    stream.write({ hello: { id: 'dp-1', hostname: 'host-1', proxy_address: '10.0.0.1:8080' } });

    let list: Array<Record<string, unknown>> = [];
    for (let i = 0; i < 100 && !list[0]?.last_ack; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      list = (await call('GET', '/dataplanes')).body;
    }
    expect(list).toEqual([
      {
        id: 'dp-1',
        hostname: 'host-1',
        address: expect.stringContaining('127.0.0.1'),
        proxy_address: '10.0.0.1:8080',
        software_version: '',
        auth: { method: 'insecure' },
        connected_since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
        version: 1,
        hash: builder.current().hash,
        last_ack: { version: 1, at: expect.any(String) },
        last_nack: null,
      },
    ]);

    stream.cancel();
    client.close();
    for (let i = 0; i < 100 && list.length > 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      list = (await call('GET', '/dataplanes')).body;
    }
    expect(list).toEqual([]);
  });
});
