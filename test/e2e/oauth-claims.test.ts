/**
 * OAuth 2.0 token policy end to end (docs/oauth2.md "OAuth 2.0"): a server's issuer and audiences, an API's required scopes,
 * the RFC 6750 challenges, and claims_to_headers, through a real CP and DP, a real upstream that records what
 * reaches it, JWTs signed with jose, and a real RFC 7662 introspection endpoint (an HTTP server of this file).
 */
import { createServer, type Server } from 'node:http';
import { SignJWT, type JWTPayload } from 'jose';
import { listen } from '#proto/listen';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import type { HttpResponse } from '../helpers/http-request.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const SECRET = 'claims-secret-of-32-bytes-or-more';
const ISSUER = 'https://idp.test/';
let gw: Gateway;
let upstream: Upstream;
let introspection: Server;
let introspectionUrl: string;
/** Introspection token → the RFC 7662 response the endpoint gives for it (unknown tokens: inactive). */
const answers = new Map<string, Record<string, unknown>>();
const introspected: string[] = [];

const now = () => Math.floor(Date.now() / 1000);
const sign = (claims: JWTPayload, key = SECRET) =>
  new SignJWT({ sub: 'user-1', iat: now(), exp: now() + 300, ...claims }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(key));
/** What the server of the `orders` API accepts, with scope orders:read. */
const good = (claims: JWTPayload = {}) => sign({ iss: ISSUER, aud: ['shop', 'orders'], scope: 'orders:read profile', ...claims });

const endpoint = (path: string, target: string) => ({ listen_path: path, upstreams: { targets: [{ target }] }, methods: ['POST'] });
const protectedApi = (name: string, server: string, config: object = {}) =>
  apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstream.url], plugins: [{ name: 'oauth2', config: { server_name: server, ...config } }] });
const CLAIM_HEADERS = { sub: 'X-User-Id', email: 'X-User-Email', level: 'X-Level' };

beforeAll(async () => {
  upstream = await startUpstream('claims-upstream', { kind: 'echo' });
  introspection = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const token = new URLSearchParams(Buffer.concat(chunks).toString()).get('token') ?? '';
      introspected.push(token);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answers.get(token) ?? { active: false }));
    });
  });
  introspectionUrl = `http://127.0.0.1:${await listen(introspection, 0, '127.0.0.1')}`;
  gw = await startGateway();
  for (const server of [
    {
      name: 'idp',
      oauth_endpoints: { token: endpoint('/idp/token', `${upstream.url}/token`) },
      token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: SECRET }], issuer: ISSUER, audiences: ['orders'] },
    },
    {
      name: 'idp-moving',
      oauth_endpoints: { token: endpoint('/idp-moving/token', `${upstream.url}/token`) },
      token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: SECRET }], audiences: ['orders'] },
    },
    {
      name: 'intro',
      oauth_endpoints: {
        token: endpoint('/intro/token', `${upstream.url}/token`),
        introspect: endpoint('/intro/introspect', `${introspectionUrl}/introspect`),
      },
      token_strategy: { name: 'introspection', settings: { cache_ttl: 60 }, issuer: ISSUER, audiences: ['orders'] },
    },
    { name: 'opaque', oauth_endpoints: { token: endpoint('/opaque/token', `${upstream.url}/token`) }, token_strategy: { name: 'storage' } },
  ]) {
    const res = await gw.admin.createOAuthServer(server);
    expect(res.status).toBe(201);
  }
  await createApis(gw, [
    protectedApi('orders', 'idp', { scopes: ['orders:read'], claims_to_headers: CLAIM_HEADERS }),
    protectedApi('moving', 'idp-moving'),
    protectedApi('intro-orders', 'intro', { scopes: ['orders:read'], claims_to_headers: { sub: 'X-User-Id', client_id: 'X-Client-Id' } }),
  ]);
}, 60_000);

afterAll(async () => {
  const problems = gw ? await gw.stop() : '';
  await upstream?.close();
  introspection?.closeAllConnections();
  await new Promise((resolve) => introspection?.close(resolve));
  expect(problems).toBe('');
});

const call = (path: string, headers: Record<string, string> = {}) => gw.dp.request('GET', path, { headers });
const bearer = (token: string, headers: Record<string, string> = {}) => ({ authorization: `Bearer ${token}`, ...headers });

/** The request reached no upstream: the refusal was the gateway's. */
async function refusedBefore(upstreamCount: number, res: Promise<HttpResponse>): Promise<HttpResponse> {
  const answer = await res;
  expect(upstream.requests.length).toBe(upstreamCount);
  return answer;
}

describe('jwt: issuer and audiences', () => {
  test('the right issuer and an audience among the token’s pass', async () => {
    const res = await call('/orders/x', bearer(await good()));
    expect(res.status).toBe(200);
    expect(upstream.last()?.url).toBe('/orders/x');
  });

  test.each([
    ['another audience', { aud: 'billing' }],
    ['no aud', { aud: undefined }],
    ['another issuer', { iss: 'https://evil.test/' }],
    ['no iss', { iss: undefined }],
  ])('%s → 401 with the invalid_token challenge; the upstream is not reached', async (_row, claims) => {
    const before = upstream.requests.length;
    const res = await refusedBefore(before, call('/orders/x', bearer(await good(claims as JWTPayload))));
    expect(res.status).toBe(401);
    expect(res.json).toBe('access token not authorized');
    expect(res.headers['www-authenticate']).toBe('Bearer realm="orders", error="invalid_token"');
  });

  test('a changed audience list applies at once: a token accepted (and cached) before is refused after', async () => {
    const token = await sign({ aud: 'orders' });
    expect((await call('/moving/x', bearer(token))).status).toBe(200);
    expect((await call('/moving/x', bearer(token))).status).toBe(200);
    const write = await gw.admin.updateOAuthServer('idp-moving', { token_strategy: { audiences: ['billing'] } });
    expect(write.status).toBe(200);
    expect((write.body as { token_strategy: { audiences: string[] } }).token_strategy.audiences).toEqual(['billing']);
    await gw.admin.waitForDataPlanes(write, gw.dps);
    expect((await call('/moving/x', bearer(token))).status).toBe(401);
    expect((await call('/moving/x', bearer(await sign({ aud: 'billing' })))).status).toBe(200);
  });
});

describe('required scopes', () => {
  test('a token without the scope → 403 insufficient scope with the RFC 6750 challenge naming it; the upstream is not reached', async () => {
    const before = upstream.requests.length;
    const res = await refusedBefore(before, call('/orders/x', bearer(await good({ scope: 'profile orders:write' }))));
    expect(res.status).toBe(403);
    expect(res.json).toBe('insufficient scope');
    expect(res.headers['www-authenticate']).toBe('Bearer realm="orders", error="insufficient_scope", scope="orders:read"');
  });

  test('scp as an array (Okta) and as a string (Entra ID) count', async () => {
    expect((await call('/orders/x', bearer(await good({ scope: undefined, scp: ['profile', 'orders:read'] })))).status).toBe(200);
    expect((await call('/orders/x', bearer(await good({ scope: undefined, scp: 'orders:read' })))).status).toBe(200);
  });
});

describe('RFC 6750 challenges on the 400s', () => {
  test('no Authorization → 400 with a bare challenge (no error code: the client sent no bearer credentials)', async () => {
    const res = await call('/orders/x');
    expect(res.status).toBe(400);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="orders"');
  });

  test('another scheme → 400 with a bare challenge', async () => {
    const res = await call('/orders/x', { authorization: 'Basic dTpw' });
    expect([res.status, res.json]).toEqual([400, 'bearer token malformed']);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="orders"');
  });

  test('an Authorization that is not `Bearer <token>` → 400 invalid_request', async () => {
    const res = await call('/orders/x', { authorization: 'Bearer a b' });
    expect([res.status, res.json]).toEqual([400, 'authorization field missing']);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="orders", error="invalid_request"');
  });
});

describe('claims_to_headers', () => {
  test('claims reach the upstream as headers; the client’s own copies are dropped', async () => {
    const token = await good({ sub: 'u-42', email: 'a@b.test', level: 3 });
    const res = await call('/orders/x', bearer(token, { 'x-user-id': 'admin', 'X-Level': '99' }));
    expect(res.status).toBe(200);
    const seen = upstream.last()!;
    expect([seen.headers['x-user-id'], seen.headers['x-user-email'], seen.headers['x-level']]).toEqual(['u-42', 'a@b.test', '3']);
    expect(seen.rawHeaders.filter((name) => name.toLowerCase() === 'x-user-id' || name.toLowerCase() === 'x-level')).toHaveLength(2);
  });

  test('a claim the token lacks, or that is not header-safe, sends no header, and the client’s forged copy is still dropped', async () => {
    const token = await good({ email: undefined, sub: 'u\r\nX-Admin: true', level: { nested: true } });
    const res = await call('/orders/x', bearer(token, { 'X-User-Email': 'forged@x.test', 'X-User-Id': 'forged' }));
    expect(res.status).toBe(200);
    const seen = upstream.last()!.headers;
    expect([seen['x-user-email'], seen['x-user-id'], seen['x-level'], seen['x-admin']]).toEqual([undefined, undefined, undefined, undefined]);
  });
});

describe('introspection: issuer and audiences from the response, scopes, claims', () => {
  const active = (extra: Record<string, unknown>) => ({
    active: true,
    exp: now() + 600,
    iss: ISSUER,
    aud: 'orders',
    scope: 'orders:read',
    sub: 'svc-7',
    client_id: 'app',
    ...extra,
  });

  test('an active token with the issuer, audience and scope passes; its members reach the upstream as headers, forged copies do not', async () => {
    answers.set('intro-good', active({}));
    const res = await call('/intro-orders/x', bearer('intro-good', { 'X-Client-Id': 'forged' }));
    expect(res.status).toBe(200);
    const seen = upstream.last()!.headers;
    expect([seen['x-user-id'], seen['x-client-id']]).toEqual(['svc-7', 'app']);
  });

  test('an answer is cached with what it grants; one keeping over 8 KiB of members is answered but asked again every time', async () => {
    answers.set('intro-small', active({}));
    answers.set('intro-big', active(Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`m${i}`, 'x'.repeat(1000)]))));
    for (const token of ['intro-small', 'intro-big', 'intro-small', 'intro-big']) {
      const res = await call('/intro-orders/x', bearer(token));
      expect([res.status, upstream.last()!.headers['x-user-id']]).toEqual([200, 'svc-7']);
    }
    expect(['intro-small', 'intro-big'].map((t) => introspected.filter((seen) => seen === t).length)).toEqual([1, 2]);
  });

  test('a scope missing from the response → 403 insufficient_scope', async () => {
    answers.set('intro-noscope', active({ scope: 'profile' }));
    const before = upstream.requests.length;
    const res = await refusedBefore(before, call('/intro-orders/x', bearer('intro-noscope')));
    expect(res.status).toBe(403);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="intro-orders", error="insufficient_scope", scope="orders:read"');
  });

  test.each([
    ['another audience', { aud: ['billing'] }],
    ['no aud (optional in RFC 7662, but asked for here: refused)', { aud: undefined }],
    ['another issuer', { iss: 'https://evil.test/' }],
    ['no iss', { iss: undefined }],
  ])('%s → 401 invalid_token', async (row, extra) => {
    const token = `intro-${row.replace(/\W+/g, '-')}`;
    answers.set(token, active(extra));
    const before = upstream.requests.length;
    const res = await refusedBefore(before, call('/intro-orders/x', bearer(token)));
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="intro-orders", error="invalid_token"');
  });
});

describe('refused configurations', () => {
  test('scopes or claims_to_headers with a storage server: 400 naming the field, nothing stored', async () => {
    const res = await gw.admin.createApi(protectedApi('opaque-api', 'opaque', { scopes: ['a'] }));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error:
        'plugins[0].config.scopes needs an oauth server with the jwt or introspection strategy ("opaque" is storage): a stored token carries no scopes or claims',
    });
    expect((await gw.admin.getApi('opaque-api')).status).toBe(404);
  });

  test('a server under such an API cannot turn storage', async () => {
    const res = await gw.admin.updateOAuthServer('idp', { token_strategy: { name: 'storage', settings: {}, issuer: null, audiences: null } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: 'token_strategy.name cannot be "storage" while the oauth2 plugin of api "orders" sets scopes: a stored token carries no scopes or claims',
    });
  });

  test('a claim header the gateway owns: 400 naming it', async () => {
    const res = await gw.admin.createApi(protectedApi('forging', 'idp', { claims_to_headers: { sub: 'X-Consumer-Username' } }));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'plugins[0].config.claims_to_headers.sub is set by the gateway and cannot carry a claim' });
  });
});
