/**
 * GET /openapi.json against the live admin API of a real control plane: one walk drives every
 * documented operation through each status it documents, and fails when a documented status is
 * never produced, when a response has an undocumented status, or when a body does not validate
 * (ajv, JSON Schema 2020-12) against the schema documented for that status.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import Ajv2020Module from 'ajv/dist/2020.js';
import { createAdminClient, type AdminClient, type AdminRequestOptions, type AdminResponse } from '../helpers/admin-client.js';
import { httpRequest } from '../helpers/http-request.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';

/** ajv is CommonJS: under ESM its class is the module's `default` (or the module itself, through ts-jest). */
const Ajv2020 = ((Ajv2020Module as unknown as { default?: unknown }).default ?? Ajv2020Module) as typeof Ajv2020Module.default;

type Doc = {
  paths: Record<string, Record<string, { parameters?: Array<{ name: string }>; responses: Record<string, { content?: Record<string, unknown> }> }>>;
};

const TARGET = 'http://127.0.0.1:9';
const VIEWER = { username: 'viewer', password: 'viewer-password-long-enough' };

const api = (name: string, listenPath = `/${name}/*`, extra: Record<string, unknown> = {}) => ({
  name,
  proxy: { listen_path: listenPath, upstreams: { balancing: 'roundrobin', targets: [{ target: TARGET }] } },
  ...extra,
});
const server = (name: string, tokenPath = `/${name}/token`) => ({
  name,
  oauth_endpoints: { token: { listen_path: tokenPath, upstreams: { balancing: 'roundrobin', targets: [{ target: TARGET }] } } },
  token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'a-shared-secret-of-some-length-0123' }] },
});

let cp: ControlPlane;
let admin: AdminClient;
let viewer: AdminClient;
let doc: Doc;

beforeAll(async () => {
  cp = await startControlPlane({
    name: 'openapi-cp',
    env: { ADMIN_VIEWER_USER: VIEWER.username, ADMIN_VIEWER_PASSWORD: VIEWER.password, ADMIN_LOGIN_FREE_FAILURES: '1' },
  });
  admin = await createAdminClient(cp);
  viewer = await createAdminClient({ adminUrl: cp.adminUrl, ...VIEWER });
  doc = (await admin.request('GET', '/openapi.json', { token: null })).body;
});

afterAll(async () => {
  await cp?.dispose();
});

test('GET /openapi.json is public JSON, an OpenAPI 3.1 document', async () => {
  const res = await httpRequest(`${cp.adminUrl}/openapi.json`);
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(JSON.parse(res.body.toString()).openapi).toBe('3.1.0');
});

test('every documented (operation, status) is produced by the live API, nothing undocumented is, every body validates', async () => {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema(doc, 'openapi.json');
  const pointer = (...tokens: string[]) => tokens.map((t) => encodeURIComponent(t.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');

  const produced = new Set<string>();
  const problems: string[] = [];

  /** One call of documented operation `method path` (OpenAPI path), to the concrete `url`. */
  async function call(method: string, path: string, url: string, options: AdminRequestOptions = {}, client = admin): Promise<AdminResponse> {
    const res = await client.request(method, url, options);
    const key = `${method} ${path} ${res.status}`;
    produced.add(key);
    const response = doc.paths[path]?.[method.toLowerCase()]?.responses[String(res.status)];
    if (!response) {
      problems.push(`undocumented: ${key} ${res.text.slice(0, 200)}`);
      return res;
    }
    const schema = response.content?.['application/json'];
    if (schema) {
      const validate = ajv.compile({
        $ref: `openapi.json#/${pointer('paths', path, method.toLowerCase(), 'responses', String(res.status), 'content', 'application/json', 'schema')}`,
      });
      if (!validate(res.body)) problems.push(`invalid body: ${key}: ${ajv.errorsText(validate.errors)}`);
    }
    return res;
  }
  const expectStatus = async (status: number, promise: Promise<AdminResponse>) => {
    const res = await promise;
    expect({ status: res.status, body: res.body }).toEqual({ status, body: res.body });
  };

  const operations = Object.entries(doc.paths).flatMap(([path, methods]) => Object.keys(methods).map((m) => ({ method: m.toUpperCase(), path })));
  const concrete = (path: string) => path.replace('{name}', 'no-such-item').replace('{version}', '1');
  const documents = (op: { method: string; path: string }, status: number) => String(status) in doc.paths[op.path][op.method.toLowerCase()].responses;

  // Generic statuses, from the flags each operation is documented with.
  for (const op of operations) {
    const url = concrete(op.path);
    if (documents(op, 401) && op.path !== '/login') await expectStatus(401, call(op.method, op.path, url, { token: null }));
    // A read's 403 is its secrets=include, which only an admin may ask for.
    const exportsSecrets = (doc.paths[op.path][op.method.toLowerCase()].parameters ?? []).some((p) => p.name === 'secrets');
    if (documents(op, 403)) await expectStatus(403, call(op.method, op.path, exportsSecrets ? `${url}?secrets=include` : url, { body: {} }, viewer));
    if (documents(op, 413)) await expectStatus(413, call(op.method, op.path, url, { rawBody: `{"x":"${'a'.repeat(1024 * 1024 + 16)}"}` }));
    if (documents(op, 400)) await expectStatus(400, call(op.method, op.path, url, { rawBody: '{"not json' }));
  }

  // Public endpoints.
  await expectStatus(200, call('GET', '/healthz', '/healthz', { token: null }));
  await expectStatus(200, call('GET', '/readyz', '/readyz', { token: null }));
  await expectStatus(200, call('GET', '/metrics', '/metrics', { token: null }));
  await expectStatus(200, call('GET', '/openapi.json', '/openapi.json', { token: null }));
  await expectStatus(200, call('POST', '/login', '/login', { token: null, body: { username: cp.username, password: cp.password } }));

  /**
   * The walk every collection shares: two creates, a duplicate name (409), list, get, a missing name
   * (404), PUT and PATCH (200, 404 when missing, 409 when `conflict` collides the second item with the
   * first), then the second item deleted (204, then 404).
   */
  async function crud(collection: string, [first, second]: [string, string], c: { body(name: string): unknown; update: unknown; conflict?: unknown }) {
    const item = `${collection}/{name}`;
    await expectStatus(201, call('POST', collection, collection, { body: c.body(first) }));
    await expectStatus(201, call('POST', collection, collection, { body: c.body(second) }));
    await expectStatus(409, call('POST', collection, collection, { body: c.body(first) }));
    await expectStatus(200, call('GET', collection, collection));
    await expectStatus(200, call('GET', collection, `${collection}?limit=1`));
    await expectStatus(200, call('GET', collection, `${collection}?limit=1&after=${first}`));
    await expectStatus(400, call('GET', collection, `${collection}?limit=0`));
    await expectStatus(200, call('GET', item, `${collection}/${first}`));
    await expectStatus(404, call('GET', item, `${collection}/missing`));
    for (const method of ['PUT', 'PATCH']) {
      await expectStatus(200, call(method, item, `${collection}/${first}`, { body: c.update }));
      await expectStatus(404, call(method, item, `${collection}/missing`, { body: c.update }));
      if (c.conflict !== undefined) await expectStatus(409, call(method, item, `${collection}/${second}`, { body: c.conflict }));
    }
    await expectStatus(204, call('DELETE', item, `${collection}/${second}`));
    await expectStatus(404, call('DELETE', item, `${collection}/${second}`));
  }

  await crud('/apis', ['a1', 'a2'], { body: (name) => api(name), update: { active: true }, conflict: { proxy: { listen_path: '/a1/*' } } });
  await crud('/oauth/servers', ['s1', 's2'], {
    body: (name) => server(name),
    update: { token_strategy: { leeway: 5 } },
    conflict: { oauth_endpoints: { token: { listen_path: '/s1/token' } } },
  });
  // A server an oauth2 plugin refers to cannot be deleted.
  await expectStatus(
    201,
    call('POST', '/apis', '/apis', { body: api('protected', '/protected/*', { plugins: [{ name: 'oauth2', config: { server_name: 's1' } }] }) }),
  );
  await expectStatus(409, call('DELETE', '/oauth/servers/{name}', '/oauth/servers/s1'));
  await expectStatus(204, call('DELETE', '/apis/{name}', '/apis/protected'));
  const users = '/credentials/basic_auth';
  await crud(users, ['u1', 'u2'], { body: (username) => ({ username, password: `password-of-${username}` }), update: { password: 'password-new' } });
  // key_auth: created with a generated key (shown in the 201) and with a given one; a PUT may not take another's key (409).
  const keys = '/credentials/key_auth';
  await expectStatus(201, call('POST', keys, keys, { body: { username: 'k0' } }));
  await crud(keys, ['k1', 'k2'], {
    body: (username) => ({ username, key: `key-of-${username}-0123456789` }),
    update: { key: 'key-new-0123456789' },
    conflict: { key: 'key-new-0123456789' },
  });

  // Data planes, explain.
  await expectStatus(200, call('GET', '/dataplanes', '/dataplanes'));
  await expectStatus(200, call('POST', '/explain', '/explain', { body: { method: 'GET', path: '/a1/x' } }));
  await expectStatus(200, call('POST', '/explain', '/explain', { body: { method: 'GET', path: '/nothing' } }, viewer));

  // Configuration and history.
  const exported = await call('GET', '/config', '/config');
  expect(exported.status).toBe(200);
  await expectStatus(200, call('GET', '/config', '/config?secrets=include'));
  await expectStatus(400, call('GET', '/config', '/config?secrets=yes'));
  await expectStatus(200, call('PUT', '/config', '/config?dry_run=true', { body: exported.body }));
  await expectStatus(200, call('PUT', '/config', '/config', { body: { ...exported.body, apis: [...exported.body.apis, api('a3')] } }));
  await expectStatus(412, call('PUT', '/config', '/config', { body: exported.body, headers: { 'if-match': exported.headers.etag as string } }));
  await expectStatus(200, call('GET', '/config/history', '/config/history'));
  const history = (await admin.request('GET', '/config/history')).body as Array<{ version: number }>;
  const oldest = history[history.length - 1].version;
  await expectStatus(200, call('GET', '/config/history/{version}', `/config/history/${oldest}`));
  await expectStatus(404, call('GET', '/config/history/{version}', '/config/history/999999'));
  await expectStatus(200, call('POST', '/config/rollback/{version}', `/config/rollback/${history[0].version}`));
  await expectStatus(404, call('POST', '/config/rollback/{version}', '/config/rollback/999999'));

  // Login failures last: with ADMIN_LOGIN_FREE_FAILURES=1 the first one blocks this client address.
  await expectStatus(401, call('POST', '/login', '/login', { token: null, body: { username: 'nobody', password: 'wrong-password' } }));
  await expectStatus(429, call('POST', '/login', '/login', { token: null, body: { username: 'nobody', password: 'wrong-password' } }));

  // The store's journal cannot be appended to any more (a directory took its place): every write answers 503.
  await rm(join(cp.dataDir, 'store.journal'));
  await mkdir(join(cp.dataDir, 'store.journal'));
  const down: Array<[method: string, path: string, url: string, body?: unknown]> = [
    ['POST', '/apis', '/apis', api('a4')],
    ['PUT', '/apis/{name}', '/apis/a1', { active: false }],
    ['PATCH', '/apis/{name}', '/apis/a1', { active: false }],
    ['DELETE', '/apis/{name}', '/apis/a1'],
    ['POST', '/oauth/servers', '/oauth/servers', server('s3')],
    ['PUT', '/oauth/servers/{name}', '/oauth/servers/s1', { token_strategy: { leeway: 7 } }],
    ['PATCH', '/oauth/servers/{name}', '/oauth/servers/s1', { token_strategy: { leeway: 8 } }],
    ['DELETE', '/oauth/servers/{name}', '/oauth/servers/s1'],
    ['POST', users, users, { username: 'u3', password: 'password-three' }],
    ['PUT', `${users}/{name}`, `${users}/u1`, { password: 'password-other' }],
    ['PATCH', `${users}/{name}`, `${users}/u1`, { password: 'password-other' }],
    ['DELETE', `${users}/{name}`, `${users}/u1`],
    ['POST', keys, keys, { username: 'k3' }],
    ['PUT', `${keys}/{name}`, `${keys}/k1`, { key: 'key-other-0123456789' }],
    ['PATCH', `${keys}/{name}`, `${keys}/k1`, { key: 'key-other-0123456789' }],
    ['DELETE', `${keys}/{name}`, `${keys}/k1`],
    ['PUT', '/config', '/config', { apis: [], oauth_servers: [], basic_auth_credentials: [] }],
    ['POST', '/config/rollback/{version}', `/config/rollback/${oldest}`],
  ];
  for (const [method, path, url, body] of down) await expectStatus(503, call(method, path, url, body === undefined ? {} : { body }));
  // The data directory goes away: not ready.
  await rm(cp.dataDir, { recursive: true, force: true });
  await expectStatus(503, call('GET', '/readyz', '/readyz', { token: null }));

  const missing = operations.flatMap((op) =>
    Object.keys(doc.paths[op.path][op.method.toLowerCase()].responses)
      .filter((status) => status !== 'default' && !produced.has(`${op.method} ${op.path} ${status}`))
      .map((status) => `never produced: ${op.method} ${op.path} ${status}`),
  );
  expect([...missing, ...problems]).toEqual([]);
});
