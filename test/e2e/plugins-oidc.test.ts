/**
 * openid_connect through a real control plane and data plane, a real upstream and a real minimal OpenID provider
 * (test/helpers/oidc-provider.ts): the browser's redirects followed by hand with a cookie jar, the session cookie
 * sealed by the gateway, what the upstream sees, and every refusal (tampered cookie, wrong state, a code injected
 * into another sign-in, no session without a browser, host injection, bad configs).
 */
import { apiDefinition } from '../helpers/api-definition.js';
import type { HttpResponse } from '../helpers/http-request.js';
import { startOidcProvider, type OidcProvider } from '../helpers/oidc-provider.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';
import { httpRequest } from '../helpers/http-request.js';
import { metricValue } from '../helpers/metric-value.js';

let gw: Gateway;
let u: Upstream;
let idp: OidcProvider;

const COOKIE_SECRET = 'a cookie secret of at least 32 characters!';
const HTML = { accept: 'text/html,application/xhtml+xml' };

const config = (extra: Record<string, unknown> = {}) => ({
  issuer: idp.issuer,
  client_id: idp.clientId,
  client_secret: idp.clientSecret,
  cookie_secret: COOKIE_SECRET,
  scopes: ['email'],
  claims_to_headers: { email: 'X-User-Email' },
  ...extra,
});

/** `name=value` of each Set-Cookie, by name. */
function setCookies(res: HttpResponse): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of [res.headers['set-cookie'] ?? []].flat()) {
    const [pair] = line.split(';');
    const eq = pair!.indexOf('=');
    out.set(pair!.slice(0, eq), pair!.slice(eq + 1));
  }
  return out;
}

const cookieHeader = (jar: Map<string, string>) =>
  [...jar]
    .filter(([, v]) => v !== '')
    .map(([k, v]) => `${k}=${v}`)
    .join('; ');

/** A gateway URL's path and query (the Location of the gateway's redirects is absolute). */
const pathOf = (location: string) => {
  const url = new URL(location);
  expect(url.origin).toBe(gw.dp.proxyUrl);
  return `${url.pathname}${url.search}`;
};

/** The first leg: the gateway's redirect to the IdP, and the flow cookie it set. */
async function startSignIn(path: string): Promise<{ authorize: URL; jar: Map<string, string> }> {
  const res = await gw.dp.request('GET', path, { headers: HTML });
  expect(res.status).toBe(302);
  return { authorize: new URL(String(res.headers.location)), jar: setCookies(res) };
}

/** The IdP's answer to the authorization request: its redirect back to the gateway's callback. */
async function authorizeAt(authorize: URL): Promise<string> {
  const res = await httpRequest(authorize.href);
  expect(res.status).toBe(302);
  return pathOf(String(res.headers.location));
}

/** The whole flow for `path`; returns the cookie jar holding the session. */
async function signIn(path: string, returnsTo = path): Promise<Map<string, string>> {
  const { authorize, jar } = await startSignIn(path);
  const callback = await gw.dp.request('GET', await authorizeAt(authorize), { headers: { ...HTML, cookie: cookieHeader(jar) } });
  expect(callback.status).toBe(302);
  expect(pathOf(String(callback.headers.location))).toBe(returnsTo);
  for (const [k, v] of setCookies(callback)) jar.set(k, v);
  return jar;
}

beforeAll(async () => {
  u = await startUpstream('oidc-upstream', { kind: 'echo' });
  idp = await startOidcProvider();
  gw = await startGateway();
  const created = await gw.admin.createApi(
    apiDefinition({ name: 'app', listenPath: '/app/*', targets: [u.url], plugins: [{ name: 'openid_connect', config: config() }] }),
  );
  expect(created.body).toMatchObject({ name: 'app' });
  await gw.admin.waitForDataPlanes(created, gw.dps);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u, idp)).toBe('');
});

test('a browser is sent to the IdP with code, PKCE S256, state and nonce, and comes back signed in to the page it asked for', async () => {
  const { authorize, jar } = await startSignIn('/app/page?x=1');
  expect(`${authorize.origin}${authorize.pathname}`).toBe(`${idp.issuer}/authorize`);
  const p = authorize.searchParams;
  expect(p.get('response_type')).toBe('code');
  expect(p.get('client_id')).toBe(idp.clientId);
  expect(p.get('redirect_uri')).toBe(`${gw.dp.proxyUrl}/app/callback`);
  expect(p.get('scope')).toBe('openid email');
  expect(p.get('code_challenge_method')).toBe('S256');
  expect(p.get('code_challenge')).toMatch(/^[\w-]{43}$/);
  expect(p.get('state')).toMatch(/^[\w-]{43}$/);
  expect(p.get('nonce')).toMatch(/^[\w-]{43}$/);
  expect(jar.has('gatehouse_oidc_flow')).toBe(true);

  const callback = await gw.dp.request('GET', await authorizeAt(authorize), { headers: { ...HTML, cookie: cookieHeader(jar) } });
  expect(callback.status).toBe(302);
  expect(callback.headers.location).toBe(`${gw.dp.proxyUrl}/app/page?x=1`);
  const session = [callback.headers['set-cookie']!].flat().find((c) => c.startsWith('gatehouse_oidc='))!;
  expect(session).toMatch(/; Path=\/; Max-Age=3600; HttpOnly; SameSite=Lax$/);
  expect(session.length).toBeLessThan(4096);
  // The gateway's exchange carried the client's Basic credentials and a verifier the IdP accepted.
  expect(idp.tokenRequests.at(-1)).toMatchObject({ verdict: 'ok', form: { grant_type: 'authorization_code', redirect_uri: `${gw.dp.proxyUrl}/app/callback` } });

  for (const [k, v] of setCookies(callback)) jar.set(k, v);
  const before = u.requests.length;
  const res = await gw.dp.request('GET', '/app/page?x=1', {
    headers: { cookie: `theme=dark; ${cookieHeader(jar)}`, 'x-authenticated-user': 'admin', 'x-user-email': 'root@evil' },
  });
  expect(res.status).toBe(200);
  expect(u.requests.length).toBe(before + 1);
  const seen = u.last()!;
  expect(seen.headers['x-authenticated-user']).toBe(idp.subject);
  expect(seen.headers['x-user-email']).toBe('ada@example.com');
  expect(seen.rawHeaders.filter((n, i) => i % 2 === 0 && n.toLowerCase() === 'x-authenticated-user')).toHaveLength(1);
  expect(seen.headers.cookie).toBe('theme=dark');
});

test('a tampered session cookie is no session: a browser signs in again, an API client gets 401', async () => {
  const jar = await signIn('/app/tamper');
  const value = jar.get('gatehouse_oidc')!;
  const flipped = `${value.slice(0, 20)}${value[20] === 'A' ? 'B' : 'A'}${value.slice(21)}`;
  const before = u.requests.length;
  const browser = await gw.dp.request('GET', '/app/tamper', { headers: { ...HTML, cookie: `gatehouse_oidc=${flipped}` } });
  expect(browser.status).toBe(302);
  expect(String(browser.headers.location)).toMatch(new RegExp(`^${idp.issuer}/authorize\\?`));
  const api = await gw.dp.request('GET', '/app/tamper', { headers: { cookie: `gatehouse_oidc=${flipped}` } });
  expect(api.status).toBe(401);
  expect(api.json).toBe('sign-in required');
  expect(u.requests.length).toBe(before);
});

test('without a session, requests that are not a browser GET get 401 and nothing reaches the upstream or the IdP', async () => {
  const before = u.requests.length;
  const tokens = idp.tokenRequests.length;
  for (const [method, headers] of [
    ['GET', { accept: 'application/json' }],
    ['GET', {}],
    ['POST', HTML],
  ] as const) {
    const res = await gw.dp.request(method, '/app/data', { headers, ...(method === 'POST' && { body: '{}' }) });
    expect(res.status).toBe(401);
    expect(res.json).toBe('sign-in required');
  }
  expect(u.requests.length).toBe(before);
  expect(idp.tokenRequests.length).toBe(tokens);
});

test("a callback whose state is not the flow cookie's is 400, and no code is exchanged", async () => {
  const { authorize, jar } = await startSignIn('/app/state');
  const back = await authorizeAt(authorize);
  const tokens = idp.tokenRequests.length;
  const wrong = back.replace(/state=[^&]+/, 'state=forged');
  const res = await gw.dp.request('GET', wrong, { headers: { ...HTML, cookie: cookieHeader(jar) } });
  expect(res.status).toBe(400);
  expect(res.json).toBe('invalid sign-in callback');
  const noCookie = await gw.dp.request('GET', back, { headers: HTML });
  expect(noCookie.status).toBe(400);
  expect(idp.tokenRequests.length).toBe(tokens);
});

test('PKCE: a code injected into another sign-in is refused by the IdP (its verifier differs), so the callback is 400', async () => {
  const victim = await startSignIn('/app/pkce');
  const attacker = await startSignIn('/app/pkce');
  // The attacker's code, delivered with the victim's state to the victim's browser (which holds the victim's flow cookie).
  const attackerBack = new URL(await authorizeAt(attacker.authorize), gw.dp.proxyUrl);
  attackerBack.searchParams.set('state', victim.authorize.searchParams.get('state')!);
  const res = await gw.dp.request('GET', `${attackerBack.pathname}${attackerBack.search}`, { headers: { ...HTML, cookie: cookieHeader(victim.jar) } });
  expect(res.status).toBe(400);
  expect(idp.tokenRequests.at(-1)?.verdict).toBe('invalid_grant');
  expect(res.headers['set-cookie']).toBeUndefined();
});

test.each<[string, Record<string, unknown>]>([
  ['another audience', { aud: 'another-client' }],
  ['another nonce', { nonce: 'not-the-flow-nonce' }],
  ['another issuer', { iss: 'https://evil.example' }],
  ['no exp', { exp: undefined }],
  ['an exp passed', { exp: Math.floor(Date.now() / 1000) - 3600 }],
])('an ID token with %s is refused: the callback is 400 and no session is set', async (_row, claims) => {
  const { authorize, jar } = await startSignIn('/app/id-token');
  const back = await authorizeAt(authorize);
  idp.overrideIdToken(claims);
  try {
    const res = await gw.dp.request('GET', back, { headers: { ...HTML, cookie: cookieHeader(jar) } });
    expect(idp.tokenRequests.at(-1)?.verdict).toBe('ok');
    expect(res.status).toBe(400);
    expect(res.json).toBe('invalid sign-in callback');
    expect(res.headers['set-cookie']).toBeUndefined();
  } finally {
    idp.overrideIdToken({});
  }
});

test('a provider that cannot be reached: a browser gets 503, logout still clears the cookies locally', async () => {
  const down = await startOidcProvider();
  const issuer = down.issuer;
  await down.close();
  const created = await gw.admin.createApi(
    apiDefinition({
      name: 'app-down',
      listenPath: '/app-down/*',
      targets: [u.url],
      plugins: [{ name: 'openid_connect', config: config({ issuer, timeout: '1s' }) }],
    }),
  );
  expect(created.body).toMatchObject({ name: 'app-down' });
  await gw.admin.waitForDataPlanes(created, gw.dps);
  const res = await gw.dp.request('GET', '/app-down/page', { headers: HTML });
  expect(res.status).toBe(503);
  expect(res.json).toBe('identity provider unavailable');
  const out = await gw.dp.request('GET', '/app-down/logout');
  expect(out.status).toBe(302);
  expect(out.headers.location).toBe(`${gw.dp.proxyUrl}/`);
  expect(setCookies(out).get('gatehouse_oidc')).toBe('');
});

test('metrics: each discovery fetch counted by outcome, ok and failed', async () => {
  const fetched = (outcome: string) => metricValue(gw.dp.statusUrl, `gatehouse_oidc_discovery_fetches_total{outcome="${outcome}"}`);
  const before = { ok: await fetched('ok'), failed: await fetched('failed') };
  const [up, down] = [await startOidcProvider(), await startOidcProvider()];
  await down.close();
  try {
    for (const [name, issuer] of [
      ['app-metered', up.issuer],
      ['app-metered-down', down.issuer],
    ] as const) {
      const created = await gw.admin.createApi(
        apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url], plugins: [{ name: 'openid_connect', config: config({ issuer, timeout: '1s' }) }] }),
      );
      expect(created.body).toMatchObject({ name });
      await gw.admin.waitForDataPlanes(created, gw.dps);
    }
    expect((await gw.dp.request('GET', '/app-metered/page', { headers: HTML })).status).toBe(302);
    expect((await gw.dp.request('GET', '/app-metered-down/page', { headers: HTML })).status).toBe(503);
    expect({ ok: await fetched('ok'), failed: await fetched('failed') }).toEqual({ ok: before.ok + 1, failed: before.failed + 1 });
  } finally {
    await up.close();
  }
});

test("logout clears both cookies and goes to the IdP's end_session_endpoint", async () => {
  const jar = await signIn('/app/out');
  const res = await gw.dp.request('GET', '/app/logout', { headers: { cookie: cookieHeader(jar) } });
  expect(res.status).toBe(302);
  const end = new URL(String(res.headers.location));
  expect(`${end.origin}${end.pathname}`).toBe(`${idp.issuer}/logout`);
  expect(end.searchParams.get('post_logout_redirect_uri')).toBe(`${gw.dp.proxyUrl}/`);
  expect(end.searchParams.get('client_id')).toBe(idp.clientId);
  const cleared = setCookies(res);
  expect(cleared.get('gatehouse_oidc')).toBe('');
  expect(cleared.get('gatehouse_oidc_flow')).toBe('');
  expect([res.headers['set-cookie']].flat().every((c) => c!.includes('Max-Age=0'))).toBe(true);
});

test("no open redirect: the return URL is a path of the request's own origin, and a Host that is not a host is 400", async () => {
  // A path that a browser would read as another host comes back absolute, on the gateway's origin (pathOf checks it).
  const jar = await signIn('/app//evil.example/x', '/app/evil.example/x');
  expect(jar.has('gatehouse_oidc')).toBe(true);
  const injected = await gw.dp.request('GET', '/app/x', { headers: { ...HTML, host: 'evil.example/x?' } });
  expect(injected.status).toBe(400);
  expect(injected.headers.location).toBeUndefined();
});

test.each<[string, Record<string, unknown>, string]>([
  ['a short cookie_secret', { cookie_secret: 'too short' }, 'plugins[0].config.cookie_secret'],
  ['an http issuer that is not loopback', { issuer: 'http://idp.example.com' }, 'plugins[0].config.issuer'],
  ['a post_logout_redirect to another host', { post_logout_redirect: '//evil.example' }, 'plugins[0].config.post_logout_redirect'],
  ['a redirect_path with a query', { redirect_path: '/cb?x=1' }, 'plugins[0].config.redirect_path'],
  ['a reserved user_header', { user_header: 'X-Forwarded-For' }, 'plugins[0].config.user_header'],
  ['no client_secret', { client_secret: undefined }, 'plugins[0].config.client_secret'],
])('%s is refused with a 400 naming the field, and nothing is stored', async (_row, extra, field) => {
  const res = await gw.admin.createApi(
    apiDefinition({ name: 'app-bad', listenPath: '/app-bad/*', targets: [u.url], plugins: [{ name: 'openid_connect', config: config(extra) }] }),
  );
  expect(res.status).toBe(400);
  expect(JSON.stringify(res.body)).toContain(field);
  expect((await gw.admin.request('GET', '/apis/app-bad')).status).toBe(404);
});
