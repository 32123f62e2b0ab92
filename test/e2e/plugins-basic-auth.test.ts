/**
 * basic_auth through a real control plane and data plane: users managed at Janus's
 * /credentials/basic_auth, the plugin checking `Authorization: Basic …` against them, 401 with
 * WWW-Authenticate otherwise; passwords never shown nor stored in clear; password change and
 * delete take effect on the data plane; bad bodies and configs refused naming the field while
 * the store stays as it was; `enabled: false` lets everything through.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { deleteAllCredentials } from '../helpers/credentials.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

const USERS = '/credentials/basic_auth';
const PASSWORD = 'correct horse battery';
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const api = (name: string, plugin: Record<string, unknown>) => ({
  ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url] }),
  plugins: [{ name: 'basic_auth', ...plugin }],
});
const get = (path: string, authorization?: string) => gw.dp.request('GET', path, { headers: authorization ? { authorization } : {} });
const SCRYPT_HASH = /^scrypt\$16384\$8\$1\$/;

/** Each test creates the users it needs, under its own names, so no test depends on another's leftovers or verdicts. */
async function createUser(username: string): Promise<void> {
  const created = await gw.admin.request('POST', USERS, { body: { username, password: PASSWORD } });
  expect(created.status).toBe(201);
  expect(created.headers.location).toBe(`${USERS}/${username}`);
  expect(created.body).toEqual({ username });
  await gw.admin.waitForDataPlanes(created, gw.dps);
}

beforeAll(async () => {
  u = await startUpstream('basic-auth-upstream');
  gw = await startGateway({ controlPlane: { env: { ADMIN_VIEWER_USER: 'auditor', ADMIN_VIEWER_PASSWORD: 'auditor-password-123' } } });
  await createApis(gw, [api('ba', {}), api('ba-realm', { config: { realm: 'Payments' } }), api('ba-off', { enabled: false })]);
}, 60_000);

// Every test starts with no users, whatever ran before it: the listings below are exact.
afterEach(() => deleteAllCredentials(gw.admin, USERS));

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u)).toBe('');
});

test('the right credentials pass, with the Authorization header forwarded unchanged and the user as X-Consumer-Username', async () => {
  await createUser('alice-pass');
  const res = await get('/ba/x', basic('alice-pass', PASSWORD));
  expect(res.status).toBe(200);
  expect(u.requests.at(-1)?.headers.authorization).toBe(basic('alice-pass', PASSWORD));
  expect(u.requests.at(-1)?.headers['x-consumer-username']).toBe('alice-pass');
  // A cached verdict answers the same, and a client's own X-Consumer-Username is replaced.
  const cached = await gw.dp.request('GET', '/ba/y', { headers: { authorization: basic('alice-pass', PASSWORD), 'x-consumer-username': 'admin' } });
  expect(cached.status).toBe(200);
  expect(u.requests.at(-1)?.rawHeaders.filter((name, i) => i % 2 === 0 && name.toLowerCase() === 'x-consumer-username')).toEqual(['x-consumer-username']);
  expect(u.requests.at(-1)?.headers['x-consumer-username']).toBe('alice-pass');
});

// Each row has a real user in the store, so a wrong password or a colon-less form of the name is refused as such.
test.each<[string, string, (user: string) => string | undefined]>([
  ['a wrong password', 'alice-wrong-password', (user) => basic(user, 'wrong password!')],
  ['an unknown user', 'alice-unknown-user', () => basic('mallory', PASSWORD)],
  ['no Authorization header', 'alice-no-header', () => undefined],
  ['a bearer token', 'alice-bearer', () => 'Bearer abc'],
  ['credentials without a colon', 'alice-no-colon', (user) => `Basic ${Buffer.from(user).toString('base64')}`],
])('%s → 401 "invalid credentials" with the challenge, never reaching the upstream', async (_row, user, authorization) => {
  await createUser(user);
  const before = u.requests.length;
  const res = await get('/ba/x', authorization(user));
  expect(res.status).toBe(401);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(res.json).toBe('invalid credentials');
  expect(res.headers['www-authenticate']).toBe('Basic realm="Restricted", charset="UTF-8"');
  expect(u.requests.length).toBe(before);
});

test('realm shows in the challenge', async () => {
  expect((await get('/ba-realm/x')).headers['www-authenticate']).toBe('Basic realm="Payments", charset="UTF-8"');
});

test('enabled: false checks nothing', async () => {
  expect((await get('/ba-off/x')).status).toBe(200);
});

test('no GET shows the password or its hash, and the store file holds only the scrypt hash', async () => {
  await createUser('alice-store');
  const list = await gw.admin.request('GET', USERS);
  expect(list.status).toBe(200);
  expect(list.body).toEqual([{ username: 'alice-store' }]);
  const one = await gw.admin.request('GET', `${USERS}/alice-store`);
  expect(one.body).toEqual({ username: 'alice-store' });
  for (const res of [list, one]) expect(res.text).not.toMatch(/password|scrypt/);
  // store.json and its journal (each write's changed definitions): the user is in one of them.
  const [base, journal] = await Promise.all(['store.json', 'store.journal'].map((f) => readFile(join(gw.cp.dataDir, f), 'utf8')));
  for (const file of [base, journal]) expect(file).not.toContain(PASSWORD);
  // The journal also holds the other tests' writes since the last compaction: their users, a password
  // change as a second record of its user, a delete as a record without `def`.
  type Written = { name: string; def?: unknown };
  const written: Written[] = journal
    .split('\n')
    .filter(Boolean)
    .flatMap((line) => JSON.parse(line).changes.filter((c: { kind: string }) => c.kind === 'basic-auth-credential'));
  const stored: Written[] = (JSON.parse(base).basic_auth_credentials ?? []).map((def: { username: string }) => ({ name: def.username, def }));
  const all = [...stored, ...written];
  expect(all.filter((c) => c.name === 'alice-store').map((c) => c.def)).toEqual([
    { username: 'alice-store', password_hash: expect.stringMatching(SCRYPT_HASH) },
  ]);
  for (const { name, def } of all) if (def !== undefined) expect(def).toEqual({ username: name, password_hash: expect.stringMatching(SCRYPT_HASH) });
});

test('a second user with the same name is refused with 409', async () => {
  await createUser('alice-twice');
  const res = await gw.admin.request('POST', USERS, { body: { username: 'alice-twice', password: 'another password' } });
  expect(res.status).toBe(409);
  expect(res.body).toEqual({ error: 'user already exists' });
});

test.each([
  ['no password', { username: 'bob' }, 'password is required'],
  ['a short password', { username: 'bob', password: 'short' }, 'password must be at least 8 characters'],
  ['a long password', { username: 'bob', password: 'x'.repeat(257) }, 'password must be at most 256 characters'],
  ['a password that is not a string', { username: 'bob', password: 12345678 }, 'password must be a string'],
  ['no username', { password: PASSWORD }, 'username is required'],
  ['a username with a colon', { username: 'bo:b', password: PASSWORD }, 'username must be 1-128 characters'],
])('a user with %s is refused with 400 naming the field, the store unchanged', async (_row, body, message) => {
  const before = await gw.admin.request('GET', USERS);
  const res = await gw.admin.request('POST', USERS, { body });
  expect(res.status).toBe(400);
  expect(res.body.error).toContain(message);
  expect((await gw.admin.request('GET', USERS)).body).toEqual(before.body);
});

test.each([
  ['a realm with a quote', { realm: 'a"b' }, 'plugins[0].config.realm must be printable ASCII'],
  ['an empty realm', { realm: '' }, 'plugins[0].config.realm must not be empty'],
])('a basic_auth config with %s is refused with 400 naming the field, the API unchanged', async (_row, config, message) => {
  const before = await gw.admin.getApi('ba');
  const res = await gw.admin.updateApi('ba', { plugins: [{ name: 'basic_auth', config }] });
  expect(res.status).toBe(400);
  expect(res.body.error).toContain(message);
  expect((await gw.admin.getApi('ba')).body).toEqual(before.body);
});

test('a viewer token may list users but not write them', async () => {
  await createUser('alice-viewer');
  const viewer = await gw.admin.request('POST', '/login', { body: { username: 'auditor', password: 'auditor-password-123' }, token: null });
  expect(viewer.status).toBe(200);
  const token = viewer.body.access_token as string;
  expect((await gw.admin.request('GET', USERS, { token })).body).toEqual([{ username: 'alice-viewer' }]);
  expect((await gw.admin.request('POST', USERS, { token, body: { username: 'eve', password: PASSWORD } })).status).toBe(403);
  expect((await gw.admin.request('DELETE', `${USERS}/alice-viewer`, { token })).status).toBe(403);
});

test('a bad PUT leaves the user as it was; the path names the user; unknown → 404; no token → 401', async () => {
  await createUser('alice-put');
  const bad = await gw.admin.request('PUT', `${USERS}/alice-put`, { body: { password: 'short' } });
  expect(bad.status).toBe(400);
  expect(bad.body.error).toContain('password must be at least 8 characters');
  expect((await get('/ba/x', basic('alice-put', PASSWORD))).status).toBe(200);
  expect((await gw.admin.request('PUT', `${USERS}/alice-put`, { body: { username: 'alicia', password: PASSWORD } })).status).toBe(400);
  expect((await gw.admin.request('GET', `${USERS}/nobody`)).status).toBe(404);
  expect((await gw.admin.request('GET', `${USERS}/alice-put`, { token: null })).status).toBe(401);
});

test('a password change refuses the old password at once; a delete refuses the user', async () => {
  await createUser('alice-change');
  // Checked once before the change: the old password's verdict is then cached, and the change must still refuse it.
  expect((await get('/ba/x', basic('alice-change', PASSWORD))).status).toBe(200);
  const changed = await gw.admin.request('PUT', `${USERS}/alice-change`, { body: { password: 'a new passphrase' } });
  expect(changed.status).toBe(200);
  expect(changed.body).toEqual({ username: 'alice-change' });
  await gw.admin.waitForDataPlanes(changed, gw.dps);
  expect((await get('/ba/x', basic('alice-change', PASSWORD))).status).toBe(401);
  expect((await get('/ba/x', basic('alice-change', 'a new passphrase'))).status).toBe(200);

  const deleted = await gw.admin.request('DELETE', `${USERS}/alice-change`);
  expect(deleted.status).toBe(204);
  await gw.admin.waitForDataPlanes(deleted, gw.dps);
  expect((await get('/ba/x', basic('alice-change', 'a new passphrase'))).status).toBe(401);
  expect((await gw.admin.request('GET', USERS)).body).toEqual([]);
  expect((await gw.admin.request('DELETE', `${USERS}/alice-change`)).status).toBe(404);
});

test('a flood of wrong passwords: a right, uncached password is never answered 401; another user is served', async () => {
  await createUser('flooded');
  await createUser('bystander');
  // Many clients guessing the flooded user's password at once, for as long as the checks below take:
  // each guess is a fresh scrypt, so the checks pending stay at their bound the whole time.
  let flooding = true;
  const seen = new Map<number, number>();
  let guess = 0;
  const guesser = async () => {
    while (flooding) {
      const res = await get('/ba/x', basic('flooded', `guess-${guess++}`));
      seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
    }
  };
  const guessers = Array.from({ length: 48 }, guesser);
  try {
    // More guessers than checks may be pending: after two rounds of answers the bound is reached.
    const answered = () => [...seen.values()].reduce((a, b) => a + b, 0);
    await pollUntil(async () => (answered() >= 96 ? true : undefined), { what: 'two rounds of guesses answered', timeoutMs: 30_000 });
    // Another user's right password is checked (the flood holds only its user's share) and passes.
    expect((await get('/ba/x', basic('bystander', PASSWORD))).status).toBe(200);
    // The flooded user's right password: passes, or 503 with Retry-After while its share is full; never 401.
    const own = await get('/ba/x', basic('flooded', PASSWORD));
    expect(own.status === 200 || (own.status === 503 && own.headers['retry-after'] === '1' && own.json !== undefined)).toBe(true);
    expect(own.status).not.toBe(401);
  } finally {
    flooding = false;
    await Promise.all(guessers);
  }
  // Every guess was a 401 (checked) or a 503 (not checked): none passed.
  expect([...seen.keys()].sort()).toEqual([401, 503]);
  // Once the flood is over, the flooded user's right password passes.
  expect((await get('/ba/x', basic('flooded', PASSWORD))).status).toBe(200);
}, 60_000);
