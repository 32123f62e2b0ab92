/**
 * Secrets are write-only, through a real CP and DP: a viewer token reads every definition endpoint, the
 * configuration export, a kept version and /explain, and finds none of the secrets (an HS key, an
 * introspection client secret, openid_connect's client and cookie secrets, password and key hashes).
 * What it reads cannot forge an identity: a JWT signed with the key it read and an OIDC session cookie
 * sealed with the cookie secret it read are refused, where the same forgeries made with the real
 * secrets pass (so the probe would catch a leak). A definition read, edited and written back keeps its
 * secrets (PUT, PATCH, PUT /config); `?secrets=include` is an admin's alone, and logged without the secret.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { openidConnectPlugin } from '#proto/plugins/openid-connect';
import { seal } from '../../data-plane/src/auth/sealed-cookie.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { createAdminClient, type AdminClient } from '../helpers/admin-client.js';
import { startOidcProvider, type OidcProvider } from '../helpers/oidc-provider.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const HS_KEY = 'the-hs256-key-of-the-idp-0123456789abcdef';
const INTROSPECTION_SECRET = 'introspection client secret 42';
const COOKIE_SECRET = 'the cookie secret, at least 32 characters long';
const PASSWORD = 'basic-user-password';
const API_KEY = 'key-auth-api-key-0123456789abcdef';
const VIEWER = { username: 'auditor', password: 'auditor-password-123' };

let gw: Gateway;
let u: Upstream;
let idp: OidcProvider;
let viewer: AdminClient;
/** Everything secret the configuration holds, hashes included (read back with ?secrets=include). */
let secrets: string[];

const endpoint = (path: string, target: string) => ({ listen_path: path, upstreams: { targets: [{ target }] }, methods: ['POST'] });
const oidcConfig = () => ({ issuer: idp.issuer, client_id: idp.clientId, client_secret: idp.clientSecret, cookie_secret: COOKIE_SECRET });

beforeAll(async () => {
  u = await startUpstream('secrets-upstream', { kind: 'echo' });
  idp = await startOidcProvider();
  gw = await startGateway({ controlPlane: { env: { ADMIN_VIEWER_USER: VIEWER.username, ADMIN_VIEWER_PASSWORD: VIEWER.password } } });
  const writes = [
    gw.admin.createOAuthServer({
      name: 'idp',
      oauth_endpoints: { token: endpoint('/idp/token', `${u.url}/token`) },
      token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: HS_KEY }] },
    }),
    gw.admin.createOAuthServer({
      name: 'intro',
      oauth_endpoints: { token: endpoint('/intro/token', `${u.url}/token`), introspect: endpoint('/intro/introspect', `${u.url}/introspect`) },
      token_strategy: { name: 'introspection', settings: { client_id: 'gatehouse', client_secret: INTROSPECTION_SECRET } },
    }),
  ];
  for (const w of writes) expect((await w).status).toBe(201);
  for (const api of [
    apiDefinition({ name: 'jwt-api', listenPath: '/jwt/*', targets: [u.url], plugins: [{ name: 'oauth2', config: { server_name: 'idp' } }] }),
    apiDefinition({ name: 'oidc-api', listenPath: '/app/*', targets: [u.url], plugins: [{ name: 'openid_connect', config: oidcConfig() }] }),
  ]) {
    expect((await gw.admin.createApi(api)).status).toBe(201);
  }
  expect((await gw.admin.request('POST', '/credentials/basic_auth', { body: { username: 'bob', password: PASSWORD } })).status).toBe(201);
  const last = await gw.admin.request('POST', '/credentials/key_auth', { body: { username: 'kim', key: API_KEY } });
  expect(last.status).toBe(201);
  await gw.admin.waitForDataPlanes(last, gw.dps);
  viewer = await createAdminClient({ adminUrl: gw.cp.adminUrl, ...VIEWER });
  const full = (await gw.admin.request('GET', '/config?secrets=include')).body;
  secrets = [
    HS_KEY,
    INTROSPECTION_SECRET,
    COOKIE_SECRET,
    idp.clientSecret,
    PASSWORD,
    API_KEY,
    full.basic_auth_credentials[0].password_hash,
    full.key_auth_credentials[0].key_hash,
  ];
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u, idp)).toBe('');
});

const now = () => Math.floor(Date.now() / 1000);
const signJwt = (key: string) =>
  new SignJWT({ sub: 'victim' }).setProtectedHeader({ alg: 'HS256' }).setIssuedAt().setExpirationTime('5m').sign(new TextEncoder().encode(key));
/** A session cookie as the gateway seals it, for whoever `cookieSecret` lets one be made. */
const sessionCookie = (cookieSecret: string) => {
  const c = openidConnectPlugin.compile(openidConnectPlugin.schema.parse({ ...oidcConfig(), cookie_secret: cookieSecret }));
  return `${c.cookieName}=${seal(c.cookieKey, c.cookieName, { sub: 'victim', exp: now() + 300 })}`;
};

test('a viewer reads every definition endpoint, the export, a kept version and /explain, and finds no secret', async () => {
  const version = (await viewer.request('GET', '/config')).snapshotVersion!;
  const reads = [
    viewer.request('GET', '/apis'),
    viewer.request('GET', '/apis?limit=10'),
    viewer.request('GET', '/apis/oidc-api'),
    viewer.request('GET', '/oauth/servers'),
    viewer.request('GET', '/oauth/servers/idp'),
    viewer.request('GET', '/oauth/servers/intro'),
    viewer.request('GET', '/credentials/basic_auth'),
    viewer.request('GET', '/credentials/key_auth'),
    viewer.request('GET', '/config'),
    viewer.request('GET', `/config/history/${version}`),
    viewer.request('GET', '/config/history'),
    viewer.request('POST', '/explain', { body: { method: 'GET', host: 'x', path: '/app/x' } }),
  ];
  for (const res of await Promise.all(reads)) {
    expect(res.status).toBe(200);
    for (const secret of secrets) expect(res.text).not.toContain(secret);
  }
  const doc = (await viewer.request('GET', '/config')).body;
  expect(doc.oauth_servers.find((s: { name: string }) => s.name === 'idp').token_strategy.settings).toEqual([{ alg: 'HS256', key: '<redacted>' }]);
  expect(doc.oauth_servers.find((s: { name: string }) => s.name === 'intro').token_strategy.settings.client_secret).toBe('<redacted>');
  expect(doc.apis.find((a: { name: string }) => a.name === 'oidc-api').plugins[0].config).toMatchObject({
    client_secret: '<redacted>',
    cookie_secret: '<redacted>',
  });
  expect(doc.basic_auth_credentials).toEqual([{ username: 'bob', password_hash: '<redacted>' }]);
  expect(doc.key_auth_credentials).toEqual([{ username: 'kim', key_hash: '<redacted>' }]);
});

test('a JWT signed with the key a viewer reads is refused; one signed with the real key passes', async () => {
  const read = (await viewer.request('GET', '/oauth/servers/idp')).body.token_strategy.settings[0].key;
  const forged = await gw.dp.request('GET', '/jwt/x', { headers: { authorization: `Bearer ${await signJwt(read)}` } });
  expect(forged.status).toBe(401);
  const real = await gw.dp.request('GET', '/jwt/x', { headers: { authorization: `Bearer ${await signJwt(HS_KEY)}` } });
  expect(real.status).toBe(200);
});

test('an OIDC session cookie sealed with the cookie secret a viewer reads is refused; one sealed with the real secret passes', async () => {
  const read = (await viewer.request('GET', '/apis/oidc-api')).body.plugins[0].config.cookie_secret;
  // The marker itself is too short to be a cookie secret: the forger pads it as best they can.
  const forged = await gw.dp.request('GET', '/app/x', { headers: { cookie: sessionCookie(read.padEnd(32, read)) } });
  expect(forged.status).toBe(401);
  const real = await gw.dp.request('GET', '/app/x', { headers: { cookie: sessionCookie(COOKIE_SECRET) } });
  expect(real.status).toBe(200);
  expect(u.last()?.headers['x-authenticated-user']).toBe('victim');
});

test('GET → edit → PUT of a redacted definition keeps its secrets; PATCH too', async () => {
  const api = (await gw.admin.getApi('oidc-api')).body;
  const put = await gw.admin.updateApi('oidc-api', { ...api, proxy: { ...api.proxy, listen_path: '/app2/*' } });
  expect(put.status).toBe(200);
  expect(put.body.plugins[0].config.cookie_secret).toBe('<redacted>');
  const server = (await gw.admin.getOAuthServer('idp')).body;
  const patched = await gw.admin.request('PATCH', '/oauth/servers/idp', { body: { token_strategy: { ...server.token_strategy, leeway: 5 } } });
  expect(patched.status).toBe(200);
  await gw.admin.waitForDataPlanes(patched, gw.dps);
  // The stored secrets are the ones written first: the forgery with the real ones still passes, on the edited route.
  expect((await gw.dp.request('GET', '/app2/x', { headers: { cookie: sessionCookie(COOKIE_SECRET) } })).status).toBe(200);
  expect((await gw.dp.request('GET', '/jwt/x', { headers: { authorization: `Bearer ${await signJwt(HS_KEY)}` } })).status).toBe(200);
  const stored = (await gw.admin.request('GET', '/config?secrets=include')).body;
  expect(stored.oauth_servers.find((s: { name: string }) => s.name === 'idp').token_strategy.settings).toEqual([{ alg: 'HS256', key: HS_KEY }]);
  expect(stored.apis.find((a: { name: string }) => a.name === 'oidc-api').plugins[0].config).toMatchObject({
    client_secret: idp.clientSecret,
    cookie_secret: COOKIE_SECRET,
  });
  expect((await gw.admin.updateApi('oidc-api', { proxy: { listen_path: '/app/*' } })).status).toBe(200);
});

test('PUT /config of the redacted export changes nothing; a marker with no stored secret behind it is refused, nothing stored', async () => {
  const exported = await gw.admin.request('GET', '/config');
  const reimport = await gw.admin.request('PUT', '/config', { body: exported.body });
  expect(reimport.status).toBe(200);
  expect(reimport.body.changed).toBe(false);

  const renamed = {
    ...exported.body,
    oauth_servers: exported.body.oauth_servers.map((s: { name: string }) => (s.name === 'idp' ? { ...s, name: 'idp-copy' } : s)),
  };
  const refused = await gw.admin.request('PUT', '/config', { body: { ...renamed, apis: [] } });
  expect(refused.status).toBe(400);
  expect(refused.body.error).toMatch(/^oauth_servers\[\d\]\.token_strategy\.settings\[0\]\.key is <redacted>, but there is no stored secret/);
  const created = await gw.admin.createOAuthServer({
    name: 'fresh',
    oauth_endpoints: { token: endpoint('/fresh/token', `${u.url}/token`) },
    token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: '<redacted>' }] },
  });
  expect(created).toMatchObject({ status: 400, body: { error: expect.stringMatching(/^token_strategy\.settings\[0\]\.key is <redacted>/) } });
  expect((await gw.admin.request('GET', '/config')).snapshotVersion).toBe(exported.snapshotVersion);
});

test('the store, its journal and the history keep the real secrets (data planes need them); the marker is never stored', async () => {
  // After the redacted round trips of the other tests (whatever their order): write one here too.
  const shown = (await gw.admin.getOAuthServer('intro')).body;
  expect((await gw.admin.updateOAuthServer('intro', { ...shown, token_strategy: { ...shown.token_strategy, leeway: 2 } })).status).toBe(200);
  const files = async (dir: string): Promise<string[]> =>
    (await Promise.all((await readdir(dir, { withFileTypes: true })).map((e) => (e.isDirectory() ? files(join(dir, e.name)) : [join(dir, e.name)])))).flat();
  const stored = (await Promise.all((await files(gw.cp.dataDir)).map((f) => readFile(f, 'utf8')))).join('\n');
  for (const secret of [HS_KEY, INTROSPECTION_SECRET, COOKIE_SECRET, idp.clientSecret]) expect(stored).toContain(secret);
  expect(stored).not.toContain('<redacted>');
});

test('?secrets=include: 403 for a viewer, the secrets for an admin, logged with who and never what', async () => {
  expect((await viewer.request('GET', '/config?secrets=include')).status).toBe(403);
  const version = (await viewer.request('GET', '/config')).snapshotVersion!;
  expect((await viewer.request('GET', `/config/history/${version}?secrets=include`)).status).toBe(403);
  expect((await gw.admin.request('GET', '/config?secrets=all')).status).toBe(400);
  const full = await gw.admin.request('GET', '/config?secrets=include');
  expect(full.text).toContain(HS_KEY);
  expect(full.text).toContain(COOKIE_SECRET);
  const logs = gw.cp.recentLogs(400);
  const exports = logs.split('\n').filter((l) => l.includes('configuration exported with secrets'));
  expect(exports.length).toBeGreaterThan(0);
  expect(exports.at(-1)).toContain(`"user":"${gw.cp.username}"`);
  expect(exports.at(-1)).toMatch(/"time":\d+/);
  for (const secret of secrets) expect(logs).not.toContain(secret);
});
