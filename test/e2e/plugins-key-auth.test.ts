/**
 * key_auth through a real control plane and data plane: credentials managed at
 * /credentials/key_auth (a generated key shown once, keys never listed nor stored in clear, short
 * and duplicate keys refused with the store unchanged), the plugin finding the key in a header
 * (any case) or query parameter, 401 KEY_MISSING / KEY_REJECTED with the `Key realm` challenge,
 * hide_credentials, X-Consumer-Username set and a client's copy dropped; a key change and a delete
 * take effect on the data plane with the snapshot that carries them.
 */
import { createHmac } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { deleteAllCredentials } from '../helpers/credentials.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { pollUntil } from '../helpers/poll-until.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

const KEYS = '/credentials/key_auth';
const api = (name: string, plugin: Record<string, unknown>) => ({
  ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url] }),
  plugins: [{ name: 'key_auth', ...plugin }],
});
const get = (path: string, headers: Record<string, string> = {}) => gw.dp.request('GET', path, { headers });
/** The stored form: HMAC-SHA256 under the installation key the CP generated into DATA_DIR. */
const digest = async (key: string) =>
  `hmac-sha256$${createHmac('sha256', (await readFile(join(gw.cp.dataDir, 'key-auth-hash-key'), 'utf8')).trim())
    .update(key)
    .digest('base64url')}`;

/** Each test creates the credentials it needs, under its own names and keys, so no test depends on another's. */
async function createCredential(username: string, key?: string): Promise<string> {
  const created = await gw.admin.request('POST', KEYS, { body: key === undefined ? { username } : { username, key } });
  expect(created.status).toBe(201);
  expect(created.headers.location).toBe(`${KEYS}/${username}`);
  await gw.admin.waitForDataPlanes(created, gw.dps);
  if (key !== undefined) {
    expect(created.body).toEqual({ username });
    return key;
  }
  expect(created.body).toEqual({ username, key: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
  return created.body.key as string;
}

beforeAll(async () => {
  u = await startUpstream('key-auth-upstream');
  gw = await startGateway();
  await createApis(gw, [
    api('ka', {}),
    api('ka-names', { config: { key_names: ['X-Api-Key', 'token'], realm: 'Payments' } }),
    api('ka-hide', { config: { hide_credentials: true } }),
    api('ka-header-only', { config: { key_in_query: false } }),
    api('ka-off', { enabled: false }),
    apiDefinition({ name: 'ka-none', listenPath: '/ka-none/*', targets: [u.url] }),
  ]);
}, 60_000);

// Every test starts with no credentials, whatever ran before it: the listings below are exact.
afterEach(() => deleteAllCredentials(gw.admin, KEYS));

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u)).toBe('');
});

test('a generated key is returned once, passes in the apikey header, and the upstream learns the consumer', async () => {
  const key = await createCredential('alice-generated');
  const res = await get('/ka/x', { apikey: key, 'x-request-id': 'ka-generated-1' });
  expect(res.status).toBe(200);
  const seen = u.last()!;
  expect(seen.headers['x-consumer-username']).toBe('alice-generated');
  // The access log names the consumer too.
  const line = await pollUntil(async () => gw.dp.process.lines().find((l) => l.json?.msg === 'access' && l.json?.requestId === 'ka-generated-1'), {
    what: 'the access line of ka-generated-1',
  });
  expect(line.json).toMatchObject({ route: 'api:ka', status: 200, consumer: 'alice-generated' });
  // Without hide_credentials the key goes upstream as sent.
  expect(seen.headers.apikey).toBe(key);
  // Never shown again.
  expect((await gw.admin.request('GET', `${KEYS}/alice-generated`)).body).toEqual({ username: 'alice-generated' });
});

test('the key passes as a query parameter, and header names are case-insensitive', async () => {
  const key = await createCredential('alice-query', 'alice-query-key-0123456789');
  expect((await get(`/ka/x?a=1&apikey=${encodeURIComponent(key)}`)).status).toBe(200);
  expect(u.last()!.url).toBe(`/ka/x?a=1&apikey=${key}`);
  expect((await get('/ka-names/x', { 'x-API-key': key })).status).toBe(200);
  expect((await get(`/ka-names/x?token=${key}`)).status).toBe(200);
  expect(u.last()!.headers['x-consumer-username']).toBe('alice-query');
});

test('key_in_query: false ignores a key in the query', async () => {
  const key = await createCredential('alice-header-only', 'alice-header-only-key-01');
  const res = await get(`/ka-header-only/x?apikey=${key}`);
  expect(res.status).toBe(401);
  expect(res.json).toBe('no API key found in request');
  expect((await get('/ka-header-only/x', { apikey: key })).status).toBe(200);
});

test('hide_credentials takes the key header and query parameter off the upstream request', async () => {
  const key = await createCredential('alice-hide', 'alice-hide-key-0123456789');
  expect((await get('/ka-hide/x', { apikey: key, 'x-other': 'kept' })).status).toBe(200);
  expect(u.last()!.headers.apikey).toBeUndefined();
  expect(u.last()!.headers['x-other']).toBe('kept');
  expect(u.last()!.headers['x-consumer-username']).toBe('alice-hide');
  expect((await get(`/ka-hide/x?a=1&apikey=${key}&b=2`)).status).toBe(200);
  expect(u.last()!.url).toBe('/ka-hide/x?a=1&b=2');
});

test('a client-sent X-Consumer-Username is replaced by the credential owner, never forwarded', async () => {
  const key = await createCredential('alice-spoof', 'alice-spoof-key-0123456789');
  expect((await get('/ka/x', { apikey: key, 'X-Consumer-Username': 'admin' })).status).toBe(200);
  const raw = u.last()!.rawHeaders;
  const consumers = raw.flatMap((name, i) => (i % 2 === 0 && name.toLowerCase() === 'x-consumer-username' ? [raw[i + 1]] : []));
  expect(consumers).toEqual(['alice-spoof']);
});

test.each(['/ka-none/x', '/ka-off/x'])('on a route without key_auth (%s) a client-sent X-Consumer-Username is dropped too', async (path) => {
  expect((await get(path, { 'X-Consumer-Username': 'admin' })).status).toBe(200);
  expect(u.last()!.rawHeaders.filter((name, i) => i % 2 === 0 && name.toLowerCase() === 'x-consumer-username')).toEqual([]);
});

// Each row has a real credential in the store, so an unknown key is refused as such.
test.each<[string, string, Record<string, string>, string, string]>([
  ['no key', 'alice-no-key', {}, '/ka/x', 'no API key found in request'],
  ['an empty key header', 'alice-empty-key', { apikey: '' }, '/ka/x', 'no API key found in request'],
  ['an unknown key', 'alice-unknown-key', { apikey: 'not-a-key-of-anyone-0123' }, '/ka/x', 'invalid API key'],
  ['an unknown key in the query', 'alice-unknown-query', {}, '/ka/x?apikey=not-a-key-of-anyone-0123', 'invalid API key'],
  ['a key longer than any stored one', 'alice-long-key', { apikey: 'k'.repeat(300) }, '/ka/x', 'invalid API key'],
])('%s → 401 with the Key challenge, never reaching the upstream', async (_row, user, headers, path, message) => {
  await createCredential(user, `${user}-key-0123456789`);
  const before = u.requests.length;
  const res = await get(path, headers);
  expect(res.status).toBe(401);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.json).toBe(message);
  expect(res.headers['www-authenticate']).toBe('Key realm="Restricted"');
  expect(u.requests.length).toBe(before);
});

test('realm shows in the challenge', async () => {
  expect((await get('/ka-names/x')).headers['www-authenticate']).toBe('Key realm="Payments"');
});

test('enabled: false checks nothing', async () => {
  expect((await get('/ka-off/x')).status).toBe(200);
});

test('no GET shows the key or its hash, and the store files hold only its keyed digest', async () => {
  const key = await createCredential('alice-store', 'alice-store-key-0123456789');
  const list = await gw.admin.request('GET', KEYS);
  expect(list.status).toBe(200);
  expect(list.body).toEqual([{ username: 'alice-store' }]);
  const one = await gw.admin.request('GET', `${KEYS}/alice-store`);
  expect(one.body).toEqual({ username: 'alice-store' });
  for (const res of [list, one]) expect(res.text).not.toMatch(/key|sha256/);
  const [base, journal] = await Promise.all(['store.json', 'store.journal'].map((f) => readFile(join(gw.cp.dataDir, f), 'utf8')));
  for (const file of [base, journal]) expect(file).not.toContain(key);
  type Written = { name: string; def?: unknown };
  const written: Written[] = journal
    .split('\n')
    .filter(Boolean)
    .flatMap((line) => JSON.parse(line).changes.filter((c: { kind: string }) => c.kind === 'key-auth-credential'));
  const stored: Written[] = (JSON.parse(base).key_auth_credentials ?? []).map((def: { username: string }) => ({ name: def.username, def }));
  expect([...stored, ...written].filter((c) => c.name === 'alice-store').map((c) => c.def)).toEqual([{ username: 'alice-store', key_hash: await digest(key) }]);
  // The configuration export shows the digest only when an admin asks for secrets, never the key.
  const exported = await gw.admin.request('GET', '/config');
  expect(exported.body.key_auth_credentials).toEqual([{ username: 'alice-store', key_hash: '<redacted>' }]);
  const withSecrets = await gw.admin.request('GET', '/config?secrets=include');
  expect(withSecrets.body.key_auth_credentials).toEqual([{ username: 'alice-store', key_hash: await digest(key) }]);
});

test('a second credential with the same name is 409; with the same key is 409, the store unchanged', async () => {
  const key = await createCredential('alice-twice', 'alice-twice-key-0123456789');
  const sameName = await gw.admin.request('POST', KEYS, { body: { username: 'alice-twice', key: 'another-key-0123456789' } });
  expect(sameName.status).toBe(409);
  expect(sameName.body).toEqual({ error: 'key_auth credential already exists' });
  const sameKey = await gw.admin.request('POST', KEYS, { body: { username: 'bob-twice', key } });
  expect(sameKey.status).toBe(409);
  expect(sameKey.body.error).toContain('api key is already registered');
  expect((await gw.admin.request('GET', KEYS)).body).toEqual([{ username: 'alice-twice' }]);
  // Nor may a PUT take another credential's key.
  await createCredential('bob-twice', 'bob-twice-key-0123456789');
  const put = await gw.admin.request('PUT', `${KEYS}/bob-twice`, { body: { key } });
  expect(put.status).toBe(409);
  expect((await get('/ka/x', { apikey: 'bob-twice-key-0123456789' })).status).toBe(200);
  expect(u.last()!.headers['x-consumer-username']).toBe('bob-twice');
});

test.each([
  ['a short key', { username: 'bob', key: 'short-key' }, 'key must be at least 16 characters'],
  ['a key with a space', { username: 'bob', key: 'a key with spaces inside' }, 'key must be printable ASCII without spaces'],
  ['a long key', { username: 'bob', key: 'k'.repeat(257) }, 'key must be at most 256 characters'],
  ['a key that is not a string', { username: 'bob', key: 1234567890123456 }, 'key must be a string'],
  ['no username', { key: 'a-fine-key-0123456789' }, 'username is required'],
  ['a username with a colon', { username: 'bo:b' }, 'username must be 1-128 characters'],
])('a credential with %s is refused with 400 naming the field, the store unchanged', async (_row, body, message) => {
  await createCredential('alice-bad-input', 'alice-bad-input-key-0123');
  const before = await gw.admin.request('GET', KEYS);
  const res = await gw.admin.request('POST', KEYS, { body });
  expect(res.status).toBe(400);
  expect(res.body.error).toContain(message);
  expect((await gw.admin.request('GET', KEYS)).body).toEqual(before.body);
});

test.each([
  ['no key names', { key_names: [] }, 'plugins[0].config.key_names must not be empty'],
  ['a key name that is not a header name', { key_names: ['api key'] }, 'plugins[0].config.key_names[0] is not a valid header name'],
  [
    'neither header nor query',
    { key_in_header: false, key_in_query: false },
    'plugins[0].config.key_in_header must not be false when key_in_query is false too',
  ],
  ['a realm with a quote', { realm: 'a"b' }, 'plugins[0].config.realm must be printable ASCII'],
])('a key_auth config with %s is refused with 400 naming the field, the API unchanged', async (_row, config, message) => {
  const before = await gw.admin.getApi('ka');
  const res = await gw.admin.updateApi('ka', { plugins: [{ name: 'key_auth', config }] });
  expect(res.status).toBe(400);
  expect(res.body.error).toContain(message);
  expect((await gw.admin.getApi('ka')).body).toEqual(before.body);
});

test('the stored config shows the defaults', async () => {
  const { body } = await gw.admin.getApi('ka');
  expect(body.plugins).toEqual([
    {
      name: 'key_auth',
      enabled: true,
      config: { key_names: ['apikey'], key_in_header: true, key_in_query: true, hide_credentials: false, realm: 'Restricted' },
    },
  ]);
});

test('a key change refuses the old key at once; a delete refuses the credential', async () => {
  const key = await createCredential('alice-change', 'alice-change-key-0123456789');
  expect((await get('/ka/x', { apikey: key })).status).toBe(200);
  const changed = await gw.admin.request('PUT', `${KEYS}/alice-change`, { body: { key: 'alice-changed-key-0123456789' } });
  expect(changed.status).toBe(200);
  expect(changed.body).toEqual({ username: 'alice-change' });
  await gw.admin.waitForDataPlanes(changed, gw.dps);
  expect((await get('/ka/x', { apikey: key })).status).toBe(401);
  expect((await get('/ka/x', { apikey: 'alice-changed-key-0123456789' })).status).toBe(200);

  const deleted = await gw.admin.request('DELETE', `${KEYS}/alice-change`);
  expect(deleted.status).toBe(204);
  await gw.admin.waitForDataPlanes(deleted, gw.dps);
  const refused = await get('/ka/x', { apikey: 'alice-changed-key-0123456789' });
  expect(refused.status).toBe(401);
  expect(refused.json).toBe('invalid API key');
  expect((await gw.admin.request('DELETE', `${KEYS}/alice-change`)).status).toBe(404);
});

test('a PUT without a key keeps it; a null key is refused; an unknown credential is 404', async () => {
  const key = await createCredential('alice-put', 'alice-put-key-0123456789');
  const same = await gw.admin.request('PUT', `${KEYS}/alice-put`, { body: {} });
  expect(same.status).toBe(200);
  expect((await get('/ka/x', { apikey: key })).status).toBe(200);
  const removed = await gw.admin.request('PATCH', `${KEYS}/alice-put`, { body: { key: null } });
  expect(removed.status).toBe(400);
  expect(removed.body.error).toBe('key cannot be removed');
  expect((await gw.admin.request('PUT', `${KEYS}/alice-put`, { body: { username: 'alicia' } })).status).toBe(400);
  const missing = await gw.admin.request('GET', `${KEYS}/nobody`);
  expect(missing.status).toBe(404);
  expect(missing.body).toEqual({ error: 'key_auth credential not found' });
});

test('PUT /config takes a key in clear once and stores its digest; importing the export again changes nothing', async () => {
  const current = (await gw.admin.request('GET', '/config')).body;
  const imported = await gw.admin.request('PUT', '/config', {
    body: { ...current, key_auth_credentials: [{ username: 'alice-config', key: 'alice-config-key-0123456789' }] },
  });
  expect(imported.status).toBe(200);
  expect(imported.body.diff.key_auth_credentials).toEqual({ added: ['alice-config'], changed: [], removed: [] });
  await gw.admin.waitForDataPlanes(imported, gw.dps);
  expect((await get('/ka/x', { apikey: 'alice-config-key-0123456789' })).status).toBe(200);
  const exported = (await gw.admin.request('GET', '/config')).body;
  expect(exported.key_auth_credentials).toEqual([{ username: 'alice-config', key_hash: '<redacted>' }]);
  const again = await gw.admin.request('PUT', '/config', { body: exported });
  expect(again.status).toBe(200);
  expect(again.body.changed).toBe(false);
});
