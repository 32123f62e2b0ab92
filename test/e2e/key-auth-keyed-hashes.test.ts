/**
 * key_auth hashes keyed with the installation key, through real control and data planes: a key written
 * through the admin API is stored (store files, `?secrets=include` export) as `hmac-sha256$` under the
 * key the CP generated into DATA_DIR, and authenticates through a data plane; the same stored hash under
 * another installation key (KEY_AUTH_HASH_KEY) does not; an unkeyed `sha256$` hash still authenticates
 * and is named at every start; a CP restart keeps the generated key; a data plane started from its
 * snapshot cache with no CP reachable still verifies keyed hashes.
 */
import { createHash, createHmac } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { freePort } from '../helpers/free-port.js';
import { pollUntil } from '../helpers/poll-until.js';
import { startDataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

const KEYS = '/credentials/key_auth';
const OTHER_INSTALLATION_KEY = 'another-installation-key-0123456789abcdef';
const keyed = (installationKey: string, key: string) => `hmac-sha256$${createHmac('sha256', installationKey).update(key).digest('base64url')}`;
const unkeyed = (key: string) => `sha256$${createHash('sha256').update(key).digest('base64url')}`;
const installationKeyOf = async (g: Gateway) => (await readFile(join(g.cp.dataDir, 'key-auth-hash-key'), 'utf8')).trim();
const withKey = (g: Gateway, key: string) => g.dp.request('GET', '/kh/x', { headers: { apikey: key } });

async function createCredential(g: Gateway, username: string, key: string): Promise<void> {
  const created = await g.admin.request('POST', KEYS, { body: { username, key } });
  expect(created.status).toBe(201);
  await g.admin.waitForDataPlanes(created, g.dps);
}

/** The key_auth credentials in the CP's store files (the base file and the journal of writes since). */
async function storedHashes(g: Gateway): Promise<string> {
  const files = await Promise.all(['store.json', 'store.journal'].map((f) => readFile(join(g.cp.dataDir, f), 'utf8').catch(() => '')));
  return files.join('\n');
}

beforeAll(async () => {
  u = await startUpstream('key-hash-upstream');
  gw = await startGateway();
  await createApis(gw, [{ ...apiDefinition({ name: 'kh', listenPath: '/kh/*', targets: [u.url] }), plugins: [{ name: 'key_auth' }] }]);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u)).toBe('');
});

test('a key written through the admin API is stored as HMAC-SHA256 under the generated installation key, and authenticates through the data plane', async () => {
  const installationKey = await installationKeyOf(gw);
  expect(installationKey).toMatch(/^[A-Za-z0-9_-]{43}$/);
  expect((await stat(join(gw.cp.dataDir, 'key-auth-hash-key'))).mode & 0o777).toBe(0o600);
  const key = 'ann-key-0123456789abcdef';
  await createCredential(gw, 'ann', key);

  const files = await storedHashes(gw);
  expect(files).toContain(keyed(installationKey, key));
  expect(files).not.toContain(unkeyed(key));
  expect(files).not.toContain(key);
  const exported = await gw.admin.request('GET', '/config?secrets=include');
  expect(exported.body.key_auth_credentials).toContainEqual({ username: 'ann', key_hash: keyed(installationKey, key) });

  expect((await withKey(gw, key)).status).toBe(200);
  expect(u.last()!.headers['x-consumer-username']).toBe('ann');
  expect((await withKey(gw, `${key}x`)).status).toBe(401);
  // The stored digest itself is no key.
  expect((await withKey(gw, keyed(installationKey, key))).status).toBe(401);
});

test('an export with secrets imported under another installation key does not authenticate the key it was made from', async () => {
  const key = 'bea-key-0123456789abcdef';
  await createCredential(gw, 'bea', key);
  const exported = (await gw.admin.request('GET', '/config?secrets=include')).body;
  const other = await startGateway({ controlPlane: { env: { KEY_AUTH_HASH_KEY: OTHER_INSTALLATION_KEY } } });
  try {
    // KEY_AUTH_HASH_KEY set: nothing is generated.
    await expect(stat(join(other.cp.dataDir, 'key-auth-hash-key'))).rejects.toThrow(/ENOENT/);
    const imported = await other.admin.request('PUT', '/config', { body: exported });
    expect(imported.status).toBe(200);
    await other.admin.waitForDataPlanes(imported, other.dps);
    expect((await withKey(gw, key)).status).toBe(200);
    expect((await withKey(other, key)).status).toBe(401);
    // Written again there, it is hashed under that installation's key and authenticates.
    const rewritten = await other.admin.request('PUT', `${KEYS}/bea`, { body: { key } });
    expect(rewritten.status).toBe(200);
    await other.admin.waitForDataPlanes(rewritten, other.dps);
    expect((await withKey(other, key)).status).toBe(200);
    expect(await storedHashes(other)).toContain(keyed(OTHER_INSTALLATION_KEY, key));
  } finally {
    expect(await other.stop()).toBe('');
  }
}, 60_000);

test('an unkeyed sha256$ hash still authenticates and is named at every start; a restart keeps the generated installation key', async () => {
  const installationKey = await installationKeyOf(gw);
  const keyedKey = 'cal-key-0123456789abcdef';
  await createCredential(gw, 'cal', keyedKey);
  const legacyKey = 'dan-legacy-key-0123456789';
  const current = (await gw.admin.request('GET', '/config')).body;
  const imported = await gw.admin.request('PUT', '/config', {
    body: { ...current, key_auth_credentials: [...current.key_auth_credentials, { username: 'dan', key_hash: unkeyed(legacyKey) }] },
  });
  expect(imported.status).toBe(200);
  await gw.admin.waitForDataPlanes(imported, gw.dps);
  expect((await withKey(gw, legacyKey)).status).toBe(200);
  expect(u.last()!.headers['x-consumer-username']).toBe('dan');

  expect((await gw.cp.stop()).code).toBe(0);
  await gw.cp.restart();
  const warning = await pollUntil(
    async () => gw.cp.process.lines().find((l) => typeof l.json?.msg === 'string' && (l.json.msg as string).includes('unkeyed SHA-256')),
    {
      what: 'the warning of unkeyed key_auth hashes',
    },
  );
  expect(warning.json).toMatchObject({ level: 40, count: 1, usernames: ['dan'] });

  expect(await installationKeyOf(gw)).toBe(installationKey);
  const reconnected = await gw.admin.request('POST', KEYS, { body: { username: 'eve', key: 'eve-key-0123456789abcdef' } });
  expect(reconnected.status).toBe(201);
  await gw.admin.waitForDataPlanes(reconnected, gw.dps);
  expect(await storedHashes(gw)).toContain(keyed(installationKey, 'eve-key-0123456789abcdef'));
  for (const key of [keyedKey, legacyKey, 'eve-key-0123456789abcdef']) expect((await withKey(gw, key)).status).toBe(200);
}, 60_000);

test('a data plane started from its snapshot cache with no control plane reachable verifies keyed hashes', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'gatehouse-key-cache-'));
  const env = { SNAPSHOT_CACHE: join(dir, 'snapshot.json') };
  try {
    const key = 'fay-key-0123456789abcdef';
    const created = await gw.admin.request('POST', KEYS, { body: { username: 'fay', key } });
    expect(created.status).toBe(201);
    const first = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env });
    try {
      await gw.admin.waitForDataPlanes(created, [first]);
      expect((await first.request('GET', '/kh/x', { headers: { apikey: key } })).status).toBe(200);
      expect((await first.stop()).code).toBe(0);
    } finally {
      if (first.process.running()) await first.kill();
    }
    const cached = await readFile(env.SNAPSHOT_CACHE, 'utf8');
    expect(JSON.parse(cached).key_auth_hash_key).toBe(await installationKeyOf(gw));
    expect((await stat(env.SNAPSHOT_CACHE)).mode & 0o777).toBe(0o600);

    const orphan = await startDataPlane({ controlPlaneAddr: `127.0.0.1:${await freePort()}`, env });
    try {
      expect((await orphan.readyz()).status).toBe(200);
      const res = await orphan.request('GET', '/kh/x', { headers: { apikey: key } });
      expect(res.status).toBe(200);
      expect((await orphan.request('GET', '/kh/x', { headers: { apikey: `${key}x` } })).status).toBe(401);
    } finally {
      expect((await orphan.stop()).code).toBe(0);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 60_000);
