/**
 * The administration API of a real control plane process (docs/admin-api.md "Administration API"): admin authentication,
 * validation (400 naming the field, nothing stored), conflicts, not-found, merge-patch PUT,
 * defaults on read, Location, body limits, X-Snapshot-Version, unauthenticated probes.
 */
import { createHmac } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { createAdminClient, type AdminClient, type AdminResponse } from '../helpers/admin-client.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { proxyDefaults } from '../helpers/proxy-defaults.js';

let cp: ControlPlane;
let admin: AdminClient;
/** A second CP: short-lived tokens (ADMIN_TOKEN_TTL=2) and a generated password. */
let shortCp: ControlPlane;
let shortAdmin: AdminClient;

const TARGET = 'http://127.0.0.1:9';

function validApi(name: string, listenPath = `/${name}/*`): Record<string, any> {
  return { name, proxy: { listen_path: listenPath, upstreams: { balancing: 'roundrobin', targets: [{ target: TARGET }] } } };
}

function oauthServer(name: string): Record<string, any> {
  return {
    name,
    oauth_endpoints: {
      token: {
        listen_path: `/${name}/token`,
        upstreams: { balancing: 'roundrobin', targets: [{ target: `${TARGET}/token` }] },
        strip_path: true,
        methods: ['POST'],
      },
    },
    token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'a-shared-secret-of-some-length-0123' }] },
  };
}

function expectJsonError(res: AdminResponse, status: number, message?: string | RegExp): void {
  expect({ status: res.status, body: res.text }).toEqual({ status, body: expect.any(String) });
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(typeof res.body?.error).toBe('string');
  if (typeof message === 'string') expect(res.body.error).toContain(message);
  else if (message) expect(res.body.error).toMatch(message);
}

async function snapshotVersion(): Promise<number> {
  const res = await admin.readyz();
  return res.body.snapshot.version;
}

beforeAll(async () => {
  [cp, shortCp] = await Promise.all([
    startControlPlane({ name: 'control-plane (admin)' }),
    startControlPlane({ name: 'control-plane (ttl 2s)', env: { ADMIN_TOKEN_TTL: '2' }, generatedPassword: true }),
  ]);
  [admin, shortAdmin] = await Promise.all([createAdminClient(cp), createAdminClient(shortCp)]);
});

afterAll(async () => {
  const statuses = await Promise.all([cp, shortCp].filter(Boolean).map((c) => c.stop()));
  await Promise.all([cp, shortCp].filter(Boolean).map((c) => c.dispose()));
  expect(statuses.map((s) => s.code)).toEqual(statuses.map(() => 0));
});

describe('login', () => {
  test('right credentials: 200 with a bearer token', async () => {
    const res = await admin.login();
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ access_token: expect.any(String), token_type: 'Bearer', expires_in: expect.any(Number) });
    expect(res.body.expires_in).toBeGreaterThan(0);
  });

  test.each([
    { row: 'wrong password', username: 'admin', password: 'wrong-password' },
    { row: 'wrong user', username: 'root', password: undefined },
    { row: 'empty password', username: 'admin', password: '' },
  ])('$row: 401', async ({ username, password }) => {
    const res = await admin.request('POST', '/login', { body: { username, password: password ?? cp.password }, token: null });
    expectJsonError(res, 401);
    expect(res.text).not.toContain(cp.password);
  });

  test('generated password: written to DATA_DIR/admin-password with mode 0600, and logs its location', async () => {
    const file = join(shortCp.dataDir, 'admin-password');
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(shortCp.process.lines().some((line) => line.raw.includes(file))).toBe(true);
    expect(shortAdmin.token).not.toBe('');
  });
});

describe('admin authentication', () => {
  const b64url = (value: string | Buffer): string => Buffer.from(value).toString('base64url');

  function forged(kind: 'tampered' | 'alg-none'): string {
    const [header, payload] = admin.token.split('.');
    if (kind === 'alg-none') return `${b64url(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${payload}.`;
    const signature = createHmac('sha256', 'not-the-secret').update(`${header}.${payload}`).digest('base64url');
    return `${header}.${payload}.${signature}`;
  }

  test.each([
    { row: 'missing Authorization', authorization: undefined as string | undefined },
    { row: 'scheme only', authorization: 'Bearer' },
    { row: 'not a token', authorization: 'Bearer not-a-jwt' },
    { row: 'Basic credentials', authorization: 'Basic YWRtaW46YWRtaW4=' },
    { row: 'token with a forged signature', authorization: 'forged:tampered' },
    { row: 'alg none token', authorization: 'forged:alg-none' },
  ])('$row → 401', async ({ authorization }) => {
    let header = authorization;
    if (header?.startsWith('forged:')) header = `Bearer ${forged(header.slice(7) as 'tampered' | 'alg-none')}`;
    const res = await admin.request('GET', '/apis', header === undefined ? { token: null } : { authorization: header });
    expectJsonError(res, 401);
  });

  test('token signed by another control plane → 401, while that one still accepts it', async () => {
    // The other CP's tokens live 2 s: a fresh one, accepted there, and still unexpired once refused
    // here, so the 401 is the signature's and not the clock's.
    await shortAdmin.login();
    expect((await shortAdmin.listApis()).status).toBe(200);
    const res = await admin.request('GET', '/apis', { authorization: `Bearer ${shortAdmin.token}` });
    const { exp } = JSON.parse(Buffer.from(shortAdmin.token.split('.')[1], 'base64url').toString()) as { exp: number };
    expect(exp * 1000).toBeGreaterThan(Date.now());
    expectJsonError(res, 401);
  });

  test.each([
    ['GET', '/apis'],
    ['POST', '/apis'],
    ['GET', '/apis/anything'],
    ['PUT', '/apis/anything'],
    ['PATCH', '/apis/anything'],
    ['DELETE', '/apis/anything'],
    ['GET', '/oauth/servers'],
    ['POST', '/oauth/servers'],
    ['DELETE', '/oauth/servers/anything'],
    ['GET', '/dataplanes'],
  ])('%s %s needs a token', async (method, path) => {
    const body = method === 'POST' || method === 'PUT' || method === 'PATCH' ? validApi('sneaky') : undefined;
    const res = await admin.request(method, path, { token: null, body });
    expectJsonError(res, 401);
  });

  test('nothing was written by unauthenticated calls', async () => {
    // Writes of its own: the rows above may run after this test.
    for (const [method, path] of [
      ['POST', '/apis'],
      ['PUT', '/apis/sneaky'],
      ['PATCH', '/apis/sneaky'],
    ]) {
      expectJsonError(await admin.request(method, path, { token: null, body: validApi('sneaky') }), 401);
    }
    const res = await admin.listApis();
    expect(res.body.map((api: { name: string }) => api.name)).not.toContain('sneaky');
  });

  test('an expired token is refused (ADMIN_TOKEN_TTL=2)', async () => {
    const login = await shortAdmin.login();
    expect(login.body.expires_in).toBe(2);
    expect((await shortAdmin.listApis()).status).toBe(200);
    const expired = await pollUntil(
      async () => {
        const res = await shortAdmin.listApis();
        return res.status === 200 ? undefined : res;
      },
      { what: 'the 2 s admin token to expire', timeoutMs: 8_000, intervalMs: 250, details: () => shortCp.recentLogs() },
    );
    expectJsonError(expired, 401);
  });

  test.each(['/healthz', '/readyz', '/metrics'])('%s needs no token', async (path) => {
    const res = await httpRequest(`${cp.adminUrl}${path}`);
    expect(res.status).toBe(200);
    if (path === '/metrics') expect(res.headers['content-type']).toMatch(/^text\/plain/);
    if (path === '/readyz') expect(res.json).toMatchObject({ ready: true, snapshot: { version: expect.any(Number), hash: expect.any(String) } });
  });
});

describe('create and read', () => {
  test('POST /apis: 201, Location, X-Snapshot-Version, body = stored definition with defaults', async () => {
    const before = await snapshotVersion();
    const res = await admin.createApi(validApi('defaults'));
    expect(res.status).toBe(201);
    expect(res.headers.location).toBe('/apis/defaults');
    expect(res.snapshotVersion).toBeGreaterThan(before);
    expect(res.body).toMatchObject({
      name: 'defaults',
      active: true,
      hosts: [],
      plugins: [],
      proxy: {
        listen_path: '/defaults/*',
        ...proxyDefaults(),
        upstreams: { balancing: 'roundrobin', targets: [{ target: TARGET }] },
      },
    });
    const read = await admin.getApi('defaults');
    expect(read.status).toBe(200);
    expect(read.body).toEqual(res.body);
    const listed = await admin.listApis();
    expect(listed.body.find((api: { name: string }) => api.name === 'defaults')).toEqual(res.body);
    expect(await snapshotVersion()).toBe(res.snapshotVersion);
  });

  test('GET /apis?limit pages in name order: Link rel="next" until the last page, X-Total-Count, every API once', async () => {
    for (const name of ['page-e', 'page-a', 'page-c', 'page-b', 'page-d']) expect((await admin.createApi(validApi(name))).status).toBe(201);
    const whole = (await admin.listApis()).body as Array<{ name: string }>;
    const walked: Array<{ name: string }> = [];
    let url: string | null = '/apis?limit=2';
    while (url !== null) {
      const page: AdminResponse = await admin.request('GET', url);
      expect(page.status).toBe(200);
      expect(page.body.length).toBeLessThanOrEqual(2);
      expect(page.headers['x-total-count']).toBe(String(whole.length));
      walked.push(...page.body);
      const link = page.headers.link as string | undefined;
      url = link === undefined ? null : /^<([^>]+)>; rel="next"$/.exec(link)![1]!;
    }
    const names = (list: Array<{ name: string }>) => list.map((api) => api.name);
    expect(names(walked)).toEqual(names(whole).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    expect(walked).toEqual(expect.arrayContaining(whole));
    expect(names(walked).filter((n) => n.startsWith('page-'))).toEqual(['page-a', 'page-b', 'page-c', 'page-d', 'page-e']);
    const afterB = await admin.request('GET', '/apis?limit=2&after=page-b');
    expect(names(afterB.body)).toEqual(['page-c', 'page-d']);
    const bad = await admin.request('GET', '/apis?limit=5000');
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'limit must be a whole number from 1 to 1000' });
  });

  test('aliases are folded: proxy.hosts → hosts, balancing rr → roundrobin', async () => {
    const definition = validApi('aliases');
    definition.proxy.hosts = ['alias.test'];
    definition.proxy.upstreams.balancing = 'rr';
    const res = await admin.createApi(definition);
    expect(res.status).toBe(201);
    expect(res.body.hosts).toEqual(['alias.test']);
    expect(res.body.proxy.hosts).toBeUndefined();
    expect(res.body.proxy.upstreams.balancing).toBe('roundrobin');
  });

  test.each([
    { row: 'GET', method: 'GET' },
    { row: 'PUT', method: 'PUT' },
    { row: 'DELETE', method: 'DELETE' },
  ])('$row unknown API → 404 "api definition not found"', async ({ method }) => {
    const res = await admin.request(method, '/apis/ghost', { body: method === 'PUT' ? { active: false } : undefined });
    expectJsonError(res, 404, 'api definition not found');
  });

  test('unknown admin path → 404 JSON', async () => {
    expectJsonError(await admin.request('GET', '/no/such/thing'), 404);
  });
});

describe('validation: 400 naming the field, nothing stored', () => {
  const mutate = (change: (d: Record<string, any>) => void): Record<string, any> => {
    const definition = validApi('invalid');
    change(definition);
    return definition;
  };

  test.each([
    { row: 'missing name', body: mutate((d) => delete d.name), message: 'name is required' },
    { row: 'name with bad characters', body: mutate((d) => (d.name = 'bad name!')), message: 'name' },
    { row: 'name longer than 128', body: mutate((d) => (d.name = 'n'.repeat(129))), message: 'name' },
    { row: 'no routing condition', body: mutate((d) => delete d.proxy.listen_path), message: 'proxy.listen_path is required' },
    { row: 'listen_path without leading /', body: mutate((d) => (d.proxy.listen_path = 'invalid/*')), message: 'proxy.listen_path' },
    { row: 'listen_path with a bad regex', body: mutate((d) => (d.proxy.listen_path = '/r/{id:[a-}/*')), message: 'proxy.listen_path' },
    { row: 'no targets', body: mutate((d) => (d.proxy.upstreams.targets = [])), message: 'proxy.upstreams.targets' },
    {
      row: 'target not a URL',
      body: mutate((d) => (d.proxy.upstreams.targets = [{ target: 'not a url' }])),
      message: 'proxy.upstreams.targets[0].target is not a valid URL',
    },
    {
      row: 'target not http(s)',
      body: mutate((d) => (d.proxy.upstreams.targets = [{ target: 'ftp://127.0.0.1/x' }])),
      message: 'proxy.upstreams.targets[0].target',
    },
    { row: 'second target bad', body: mutate((d) => d.proxy.upstreams.targets.push({ target: '//relative' })), message: 'proxy.upstreams.targets[1].target' },
    {
      row: 'undefined placeholder in a target',
      body: mutate((d) => (d.proxy.upstreams.targets = [{ target: 'http://{nope}.test/' }])),
      message: 'proxy.upstreams.targets[0].target',
    },
    { row: 'unknown balancing', body: mutate((d) => (d.proxy.upstreams.balancing = 'random')), message: 'proxy.upstreams.balancing' },
    { row: 'method not an HTTP token', body: mutate((d) => (d.proxy.methods = ['GE T'])), message: 'proxy.methods' },
    { row: 'active not a boolean', body: mutate((d) => (d.active = 'yes')), message: 'active' },
    { row: 'hosts not an array', body: mutate((d) => (d.hosts = 'a.test')), message: 'hosts' },
    { row: 'bad duration', body: mutate((d) => (d.proxy.forwarding_timeouts = { dial_timeout: 'soon' })), message: 'proxy.forwarding_timeouts.dial_timeout' },
    {
      row: 'unknown plugin',
      body: mutate((d) => (d.plugins = [{ name: 'no_such_plugin', enabled: true, config: {} }])),
      message: 'unknown plugin "no_such_plugin"',
    },
    {
      row: 'oauth2 naming a missing server',
      body: mutate((d) => (d.plugins = [{ name: 'oauth2', enabled: true, config: { server_name: 'no-such-server' } }])),
      message: /server_name|no-such-server/,
    },
    { row: 'body is an array', body: [validApi('invalid')], message: undefined },
    { row: 'body is a string', body: 'definition', message: undefined },
  ])('POST $row', async ({ body, message }) => {
    const before = await admin.listApis();
    const version = await snapshotVersion();
    const res = await admin.createApi(body);
    expectJsonError(res, 400, message);
    const after = await admin.listApis();
    expect(after.body).toEqual(before.body);
    expect(await snapshotVersion()).toBe(version);
  });

  test.each([
    { row: 'listen_path made invalid', patch: { proxy: { listen_path: 'relative' } }, message: 'proxy.listen_path' },
    { row: 'targets emptied', patch: { proxy: { upstreams: { targets: [] } } }, message: 'proxy.upstreams.targets' },
    { row: 'name differs from the path', patch: { name: 'other-name' }, message: 'name' },
  ])('PUT $row', async ({ patch, message }) => {
    expect((await admin.createApi(validApi('put-target'))).status).toBe(201);
    const before = await admin.getApi('put-target');
    const res = await admin.updateApi('put-target', patch);
    expectJsonError(res, 400, message);
    expect((await admin.getApi('put-target')).body).toEqual(before.body);
    expect((await admin.deleteApi('put-target')).status).toBe(204);
  });

  test('malformed JSON → 400', async () => {
    const before = await admin.listApis();
    expectJsonError(await admin.request('POST', '/apis', { rawBody: '{"name": "x", ' }), 400);
    expect((await admin.listApis()).body).toEqual(before.body);
  });

  test('body over 1 MiB → 413', async () => {
    const huge = JSON.stringify({ ...validApi('huge'), padding: 'x'.repeat(1024 * 1024 + 16) });
    const res = await admin.request('POST', '/apis', { rawBody: huge });
    expectJsonError(res, 413);
    expect((await admin.getApi('huge')).status).toBe(404);
  });
});

// Each test registers the listen path it collides with, under its own name: tests run in any order.
describe('conflicts', () => {
  test('duplicate name → 409 "api name is already registered"', async () => {
    expect((await admin.createApi(validApi('dup'))).status).toBe(201);
    const res = await admin.createApi(validApi('dup', '/elsewhere/*'));
    expectJsonError(res, 409, 'api name is already registered');
    expect((await admin.getApi('dup')).body.proxy.listen_path).toBe('/dup/*');
  });

  test('same listen_path, hosts and methods under another name → 409 "api listen path is already registered"', async () => {
    expect((await admin.createApi(validApi('dup-path-owner', '/dup-path/*'))).status).toBe(201);
    const res = await admin.createApi(validApi('dup-path', '/dup-path/*'));
    expectJsonError(res, 409, 'api listen path is already registered');
    expect((await admin.getApi('dup-path')).status).toBe(404);
  });

  test('same listen_path with different hosts is not a conflict', async () => {
    expect((await admin.createApi(validApi('dup-host-owner', '/dup-host/*'))).status).toBe(201);
    const definition = validApi('dup-path-host', '/dup-host/*');
    definition.hosts = ['other.test'];
    expect((await admin.createApi(definition)).status).toBe(201);
  });

  test('PUT moving onto a taken listen path → 409', async () => {
    expect((await admin.createApi(validApi('mover-owner', '/mover-taken/*'))).status).toBe(201);
    expect((await admin.createApi(validApi('mover'))).status).toBe(201);
    const res = await admin.updateApi('mover', { proxy: { listen_path: '/mover-taken/*' } });
    expectJsonError(res, 409, 'api listen path is already registered');
    expect((await admin.getApi('mover')).body.proxy.listen_path).toBe('/mover/*');
  });
});

// Each test patches an API of its own, created as it stood before any patch: tests run in any order.
describe('PUT is a JSON merge patch', () => {
  async function createPatched(name: string): Promise<Record<string, any>> {
    const created = await admin.createApi({ ...validApi(name), hosts: ['a.test'] });
    expect(created.status).toBe(201);
    return created.body;
  }

  beforeAll(async () => {
    expect((await admin.createOAuthServer(oauthServer('auth-srv'))).status).toBe(201);
  });

  test('a body with only plugins changes only the plugins (seed example)', async () => {
    const original = await createPatched('merge-plugins');
    const plugins = [{ name: 'oauth2', enabled: true, config: { server_name: 'auth-srv' } }];
    const res = await admin.updateApi('merge-plugins', { plugins });
    expect(res.status).toBe(200);
    expect(res.snapshotVersion).toBeGreaterThan(0);
    expect(res.body).toEqual({ ...original, plugins });
    expect((await admin.getApi('merge-plugins')).body).toEqual(res.body);
  });

  test('nested objects merge: proxy.strip_path alone keeps listen_path and targets', async () => {
    const original = await createPatched('merge-nested');
    const res = await admin.updateApi('merge-nested', { proxy: { strip_path: true } });
    expect(res.status).toBe(200);
    expect(res.body.proxy).toEqual({ ...original.proxy, strip_path: true });
  });

  test('arrays replace', async () => {
    await createPatched('merge-arrays');
    const res = await admin.updateApi('merge-arrays', { hosts: ['b.test', 'c.test'] });
    expect(res.body.hosts).toEqual(['b.test', 'c.test']);
  });

  test('null removes a member (its default comes back)', async () => {
    await createPatched('merge-null');
    const res = await admin.updateApi('merge-null', { hosts: null });
    expect(res.status).toBe(200);
    expect(res.body.hosts).toEqual([]);
  });

  test('PATCH has the same semantics; every write raises X-Snapshot-Version', async () => {
    await createPatched('merge-patch');
    const before = await snapshotVersion();
    const res = await admin.patchApi('merge-patch', { active: false });
    expect(res.status).toBe(200);
    expect(res.body.active).toBe(false);
    expect(res.body.proxy.listen_path).toBe('/merge-patch/*');
    expect(res.snapshotVersion).toBeGreaterThan(before);
  });

  test('DELETE → 204, then gone', async () => {
    await createPatched('merge-delete');
    const before = await snapshotVersion();
    const res = await admin.deleteApi('merge-delete');
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(res.snapshotVersion).toBeGreaterThan(before);
    expect((await admin.getApi('merge-delete')).status).toBe(404);
    expect((await admin.listApis()).body.map((api: { name: string }) => api.name)).not.toContain('merge-delete');
  });
});

// Each test creates the servers it needs, under its own names: tests run in any order.
describe('OAuth servers', () => {
  test('listed and readable, Location on create, duplicate → 409', async () => {
    expect((await admin.createOAuthServer(oauthServer('oauth-listed'))).status).toBe(201);
    const listed = await admin.listOAuthServers();
    expect(listed.status).toBe(200);
    expect(listed.body.map((s: { name: string }) => s.name)).toContain('oauth-listed');
    expect((await admin.getOAuthServer('oauth-listed')).body.name).toBe('oauth-listed');
    const res = await admin.createOAuthServer(oauthServer('oauth-located'));
    expect(res.status).toBe(201);
    expect(res.headers.location).toBe('/oauth/servers/oauth-located');
    expectJsonError(await admin.createOAuthServer(oauthServer('oauth-listed')), 409, 'oauth server name is already registered');
  });

  test('DELETE while an API references it → 409; once unreferenced → 204', async () => {
    expect((await admin.createOAuthServer(oauthServer('oauth-referenced'))).status).toBe(201);
    const api = { ...validApi('protected'), plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'oauth-referenced' } }] };
    expect((await admin.createApi(api)).status).toBe(201);
    expectJsonError(await admin.deleteOAuthServer('oauth-referenced'), 409);
    expect((await admin.getOAuthServer('oauth-referenced')).status).toBe(200);
    expect((await admin.updateApi('protected', { plugins: [] })).status).toBe(200);
    expect((await admin.deleteOAuthServer('oauth-referenced')).status).toBe(204);
    expectJsonError(await admin.getOAuthServer('oauth-referenced'), 404);
  });
});
