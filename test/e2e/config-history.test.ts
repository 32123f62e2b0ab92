/**
 * Declarative configuration with history on a real control plane (file store) and data plane:
 * GET /config → PUT /config round trip, dry-run diff, whole-config validation (400 naming the
 * item, nothing written), a history entry for every admin write, rollback served by the DP, and
 * the CONFIG_HISTORY bound (also across a restart).
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { startControlPlane, type ControlPlane } from '../helpers/start-control-plane.js';
import { startDataPlane, type DataPlane } from '../helpers/start-data-plane.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const USER_PASSWORD = 'correct horse battery';

let cp: ControlPlane;
let dp: DataPlane;
let admin: AdminClient;
let upstream: Upstream;

/** The file store's base and journal: a write that is refused changes neither. */
const storeFiles = async () => (await Promise.all(['store.json', 'store.journal'].map((f) => readFile(join(cp.dataDir, f), 'utf8')))).join('\n--\n');

const api = (name: string, listenPath: string, extra: Partial<Parameters<typeof apiDefinition>[0]> = {}) =>
  apiDefinition({ name, listenPath, targets: [upstream.url], ...extra });

const jwtServer = {
  name: 'auth',
  oauth_endpoints: { token: { listen_path: '/auth/token', upstreams: { targets: [{ target: 'http://127.0.0.1:9/token' }] } } },
  token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'a-shared-secret-of-some-length-0123' }] },
};

/** A configuration with every kind, built from a prefix so each test writes its own names. */
function fullConfig(prefix: string) {
  return {
    apis: [
      api(`${prefix}-open`, `/${prefix}/open/*`),
      api(`${prefix}-closed`, `/${prefix}/closed/*`, { plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'auth' } }] }),
    ],
    oauth_servers: [jwtServer],
    basic_auth_credentials: [{ username: `${prefix}-user`, password: USER_PASSWORD }],
  };
}

async function putConfig(body: unknown, query = '') {
  return admin.request('PUT', `/config${query}`, { body });
}

beforeAll(async () => {
  upstream = await startUpstream('config-upstream');
  cp = await startControlPlane({ name: 'cp-config' });
  dp = await startDataPlane({ controlPlaneAddr: cp.grpcAddr });
  admin = await createAdminClient(cp);
}, 60_000);

afterAll(async () => {
  await dp?.stop();
  await cp?.dispose();
  await upstream?.close();
});

test('export → import round trip: PUT /config of what GET returned changes nothing and GET returns it again', async () => {
  expect((await putConfig(fullConfig('rt'))).status).toBe(200);
  const exported = await admin.request('GET', '/config');
  expect(exported.status).toBe(200);
  expect(Object.keys(exported.body).sort()).toEqual(['apis', 'basic_auth_credentials', 'key_auth_credentials', 'oauth_servers']);
  // basic_auth users with their hash redacted (write-only), never the password; the marker written back keeps the hash
  expect(exported.body.basic_auth_credentials).toEqual([{ username: 'rt-user', password_hash: '<redacted>' }]);
  expect(exported.text).not.toContain(USER_PASSWORD);

  const reimport = await putConfig(exported.body);
  expect(reimport.status).toBe(200);
  expect(reimport.body.changed).toBe(false);
  expect(reimport.body.version).toBe(exported.snapshotVersion);
  expect((await admin.request('GET', '/config')).body).toEqual(exported.body);

  // The same plaintext password again keeps the stored hash: the hand-written file is idempotent too.
  expect((await putConfig(fullConfig('rt'))).body.changed).toBe(false);
});

test('?dry_run=true returns the diff per kind with names and writes nothing', async () => {
  await putConfig(fullConfig('dry'));
  const before = await admin.request('GET', '/config');
  const storeBefore = await storeFiles();
  const next = fullConfig('dry');
  next.apis = [{ ...next.apis[0], active: false }, api('dry-new', '/dry/new/*')];
  next.basic_auth_credentials = [];

  const res = await putConfig(next, '?dry_run=true');
  expect(res.status).toBe(200);
  expect(res.body).toEqual({
    dry_run: true,
    version: before.snapshotVersion,
    diff: {
      apis: { added: ['dry-new'], changed: ['dry-open'], removed: ['dry-closed'] },
      oauth_servers: { added: [], changed: [], removed: [] },
      basic_auth_credentials: { added: [], changed: [], removed: ['dry-user'] },
      key_auth_credentials: { added: [], changed: [], removed: [] },
    },
  });
  expect(await storeFiles()).toBe(storeBefore);
  expect((await admin.request('GET', '/config')).body).toEqual(before.body);

  const applied = await putConfig(next);
  expect(applied.body).toMatchObject({ changed: true, diff: res.body.diff });
  expect(applied.body.version).toBe(before.snapshotVersion! + 1);
});

test('If-Match with the ETag of GET /config: written while the configuration is that version; after another write, 412 CONFIG_CHANGED and nothing written', async () => {
  await putConfig(fullConfig('etag'));
  const read = await admin.request('GET', '/config');
  expect(read.headers.etag).toBe(`"${read.snapshotVersion}"`);
  const next = fullConfig('etag');
  next.apis = [...next.apis, api('etag-new', '/etag/new/*')];

  // Another write lands between the read and the PUT of what was read.
  expect((await admin.createApi(api('etag-between', '/etag/between/*'))).status).toBe(201);
  const storeBefore = await storeFiles();
  for (const query of ['', '?dry_run=true']) {
    const stale = await admin.request('PUT', `/config${query}`, { body: next, headers: { 'if-match': read.headers.etag as string } });
    expect(stale.status).toBe(412);
    expect(stale.body).toEqual({
      error: `the configuration is now version "${read.snapshotVersion! + 1}", not "${read.snapshotVersion}": nothing written; read it again`,
    });
  }
  expect(await storeFiles()).toBe(storeBefore);
  expect((await admin.getApi('etag-between')).status).toBe(200);

  // Read again: the current ETag (or any of a list holding it, or *) lets the write through.
  const again = await admin.request('GET', '/config');
  const fresh = await admin.request('PUT', '/config', {
    body: { ...again.body, apis: [...again.body.apis, api('etag-new', '/etag/new/*')] },
    headers: { 'if-match': `"0", ${again.headers.etag}` },
  });
  expect([fresh.status, fresh.body.changed]).toEqual([200, true]);
  const any = await admin.request('PUT', '/config', { body: next, headers: { 'if-match': '*' } });
  expect(any.status).toBe(200);
  expect((await admin.getApi('etag-between')).status).toBe(404);
});

test.each([
  [
    'an API without a routing condition',
    (c: any) => c.apis.push({ name: 'x', proxy: { upstreams: { targets: [{ target: 'http://u' }] } } }),
    'apis[2].proxy.listen_path is required',
  ],
  ['a target that is not a URL', (c: any) => (c.apis[1].proxy.upstreams.targets[0].target = 'nope'), 'apis[1].proxy.upstreams.targets[0].target'],
  ['an oauth2 plugin naming a missing server', (c: any) => (c.oauth_servers = []), 'apis[1].plugins[0].config.server_name'],
  ['a name defined twice', (c: any) => c.apis.push(api('bad-open', '/elsewhere')), 'apis[2].name: api "bad-open" is defined more than once'],
  ['two APIs with one route', (c: any) => c.apis.push(api('bad-copy', '/bad/open/*')), 'apis[2]: api listen path is already registered'],
  ['a short password', (c: any) => (c.basic_auth_credentials[0].password = 'short'), 'basic_auth_credentials[0].password must be at least 8 characters'],
  ['an unknown member', (c: any) => (c.api = []), 'api is not a member of the configuration'],
])('invalid whole configuration (%s) → one 400 naming the item; store and history unchanged', async (_name, spoil, message) => {
  await putConfig(fullConfig('bad'));
  const before = await admin.request('GET', '/config');
  const storeBefore = await storeFiles();
  const historyBefore = (await admin.request('GET', '/config/history')).body;
  const config = fullConfig('bad');
  spoil(config);

  for (const query of ['', '?dry_run=true']) {
    const res = await putConfig(config, query);
    expect(res.status).toBe(400);
    expect(res.body.error).toContain(message);
  }
  expect(await storeFiles()).toBe(storeBefore);
  expect(await admin.request('GET', '/config')).toMatchObject({ body: before.body, snapshotVersion: before.snapshotVersion });
  expect((await admin.request('GET', '/config/history')).body).toEqual(historyBefore);
});

test('every admin write adds a history entry: version, time, author and action, newest first', async () => {
  const created = await admin.createApi(api('hist-a', '/hist/a'));
  const updated = await admin.updateApi('hist-a', { active: false });
  const user = await admin.request('POST', '/credentials/basic_auth', { body: { username: 'hist-user', password: USER_PASSWORD } });
  const deleted = await admin.deleteApi('hist-a');
  const started = Date.now();

  const history = (await admin.request('GET', '/config/history')).body as any[];
  expect(history.slice(0, 4).map((e) => [e.version, e.action, e.author])).toEqual([
    [deleted.snapshotVersion, 'DELETE /apis/hist-a', 'admin'],
    [user.snapshotVersion, 'POST /credentials/basic_auth', 'admin'],
    [updated.snapshotVersion, 'PUT /apis/hist-a', 'admin'],
    [created.snapshotVersion, 'POST /apis', 'admin'],
  ]);
  for (const entry of history.slice(0, 4)) expect(Math.abs(Date.parse(entry.time) - started)).toBeLessThan(30_000);
  expect(history.map((e) => e.version)).toEqual([...history.map((e) => e.version)].sort((a, b) => b - a));

  // A kept version's configuration can be read back.
  const atCreate = await admin.request('GET', `/config/history/${created.snapshotVersion}`);
  expect(atCreate.body.apis.find((a: any) => a.name === 'hist-a')).toMatchObject({ active: true });
  // A write that changes nothing adds nothing.
  await admin.request('PUT', '/credentials/basic_auth/hist-user', { body: {} });
  expect((await admin.request('GET', '/config/history')).body[0].version).toBe(deleted.snapshotVersion);
});

test('rollback restores a version as a new version, and the data plane serves it', async () => {
  const first = await putConfig({ apis: [api('rb-old', '/rb/old/*')] });
  await admin.waitForDataPlanes(first, [dp]);
  expect((await dp.request('GET', '/rb/old/x')).status).toBe(200);

  const second = await putConfig({ apis: [api('rb-new', '/rb/new/*')] });
  await admin.waitForDataPlanes(second, [dp]);
  expect((await dp.request('GET', '/rb/old/x')).status).toBe(404);

  const rollback = await admin.request('POST', `/config/rollback/${first.body.version}`);
  expect(rollback.status).toBe(200);
  expect(rollback.body).toMatchObject({
    restored: first.body.version,
    version: second.body.version + 1,
    changed: true,
    diff: { apis: { added: ['rb-old'], changed: [], removed: ['rb-new'] } },
  });
  await admin.waitForDataPlanes(rollback, [dp]);
  expect((await dp.request('GET', '/rb/old/x')).status).toBe(200);
  expect((await dp.request('GET', '/rb/new/x')).status).toBe(404);

  const history = (await admin.request('GET', '/config/history')).body;
  expect(history[0]).toMatchObject({ version: rollback.body.version, action: `rollback to ${first.body.version}`, author: 'admin' });

  expect((await admin.request('POST', '/config/rollback/999999')).status).toBe(404);
  expect((await admin.request('POST', '/config/rollback/latest')).status).toBe(404);
});

test('CONFIG_HISTORY bounds the history (files included), which survives a restart', async () => {
  const bounded = await startControlPlane({ name: 'cp-history-bound', env: { CONFIG_HISTORY: '3' } });
  try {
    const client = await createAdminClient(bounded);
    const versions: number[] = [];
    for (let i = 0; i < 5; i++) versions.push((await client.createApi(api(`bound-${i}`, `/bound/${i}`))).snapshotVersion!);

    const history = (await client.request('GET', '/config/history')).body as any[];
    expect(history.map((e) => e.version)).toEqual(versions.slice(-3).reverse());
    const files = (await readdir(join(bounded.dataDir, 'history'))).sort();
    // No copy per version: one journal of changes (and, once it has been compacted, base.json).
    expect(files.filter((f) => f !== 'base.json')).toEqual(['journal']);
    const evicted = await client.request('POST', `/config/rollback/${versions[0]}`);
    expect(evicted.status).toBe(404);
    expect(evicted.body.error).toContain('the last 3 are kept');

    await bounded.stop();
    await bounded.restart();
    const again = await createAdminClient(bounded);
    expect((await again.request('GET', '/config/history')).body).toEqual(history);
    const restored = await again.request('POST', `/config/rollback/${versions[2]}`);
    expect(restored.status).toBe(200);
    expect(restored.body.diff.apis.removed).toEqual(['bound-3', 'bound-4']);
  } finally {
    await bounded.dispose();
  }
}, 60_000);
