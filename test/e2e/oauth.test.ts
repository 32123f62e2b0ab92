/**
 * OAuth 2.0 bearer enforcement, jwt strategy (docs/proxy.md "Proxy behaviour" errors, §5), end to end: a real authorization
 * service on loopback issues JWTs signed with jose, its token endpoint is proxied by a real data plane
 * configured through a real control plane, and a real upstream records what passes.
 */
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { SignJWT, type JWTPayload } from 'jose';
import type { AdminResponse } from '../helpers/admin-client.js';
import { apiDefinition } from '../helpers/api-definition.js';
import { startAuthService, type AuthService, type TokenMode } from '../helpers/auth-service.js';
import type { HttpResponse } from '../helpers/http-request.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

const HS_SECRET = 'hs-shared-secret-of-32-bytes-or-more';
const ROTATION_OLD = 'rotation-old-secret-of-32-bytes-or-more';
const ROTATION_NEW = 'rotation-new-secret-of-32-bytes-or-more';
const LEGACY_SECRET = 'legacy-secret-of-32-bytes-or-more';
const LEEWAY_SECRET = 'leeway-secret-of-32-bytes-or-more';
const LEEWAY = 30;

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const otherRsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const publicPem = (k: KeyObject) => k.export({ type: 'spki', format: 'pem' }) as string;
const RSA_PEM = publicPem(rsa.publicKey);

interface ServerSpec {
  name: string;
  mode: TokenMode;
  /** token_strategy as POSTed. */
  strategy: Record<string, unknown>;
}

const SERVERS: ServerSpec[] = [
  { name: 'hs', mode: { kind: 'jwt', alg: 'HS256', key: HS_SECRET }, strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: HS_SECRET }] } },
  { name: 'rs', mode: { kind: 'jwt', alg: 'RS256', key: rsa.privateKey }, strategy: { name: 'jwt', settings: [{ alg: 'RS256', key: RSA_PEM }] } },
  {
    name: 'es',
    mode: { kind: 'jwt', alg: 'ES256', key: ec.privateKey },
    strategy: { name: 'jwt', settings: [{ alg: 'ES256', key: publicPem(ec.publicKey) }] },
  },
  {
    name: 'rot',
    mode: { kind: 'jwt', alg: 'HS256', key: ROTATION_NEW },
    strategy: {
      name: 'jwt',
      settings: [
        { alg: 'HS256', key: ROTATION_OLD },
        { alg: 'HS256', key: ROTATION_NEW },
        { alg: 'RS256', key: RSA_PEM },
      ],
    },
  },
  { name: 'legacy', mode: { kind: 'jwt', alg: 'HS256', key: LEGACY_SECRET }, strategy: { name: 'jwt', settings: { secret: LEGACY_SECRET } } },
  {
    name: 'lee',
    mode: { kind: 'jwt', alg: 'HS256', key: LEEWAY_SECRET },
    strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: LEEWAY_SECRET }], leeway: LEEWAY },
  },
];

let gw: Gateway;
let upstream: Upstream;
const auth = new Map<string, AuthService>();

function oauthServer(spec: ServerSpec, authUrl: string): Record<string, unknown> {
  return {
    name: spec.name,
    oauth_endpoints: {
      token: {
        listen_path: `/oauth/${spec.name}/token`,
        upstreams: { balancing: 'roundrobin', targets: [{ target: `${authUrl}/token` }] },
        methods: ['POST'],
      },
    },
    token_strategy: spec.strategy,
  };
}

const protectedApi = (server: string) =>
  apiDefinition({
    name: `api-${server}`,
    listenPath: `/api/${server}/*`,
    targets: [upstream.url],
    plugins: [{ name: 'oauth2', enabled: true, config: { server_name: server } }],
  });

/** An API of the `hs` server whose oauth2 plugin is off. */
const openApi = (name: string, prefix: string) => ({
  ...apiDefinition({ name, listenPath: `/${prefix}/*`, targets: [upstream.url] }),
  plugins: [{ name: 'oauth2', enabled: false, config: { server_name: 'hs' } }],
});

/**
 * A server configured as the shared server `like` (same strategy, same authorization service) and the API it
 * protects, both under `name`: for a test that changes or deletes them, leaving the shared ones as every other test expects.
 */
async function createOwnServer(name: string, like: string): Promise<void> {
  const spec = SERVERS.find((s) => s.name === like)!;
  expect((await gw.admin.createOAuthServer(oauthServer({ ...spec, name }, auth.get(like)!.url))).status).toBe(201);
  const write = await gw.admin.createApi(protectedApi(name));
  expect(write.status).toBe(201);
  await gw.admin.waitForDataPlanes(write, gw.dps);
}

const now = () => Math.floor(Date.now() / 1000);

function sign(alg: string, key: KeyObject | string, claims: JWTPayload = {}, header: Record<string, unknown> = {}): Promise<string> {
  return new SignJWT({ sub: 'attacker-or-client', iat: now(), exp: now() + 300, ...claims })
    .setProtectedHeader({ alg, typ: 'JWT', ...header })
    .sign(typeof key === 'string' ? new TextEncoder().encode(key) : key);
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

/** POST to the proxied token endpoint as a client would. */
async function obtainToken(server: string): Promise<string> {
  const a = auth.get(server)!;
  const res = await gw.dp.request('POST', `/oauth/${server}/token`, {
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: `grant_type=client_credentials&client_id=${a.clientId}&client_secret=${a.clientSecret}`,
  });
  expect(res.status).toBe(200);
  return (res.json as { access_token: string }).access_token;
}

function callApi(server: string, authorization?: string): Promise<HttpResponse> {
  return gw.dp.request('GET', `/api/${server}/resource?x=1`, { headers: authorization === undefined ? {} : { authorization } });
}

function expectGatewayError(res: HttpResponse, status: number, message: string): void {
  expect({ status: res.status, body: res.text, contentType: res.headers['content-type'] }).toEqual({
    status,
    body: JSON.stringify(message),
    contentType: 'application/json',
  });
}

beforeAll(async () => {
  upstream = await startUpstream('oauth-upstream', { kind: 'echo' });
  for (const spec of SERVERS) auth.set(spec.name, await startAuthService(spec.mode));
  gw = await startGateway();
  let last: AdminResponse;
  for (const spec of SERVERS) {
    last = await gw.admin.createOAuthServer(oauthServer(spec, auth.get(spec.name)!.url));
    expect(last.status).toBe(201);
    last = await gw.admin.createApi(protectedApi(spec.name));
    expect(last.status).toBe(201);
  }
  last = await gw.admin.createApi(openApi('api-open', 'open'));
  expect(last.status).toBe(201);
  await gw.admin.waitForDataPlanes(last, gw.dps);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, upstream, ...auth.values())).toBe('');
});

describe('token endpoint through the gateway', () => {
  test('POST returns the token response of the authorization service', async () => {
    const a = auth.get('hs')!;
    const before = a.requests.length;
    const body = `grant_type=client_credentials&client_id=${a.clientId}&client_secret=${a.clientSecret}`;
    const res = await gw.dp.request('POST', '/oauth/hs/token', { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.json).toEqual({ access_token: expect.any(String), token_type: 'Bearer', expires_in: 300 });
    expect((res.json as { access_token: string }).access_token).toBe(a.issued[a.issued.length - 1].accessToken);
    expect(a.requests.slice(before)).toEqual([expect.objectContaining({ method: 'POST', url: '/token', body })]);
  });

  test('the token endpoint itself needs no bearer token, and its errors pass through', async () => {
    const res = await gw.dp.request('POST', '/oauth/hs/token', {
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&client_id=gatehouse-client&client_secret=wrong',
    });
    expect(res.status).toBe(401);
    expect(res.json).toEqual({ error: 'invalid_client' });
  });
});

describe('a valid token passes', () => {
  test.each(['hs', 'rs', 'es', 'rot', 'legacy', 'lee'])(
    '%s: token from the proxied endpoint → 200 from the upstream, Authorization unchanged',
    async (server) => {
      const token = await obtainToken(server);
      const before = upstream.requests.length;
      const res = await callApi(server, `Bearer ${token}`);
      expect(res.status).toBe(200);
      const seen = res.json as RecordedRequest;
      expect(seen.url).toBe(`/api/${server}/resource?x=1`);
      expect(seen.headers.authorization).toBe(`Bearer ${token}`);
      expect(upstream.requests.length).toBe(before + 1);
    },
  );

  test('the scheme is case-insensitive and the header reaches the upstream as sent', async () => {
    const token = await obtainToken('hs');
    const res = await callApi('hs', `bearer ${token}`);
    expect(res.status).toBe(200);
    expect((res.json as RecordedRequest).headers.authorization).toBe(`bearer ${token}`);
  });
});

describe('gateway errors: exact status, JSON-string body, application/json', () => {
  test.each<[string, string | undefined, number, string]>([
    ['no Authorization header', undefined, 400, 'authorization field missing'],
    ['not <scheme> <token>', 'justonevalue', 400, 'authorization field missing'],
    ['Bearer with no token (Janus: 400)', 'Bearer ', 400, 'authorization field missing'],
    ['bare Bearer', 'Bearer', 400, 'authorization field missing'],
    ['Basic scheme', 'Basic Z2F0ZWhvdXNlOnB3', 400, 'bearer token malformed'],
    ['Token scheme', 'Token abc', 400, 'bearer token malformed'],
    ['invalid bearer token', 'Bearer not-a-token', 401, 'access token not authorized'],
  ])('%s', async (_name, authorization, status, message) => {
    const before = upstream.requests.length;
    expectGatewayError(await callApi('hs', authorization), status, message);
    expect(upstream.requests.length).toBe(before);
  });
});

describe('key rotation, legacy secret, RS256/ES256', () => {
  test.each<[string, string, () => Promise<string>, number]>([
    ['rotation: old HS key', 'rot', () => sign('HS256', ROTATION_OLD), 200],
    ['rotation: new HS key', 'rot', () => sign('HS256', ROTATION_NEW), 200],
    ['rotation: RS256 entry', 'rot', () => sign('RS256', rsa.privateKey), 200],
    ['rotation: a retired key', 'rot', () => sign('HS256', 'retired-secret'), 401],
    ['legacy {"secret"} = HS256', 'legacy', () => sign('HS256', LEGACY_SECRET), 200],
    ['legacy secret does not make HS512 acceptable', 'legacy', () => sign('HS512', LEGACY_SECRET), 401],
    ['RS256 server, RS256 token', 'rs', () => sign('RS256', rsa.privateKey), 200],
    ['ES256 server, ES256 token', 'es', () => sign('ES256', ec.privateKey), 200],
    ['ES256 server, RS256 token', 'es', () => sign('RS256', rsa.privateKey), 401],
  ])('%s', async (_name, server, make, status) => {
    const res = await callApi(server, `Bearer ${await make()}`);
    expect(res.status).toBe(status);
    if (status === 401) expectGatewayError(res, 401, 'access token not authorized');
  });
});

describe('leeway', () => {
  // Claims are taken when the test runs: "10 s ago" taken at load would be older by however long the tests before it took.
  test.each<[string, string, () => JWTPayload, number]>([
    ['expired 10 s ago, leeway 30', 'lee', () => ({ exp: now() - 10 }), 200],
    ['expired 10 s ago, no leeway', 'hs', () => ({ exp: now() - 10 }), 401],
    ['expired 60 s ago, leeway 30', 'lee', () => ({ exp: now() - 60 }), 401],
    ['nbf in 10 s, leeway 30', 'lee', () => ({ nbf: now() + 10 }), 200],
    ['nbf in 10 s, no leeway', 'hs', () => ({ nbf: now() + 10 }), 401],
  ])('%s', async (_name, server, claims, status) => {
    const key = server === 'lee' ? LEEWAY_SECRET : HS_SECRET;
    expect((await callApi(server, `Bearer ${await sign('HS256', key, claims())}`)).status).toBe(status);
  });
});

describe('attacks are rejected with 401 "access token not authorized"', () => {
  test.each<[string, string, () => Promise<string> | string]>([
    ['alg none', 'hs', () => `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'x', exp: now() + 300 })}.`],
    ['alg none against RS256', 'rs', () => `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'x', exp: now() + 300 })}.`],
    ['HS256 signed with the RSA public key PEM against an RS256 server', 'rs', () => sign('HS256', RSA_PEM)],
    ['HS256 signed with the RSA public key PEM against a server that also has HS256', 'rot', () => sign('HS256', RSA_PEM)],
    ['expired', 'hs', () => sign('HS256', HS_SECRET, { exp: now() - 5 })],
    ['nbf in the future beyond leeway', 'lee', () => sign('HS256', LEEWAY_SECRET, { nbf: now() + LEEWAY + 60 })],
    ['wrong secret', 'hs', () => sign('HS256', 'not-the-secret')],
    ['wrong RSA key', 'rs', () => sign('RS256', otherRsa.privateKey)],
    ['truncated token', 'hs', async () => (await sign('HS256', HS_SECRET)).slice(0, -6)],
    [
      'payload tampered',
      'hs',
      async () => {
        const [h, , s] = (await sign('HS256', HS_SECRET, { exp: now() - 5 })).split('.');
        return `${h}.${b64({ sub: 'x', exp: now() + 3600 })}.${s}`;
      },
    ],
    ['garbage', 'hs', () => 'garbage!!'],
    ['empty JWT segments', 'hs', () => '..'],
  ])('%s', async (_name, server, make) => {
    const before = upstream.requests.length;
    expectGatewayError(await callApi(server, `Bearer ${await make()}`), 401, 'access token not authorized');
    expect(upstream.requests.length).toBe(before);
  });
});

describe('plugin lifecycle', () => {
  test('a plugin with enabled: false does nothing', async () => {
    const res = await gw.dp.request('GET', '/open/thing');
    expect(res.status).toBe(200);
  });

  test('enabling it makes the API require a token, disabling it again lifts that', async () => {
    const created = await gw.admin.createApi(openApi('api-open-toggle', 'open-toggle'));
    expect(created.status).toBe(201);
    await gw.admin.waitForDataPlanes(created, gw.dps);
    expect((await gw.dp.request('GET', '/open-toggle/thing')).status).toBe(200);

    let write = await gw.admin.updateApi('api-open-toggle', { plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'hs' } }] });
    expect(write.status).toBe(200);
    await gw.admin.waitForDataPlanes(write, gw.dps);
    expectGatewayError(await gw.dp.request('GET', '/open-toggle/thing'), 400, 'authorization field missing');
    const token = await obtainToken('hs');
    expect((await gw.dp.request('GET', '/open-toggle/thing', { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);

    write = await gw.admin.updateApi('api-open-toggle', { plugins: [{ name: 'oauth2', enabled: false, config: { server_name: 'hs' } }] });
    await gw.admin.waitForDataPlanes(write, gw.dps);
    expect((await gw.dp.request('GET', '/open-toggle/thing')).status).toBe(200);
  });

  test('a server referenced by an API cannot be deleted (409); once unreferenced it can', async () => {
    await createOwnServer('legacy-delete', 'legacy');
    const refused = await gw.admin.deleteOAuthServer('legacy-delete');
    expect(refused.status).toBe(409);
    expect(refused.headers['content-type']).toMatch(/^application\/json/);
    // Still enforced with the server in place.
    expect((await callApi('legacy-delete', `Bearer ${await sign('HS256', LEGACY_SECRET)}`)).status).toBe(200);

    expect((await gw.admin.deleteApi('api-legacy-delete')).status).toBe(204);
    const deleted = await gw.admin.deleteOAuthServer('legacy-delete');
    expect(deleted.status).toBe(204);
  });

  test('a key rotated away by PUT stops being accepted', async () => {
    await createOwnServer('rot-put', 'rot');
    const oldToken = await sign('HS256', ROTATION_OLD);
    expect((await callApi('rot-put', `Bearer ${oldToken}`)).status).toBe(200);
    const write = await gw.admin.updateOAuthServer('rot-put', {
      token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: ROTATION_NEW }] },
    });
    expect(write.status).toBe(200);
    await gw.admin.waitForDataPlanes(write, gw.dps);
    expectGatewayError(await callApi('rot-put', `Bearer ${oldToken}`), 401, 'access token not authorized');
    expect((await callApi('rot-put', `Bearer ${await sign('HS256', ROTATION_NEW)}`)).status).toBe(200);
  });

  test('an invalid key is refused by the admin API with the field named', async () => {
    const res = await gw.admin.createOAuthServer(
      oauthServer(
        { name: 'bad-key', mode: { kind: 'opaque' }, strategy: { name: 'jwt', settings: [{ alg: 'RS256', key: 'not a pem' }] } },
        'http://127.0.0.1:1',
      ),
    );
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'token_strategy.settings[0].key is not a valid RSA public key for RS256' });
  });
});
