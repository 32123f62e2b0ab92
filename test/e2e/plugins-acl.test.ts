/**
 * acl through a real control plane and data plane: consumer groups on key_auth credentials and
 * basic_auth users (admin write and read, the key never shown, groups are), the plugin's allow and
 * deny lists judging the consumer authentication found, 403 ACL_FORBIDDEN without reaching the
 * upstream, X-Consumer-Groups sent (or hidden) and a client's own copy dropped on every route, a
 * change of a credential's groups judged from the next request on, and 400s naming the field.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { deleteAllCredentials } from '../helpers/credentials.js';
import { expectRefusedPluginConfig } from '../helpers/refused-plugin-config.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

const KEYS = '/credentials/key_auth';
const USERS = '/credentials/basic_auth';
const PASSWORD = 'correct horse battery';
const basic = (user: string) => `Basic ${Buffer.from(`${user}:${PASSWORD}`).toString('base64')}`;
const api = (name: string, plugins: unknown[]) => ({ ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url] }), plugins });
const get = (path: string, headers: Record<string, string> = {}) => gw.dp.request('GET', path, { headers });
/** Every X-Consumer-Groups line the upstream got in its last request, as sent. */
const groupsSeen = () => {
  const raw = u.last()!.rawHeaders;
  return raw.flatMap((name, i) => (i % 2 === 0 && name.toLowerCase() === 'x-consumer-groups' ? [raw[i + 1]] : []));
};

/** Each test creates the credentials it needs, under its own names and keys, so no test depends on another's. */
async function createKey(username: string, groups?: unknown): Promise<string> {
  const key = `${username}-key-0123456789`;
  const created = await gw.admin.request('POST', KEYS, { body: { username, key, ...(groups !== undefined && { groups }) } });
  expect(created.status).toBe(201);
  await gw.admin.waitForDataPlanes(created, gw.dps);
  return key;
}

beforeAll(async () => {
  u = await startUpstream('acl-upstream');
  gw = await startGateway();
  await createApis(gw, [
    api('acl-allow', [{ name: 'key_auth' }, { name: 'acl', config: { allow: ['admins', 'partners'] } }]),
    api('acl-deny', [{ name: 'acl', config: { deny: ['banned'] } }, { name: 'key_auth' }]),
    api('acl-hidden', [{ name: 'key_auth' }, { name: 'acl', config: { allow: ['admins'], hide_groups_header: true } }]),
    api('acl-basic', [{ name: 'basic_auth' }, { name: 'acl', config: { allow: ['admins'] } }]),
    api('acl-none', [{ name: 'key_auth' }]),
  ]);
}, 60_000);

// Every test starts with no credentials, whatever ran before it.
afterEach(async () => {
  await deleteAllCredentials(gw.admin, KEYS);
  await deleteAllCredentials(gw.admin, USERS);
});

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u)).toBe('');
});

test('groups are stored lower-cased, deduplicated and sorted, shown by the admin API (never the key) and in the config export', async () => {
  const created = await gw.admin.request('POST', KEYS, {
    body: { username: 'ann-show', key: 'ann-show-key-0123456789', groups: ['Partners', 'admins', 'ADMINS'] },
  });
  expect(created.status).toBe(201);
  expect(created.body).toEqual({ username: 'ann-show', groups: ['admins', 'partners'] });
  expect((await gw.admin.request('GET', `${KEYS}/ann-show`)).body).toEqual({ username: 'ann-show', groups: ['admins', 'partners'] });
  expect((await gw.admin.request('GET', KEYS)).body).toEqual([{ username: 'ann-show', groups: ['admins', 'partners'] }]);
  // A credential without groups has no groups member anywhere (its stored form is as before groups existed).
  await createKey('bob-show');
  expect((await gw.admin.request('GET', `${KEYS}/bob-show`)).body).toEqual({ username: 'bob-show' });
  const exported = (await gw.admin.request('GET', '/config')).body;
  expect(exported.key_auth_credentials).toEqual([
    { username: 'ann-show', key_hash: '<redacted>', groups: ['admins', 'partners'] },
    { username: 'bob-show', key_hash: '<redacted>' },
  ]);
});

test('allow: a consumer in a listed group passes and the upstream gets X-Consumer-Groups; one in another group is 403 and the upstream sees nothing', async () => {
  const admin = await createKey('ann-allow', ['admins', 'ops']);
  const other = await createKey('bob-allow', ['ops']);
  const none = await createKey('cy-allow');
  expect((await get('/acl-allow/x', { apikey: admin })).status).toBe(200);
  expect(u.last()!.headers['x-consumer-username']).toBe('ann-allow');
  expect(groupsSeen()).toEqual(['admins, ops']);
  for (const key of [other, none]) {
    const before = u.requests.length;
    const res = await get('/acl-allow/x', { apikey: key });
    expect(res.status).toBe(403);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json).toBe('you cannot consume this service');
    expect(u.requests.length).toBe(before);
  }
  // Authentication still comes first: no key is key_auth's 401, not acl's 403.
  expect((await get('/acl-allow/x')).status).toBe(401);
});

test('deny: a consumer in a listed group is 403; others pass, one without groups with no X-Consumer-Groups', async () => {
  const banned = await createKey('ann-deny', ['banned', 'ops']);
  const fine = await createKey('bob-deny', ['ops']);
  const none = await createKey('cy-deny');
  const before = u.requests.length;
  expect((await get('/acl-deny/x', { apikey: banned })).status).toBe(403);
  expect(u.requests.length).toBe(before);
  expect((await get('/acl-deny/x', { apikey: fine })).status).toBe(200);
  expect(groupsSeen()).toEqual(['ops']);
  expect((await get('/acl-deny/x', { apikey: none })).status).toBe(200);
  expect(groupsSeen()).toEqual([]);
});

test('hide_groups_header: the upstream gets no X-Consumer-Groups, not even the one the client sent', async () => {
  const key = await createKey('ann-hidden', ['admins']);
  expect((await get('/acl-hidden/x', { apikey: key, 'X-Consumer-Groups': 'root' })).status).toBe(200);
  expect(u.last()!.headers['x-consumer-username']).toBe('ann-hidden');
  expect(groupsSeen()).toEqual([]);
});

test.each([
  ['an acl route', '/acl-allow/x', ['admins']],
  ['a key_auth route without acl', '/acl-none/x', []],
])("a client's X-Consumer-Groups is never forwarded: %s", async (_row, path, expected) => {
  const key = await createKey('ann-spoof', ['admins']);
  expect((await get(path, { apikey: key, 'X-Consumer-Groups': 'root', 'x-consumer-groups': 'admins, root' })).status).toBe(200);
  expect(groupsSeen()).toEqual(expected);
});

test("a change of a credential's groups (PUT, PATCH, removal) judges the next request by the new ones", async () => {
  const key = await createKey('ann-change', ['ops']);
  expect((await get('/acl-allow/x', { apikey: key })).status).toBe(403);
  const put = await gw.admin.request('PUT', `${KEYS}/ann-change`, { body: { groups: ['Partners'] } });
  expect(put.status).toBe(200);
  expect(put.body).toEqual({ username: 'ann-change', groups: ['partners'] });
  await gw.admin.waitForDataPlanes(put, gw.dps);
  expect((await get('/acl-allow/x', { apikey: key })).status).toBe(200);
  expect(groupsSeen()).toEqual(['partners']);
  // The key is kept by a write that does not give one.
  const patched = await gw.admin.request('PATCH', `${KEYS}/ann-change`, { body: { groups: ['banned'] } });
  expect(patched.status).toBe(200);
  await gw.admin.waitForDataPlanes(patched, gw.dps);
  expect((await get('/acl-allow/x', { apikey: key })).status).toBe(403);
  expect((await get('/acl-deny/x', { apikey: key })).status).toBe(403);
  const removed = await gw.admin.request('PATCH', `${KEYS}/ann-change`, { body: { groups: null } });
  expect(removed.status).toBe(200);
  expect(removed.body).toEqual({ username: 'ann-change' });
  await gw.admin.waitForDataPlanes(removed, gw.dps);
  expect((await get('/acl-deny/x', { apikey: key })).status).toBe(200);
  expect(groupsSeen()).toEqual([]);
});

test('basic_auth users carry groups too: the user authenticated is the consumer acl judges', async () => {
  for (const [username, groups] of [
    ['ann-basic', ['Admins']],
    ['bob-basic', ['ops']],
  ] as const) {
    const created = await gw.admin.request('POST', USERS, { body: { username, password: PASSWORD, groups } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ username, groups: groups.map((g) => g.toLowerCase()) });
    await gw.admin.waitForDataPlanes(created, gw.dps);
  }
  expect((await gw.admin.request('GET', `${USERS}/ann-basic`)).body).toEqual({ username: 'ann-basic', groups: ['admins'] });
  expect((await get('/acl-basic/x', { authorization: basic('ann-basic') })).status).toBe(200);
  expect(groupsSeen()).toEqual(['admins']);
  expect((await get('/acl-basic/x', { authorization: basic('bob-basic') })).status).toBe(403);
  // A password change keeps the groups.
  const changed = await gw.admin.request('PUT', `${USERS}/ann-basic`, { body: { password: `${PASSWORD} 2` } });
  expect(changed.body).toEqual({ username: 'ann-basic', groups: ['admins'] });
});

test.each([
  [
    'a group with a space',
    KEYS,
    { username: 'bad', key: 'bad-key-0123456789', groups: ['a b'] },
    'groups[0] must be 1-64 characters of a-z 0-9 . _ - (any case)',
  ],
  ['an empty group list', KEYS, { username: 'bad', key: 'bad-key-0123456789', groups: [] }, 'groups must not be empty'],
  ['33 groups', USERS, { username: 'bad', password: PASSWORD, groups: Array.from({ length: 33 }, (_, i) => `g${i}`) }, 'groups must have at most 32 groups'],
  ['groups that are not a list', USERS, { username: 'bad', password: PASSWORD, groups: 'admins' }, 'groups must be an array'],
])('a credential with %s is refused with 400 naming the field, the store unchanged', async (_row, collection, body, message) => {
  const res = await gw.admin.request('POST', collection, { body });
  expect(res.status).toBe(400);
  expect(res.body).toEqual({ error: message });
  expect((await gw.admin.request('GET', collection)).body).toEqual([]);
});

test.each([
  [
    'acl without key_auth or basic_auth',
    [{ name: 'acl', config: { allow: ['admins'] } }],
    'plugins[0] acl needs key_auth or basic_auth enabled on the API (there is no consumer to authorize without one)',
  ],
  [
    'acl with only a disabled key_auth',
    [
      { name: 'key_auth', enabled: false },
      { name: 'acl', config: { allow: ['admins'] } },
    ],
    'plugins[1] acl needs key_auth or basic_auth enabled on the API (there is no consumer to authorize without one)',
  ],
  [
    'both allow and deny',
    [{ name: 'key_auth' }, { name: 'acl', config: { allow: ['a'], deny: ['b'] } }],
    'plugins[1].config must list groups in exactly one of "allow" and "deny"',
  ],
  [
    'neither allow nor deny',
    [{ name: 'key_auth' }, { name: 'acl', config: { hide_groups_header: true } }],
    'plugins[1].config must list groups in exactly one of "allow" and "deny"',
  ],
  [
    'a bad group name',
    [{ name: 'key_auth' }, { name: 'acl', config: { deny: ['no/slash'] } }],
    'plugins[1].config.deny[0] must be 1-64 characters of a-z 0-9 . _ - (any case)',
  ],
])('an API with %s is refused with 400 naming the field, the store unchanged', async (_row, plugins, message) => {
  await expectRefusedPluginConfig(
    gw,
    { definition: apiDefinition({ name: 'acl-refused', listenPath: '/acl-refused/*', targets: [u.url] }), existing: 'acl-none', plugins },
    message,
  );
});

test('the stored config shows the normalised lists and the default', async () => {
  const { body } = await gw.admin.getApi('acl-deny');
  expect(body.plugins).toEqual([
    { name: 'acl', enabled: true, config: { allow: [], deny: ['banned'], hide_groups_header: false } },
    { name: 'key_auth', enabled: true, config: expect.any(Object) },
  ]);
});

test('PUT /config keeps the groups of a hand-written user given with its password; importing it again changes nothing', async () => {
  const current = (await gw.admin.request('GET', '/config')).body;
  const doc = { ...current, basic_auth_credentials: [{ username: 'ann-config', password: PASSWORD, groups: ['Admins'] }] };
  const imported = await gw.admin.request('PUT', '/config', { body: doc });
  expect(imported.status).toBe(200);
  await gw.admin.waitForDataPlanes(imported, gw.dps);
  expect((await gw.admin.request('GET', `${USERS}/ann-config`)).body).toEqual({ username: 'ann-config', groups: ['admins'] });
  expect((await get('/acl-basic/x', { authorization: basic('ann-config') })).status).toBe(200);
  // The same password keeps the stored hash, and the groups with it.
  const again = await gw.admin.request('PUT', '/config', { body: doc });
  expect(again.status).toBe(200);
  expect(again.body.changed).toBe(false);
});
