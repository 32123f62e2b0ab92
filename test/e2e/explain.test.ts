/**
 * POST /explain on a real control plane: the route that would serve a request, the upstream URL
 * after rewriting, the plugins in pipeline order, and every losing candidate with its reasons.
 */
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';

const TARGET = 'http://127.0.0.1:9';
const VIEWER = { username: 'viewer', password: 'viewer-password-long-enough' };

let cp: ControlPlane;
let admin: AdminClient;

beforeAll(async () => {
  cp = await startControlPlane({ name: 'explain-cp', env: { ADMIN_VIEWER_USER: VIEWER.username, ADMIN_VIEWER_PASSWORD: VIEWER.password } });
  admin = await createAdminClient(cp);
  const apis = [
    apiDefinition({
      name: 'users',
      listenPath: '/users/*',
      targets: [`${TARGET}/base`],
      stripPath: true,
      plugins: [
        { name: 'compression', config: {} },
        { name: 'cors', config: { domains: ['https://app.example.com'] } },
        { name: 'body_limit', enabled: false, config: { limit: '1KB' } },
      ],
    }),
    apiDefinition({ name: 'users-write', listenPath: '/users/*', methods: ['POST', 'PUT'], targets: [TARGET] }),
    apiDefinition({ name: 'users-tenant', listenPath: '/users/*', hosts: ['tenant.example.com'], targets: [TARGET] }),
    apiDefinition({ name: 'any-section', listenPath: '/{section}/*', targets: [TARGET] }),
    apiDefinition({ name: 'users-old', listenPath: '/users/{id}', targets: [TARGET], active: false }),
  ];
  for (const api of apis) expect((await admin.createApi(api)).status).toBe(201);
});

afterAll(async () => {
  await cp?.dispose();
});

const explain = (body: unknown, token?: string) => admin.request('POST', '/explain', { body, ...(token ? { token } : {}) });
const byName = (candidates: Array<{ name: string }>) => Object.fromEntries(candidates.map((c) => [c.name, c]));

test('matched: the route, its upstream URL after rewriting, its enabled plugins in pipeline order, the snapshot', async () => {
  const res = await explain({ method: 'GET', path: '/users/42/profile?x=1', headers: { Host: 'gw.example.com' } });
  expect(res.status).toBe(200);
  expect(res.body.route).toMatchObject({ kind: 'api', name: 'users', listen_path: '/users/*', matched_path: '/users' });
  expect(res.body.request).toEqual({ method: 'GET', host: 'gw.example.com', path: '/users/42/profile', query: 'x=1' });
  expect(res.body.upstreams).toEqual([{ target: `${TARGET}/base`, weight: 1, url: `${TARGET}/base/42/profile?x=1`, host_header: '127.0.0.1:9' }]);
  expect(res.body.plugins).toEqual(['cors', 'compression']);
  expect(res.body.snapshot).toEqual({ version: (await admin.readyz()).body.snapshot.version, hash: expect.any(String) });
});

test('host and method mismatches, priority loss and inactive APIs are named', async () => {
  const res = await explain({ method: 'GET', host: 'gw.example.com', path: '/users/42' });
  expect(res.body.route.name).toBe('users');
  const c = byName(res.body.candidates);
  expect(Object.keys(c).sort()).toEqual(['any-section', 'users-old', 'users-tenant', 'users-write']);
  expect(c['users-write']).toMatchObject({ reasons: ['method_mismatch'], details: ['method GET is not one of POST, PUT'] });
  expect(c['users-tenant']).toMatchObject({ reasons: ['host_mismatch'], details: ['host gw.example.com matches none of tenant.example.com'] });
  expect(c['any-section']).toMatchObject({ reasons: ['lower_priority'], outranked_by: { kind: 'api', name: 'users', rule: 'longer_prefix' } });
  expect(c['users-old']).toMatchObject({ active: false, reasons: ['inactive'] });
});

test('priority: more conditions win over the same listen_path', async () => {
  const res = await explain({ method: 'POST', path: '/users/42' });
  expect(res.body.route.name).toBe('users-write');
  expect(byName(res.body.candidates).users).toMatchObject({ reasons: ['lower_priority'], outranked_by: { name: 'users-write', rule: 'more_conditions' } });
});

test('no match: route null, no upstreams, the reasons of every candidate', async () => {
  const res = await explain({ method: 'GET', host: 'other.example.com', path: '/' });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ route: null, upstreams: [], plugins: [] });
  expect(res.body.candidates.map((c: { name: string; reasons: string[] }) => [c.name, c.reasons])).toEqual([['any-section', ['path_mismatch']]]);
});

test.each([
  ['method missing', { path: '/x' }, 'method is required'],
  ['method not a token', { method: 'GE T', path: '/x' }, 'method must be an HTTP method'],
  ['path missing', { method: 'GET' }, 'path is required'],
  ['path not absolute', { method: 'GET', path: 'x' }, 'path must start with /'],
  ['header value not a string', { method: 'GET', path: '/x', headers: { a: 1 } }, 'headers.a must be a string'],
  ['body not an object', [1], 'request body must be a JSON object'],
])('400 naming the field: %s', async (_name, body, message) => {
  const res = await explain(body);
  expect({ status: res.status, error: res.body.error }).toEqual({ status: 400, error: message });
});

test('401 without a token; a viewer (read-only) may explain', async () => {
  expect((await admin.request('POST', '/explain', { body: { method: 'GET', path: '/' }, token: null })).status).toBe(401);
  const viewer = await createAdminClient({ adminUrl: cp.adminUrl, ...VIEWER });
  expect((await viewer.request('POST', '/explain', { body: { method: 'GET', path: '/users/1' } })).body.route.name).toBe('users');
});

test('header conditions: names in any case; one name given in two cases is read as node joins a repeated header', async () => {
  for (const api of [
    apiDefinition({ name: 'hdr-v1', listenPath: '/hdr/*', targets: [TARGET] }),
    apiDefinition({ name: 'hdr-v2', listenPath: '/hdr/*', matchHeaders: { 'Accept-Version': ['v2'] }, targets: [TARGET] }),
  ]) {
    expect((await admin.createApi(api)).status).toBe(201);
  }
  try {
    expect((await explain({ method: 'GET', path: '/hdr/a', headers: { 'ACCEPT-version': 'v2' } })).body.route.name).toBe('hdr-v2');
    const joined = await explain({ method: 'GET', path: '/hdr/a', headers: { 'Accept-Version': 'v1', 'accept-version': 'v3' } });
    expect(joined.body.route.name).toBe('hdr-v1');
    expect(byName(joined.body.candidates)['hdr-v2']).toMatchObject({
      reasons: ['header_mismatch'],
      details: ['header accept-version is "v1, v3"; the route requires "v2"'],
    });
    expect((await explain({ method: 'GET', path: '/hdr/a', headers: { 'Accept-Version': 'v1', 'accept-version': 'v2' } })).body.route.name).toBe('hdr-v2');
  } finally {
    for (const name of ['hdr-v1', 'hdr-v2']) await admin.deleteApi(name);
  }
});
