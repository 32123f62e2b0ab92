/**
 * HS256/384/512 keys shorter than 32 bytes (RFC 7518 §3.2) through a real control plane and data plane:
 * refused at write by default, naming the field and the setting; with ALLOW_SHORT_HMAC_KEYS=true
 * accepted, served by the data plane, warned at every start (naming the short keys) and said on
 * every row of GET /dataplanes; a restart without it serves the stored key and says so.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { apiDefinition } from '../helpers/api-definition.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const SHORT = 'secret'; // Janus's own example key
const LONG = 'a-shared-secret-of-32-bytes-or-more';

let u: Upstream;
let gw: Gateway | undefined;

beforeAll(async () => {
  u = await startUpstream('hmac-upstream');
});

afterEach(async () => {
  if (gw) expect(await stopGatewayAndServers(gw)).toBe('');
  gw = undefined;
});

afterAll(async () => {
  await u.close();
});

const server = (name: string, key: string) => ({
  name,
  oauth_endpoints: { token: { listen_path: `/oauth/${name}/token`, upstreams: { targets: [{ target: `${u.url}/token` }] }, methods: ['POST'] } },
  token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key }] },
});
const protectedApi = (name: string) => ({
  ...apiDefinition({ name: `api-${name}`, listenPath: `/${name}/*`, targets: [u.url] }),
  plugins: [{ name: 'oauth2', config: { server_name: name } }],
});
const token = (key: string) =>
  new SignJWT({ sub: 'client', exp: Math.floor(Date.now() / 1000) + 300 }).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode(key));

const REFUSAL =
  'token_strategy.settings[0].key is shorter than 32 bytes: an HS256/384/512 key needs at least 32 (RFC 7518 §3.2), e.g. openssl rand -base64 32; ' +
  'ALLOW_SHORT_HMAC_KEYS=true on the control plane accepts shorter ones during a migration';

test('by default a short HS key is refused at write (POST, PUT /config), naming the field and the setting; the store is unchanged', async () => {
  gw = await startGateway();
  const created = await gw.admin.createOAuthServer(server('janus', SHORT));
  expect(created.status).toBe(400);
  expect(created.body).toEqual({ error: REFUSAL });
  expect((await gw.admin.request('GET', '/oauth/servers/janus')).status).toBe(404);
  const imported = await gw.admin.request('PUT', '/config', {
    body: { apis: [], oauth_servers: [server('janus', SHORT)], basic_auth_credentials: [], key_auth_credentials: [] },
  });
  expect(imported.status).toBe(400);
  expect(imported.body).toEqual({ error: `oauth_servers[0].${REFUSAL}` });
  expect((await gw.admin.createOAuthServer(server('long', LONG))).status).toBe(201);
  expect((await gw.admin.dataplanes()).body.map((row) => row.allow_short_hmac_keys)).toEqual([undefined]);
});

test('ALLOW_SHORT_HMAC_KEYS=true: accepted and served, warned at every start naming the key, said in /dataplanes; without it, said at start', async () => {
  gw = await startGateway({ controlPlane: { env: { ALLOW_SHORT_HMAC_KEYS: 'true' } } });
  expect((await gw.admin.createOAuthServer(server('janus', SHORT))).status).toBe(201);
  const write = await gw.admin.createApi(protectedApi('janus'));
  expect(write.status).toBe(201);
  await gw.admin.waitForDataPlanes(write, gw.dps);
  // The data plane compiled the snapshot with the short key: a token signed with it passes.
  expect((await gw.dp.request('GET', '/janus/x', { headers: { authorization: `Bearer ${await token(SHORT)}` } })).status).toBe(200);
  expect((await gw.dp.request('GET', '/janus/x', { headers: { authorization: `Bearer ${await token('another')}` } })).status).toBe(401);
  expect((await gw.admin.dataplanes()).body.map((row) => [row.allow_short_hmac_keys, row.last_nack])).toEqual([[true, null]]);

  const startWarnings = () =>
    gw!.cp.process
      .lines()
      .filter((l) => l.json?.level === 40 && String(l.json?.msg).startsWith('ALLOW_SHORT_HMAC_KEYS=true'))
      .map((l) => l.json?.shortKeys);
  expect(startWarnings()).toEqual([[]]);
  expect((await gw.cp.stop()).code).toBe(0);
  await gw.cp.restart();
  expect(startWarnings()).toEqual([['oauth server janus: token_strategy.settings[0].key']]);
});

test('a stored short key without ALLOW_SHORT_HMAC_KEYS: served, an error at start names it, and a rewrite of it is refused', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'gatehouse-hmac-'));
  try {
    const env = { ADMIN_PASSWORD: 'hmac-test-password' };
    gw = await startGateway({ controlPlane: { dataDir, env: { ...env, ALLOW_SHORT_HMAC_KEYS: 'true' } } });
    expect((await gw.admin.createOAuthServer(server('janus', SHORT))).status).toBe(201);
    expect(await gw.stop()).toBe('');
    gw = await startGateway({ controlPlane: { dataDir, env } });
    const errors = gw.cp.process.lines().filter((l) => l.json?.level === 50 && /HS keys are shorter than 32 bytes/.test(String(l.json?.msg)));
    expect(errors.map((l) => l.json?.shortKeys)).toEqual([['oauth server janus: token_strategy.settings[0].key']]);
    expect((await gw.admin.request('GET', '/oauth/servers/janus')).status).toBe(200);
    const rewrite = await gw.admin.request('PUT', '/oauth/servers/janus', { body: server('janus', SHORT) });
    expect(rewrite.status).toBe(400);
    expect(rewrite.body).toEqual({ error: REFUSAL });
    expect((await gw.admin.request('PUT', '/oauth/servers/janus', { body: server('janus', LONG) })).status).toBe(200);
  } finally {
    if (gw) expect(await gw.stop()).toBe('');
    gw = undefined;
    await rm(dataDir, { recursive: true, force: true });
  }
});
