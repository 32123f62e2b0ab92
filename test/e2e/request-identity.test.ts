/**
 * One identity per request, through a real control plane and data plane, real upstreams, a real OpenID provider and
 * JWTs signed here: a request carrying two of the fields an authentication plugin reads (Authorization, key_auth's
 * header, openid_connect's Cookie) is refused with 400 before any plugin runs and reaches no upstream; names in the
 * client's Connection header take only the client's own headers, never those the plugins set; proxy_cache never
 * answers one signed-in user with another's response (stored only with `per_consumer`, each user under their own key);
 * and openid_connect's cookies never reach an upstream, on its routes or any other of the host.
 */
import { connect } from 'node:net';
import { SignJWT } from 'jose';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import type { HttpResponse } from '../helpers/http-request.js';
import { httpRequest } from '../helpers/http-request.js';
import { startOidcProvider, type OidcProvider } from '../helpers/oidc-provider.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let echo: Upstream;
/** Answers `user=<X-Sub>` and says the response may be shared (`Cache-Control: public`), as a careless upstream would. */
let shared: Upstream;
let idp: OidcProvider;

const HS_KEY = 'an HS256 key of thirty-two bytes or more';
const PASSWORD = 'correct horse battery';
const API_KEY = 'identity-api-key-0123456789';
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const now = () => Math.floor(Date.now() / 1000);
const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const jwt = (sub: string) =>
  new SignJWT({ sub, iat: now(), exp: now() + 300 }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(HS_KEY));
const ALG_NONE = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'admin', exp: now() + 300 })}.`;

const oidcConfig = () => ({
  issuer: idp.issuer,
  client_id: idp.clientId,
  client_secret: idp.clientSecret,
  cookie_secret: 'a cookie secret of at least 32 characters!',
});
const api = (name: string, target: Upstream, plugins: unknown[]) => ({ ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [target.url] }), plugins });
const echoed = (res: HttpResponse) => (res.json as { headers: Record<string, string | undefined> }).headers;
const seen = (upstream: Upstream, name: string) => upstream.requests.filter((r) => r.url.startsWith(`/${name}/`)).length;

/** Writes `request` on a connection of its own to the data plane; what came back until it closed. */
function rawExchange(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(gw.dp.proxyPort, '127.0.0.1', () => socket.write(request));
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
  });
}

/** `name=value` of each Set-Cookie, by name. */
function setCookies(res: HttpResponse, into = new Map<string, string>()): Map<string, string> {
  for (const line of [res.headers['set-cookie'] ?? []].flat()) {
    const [pair] = line.split(';');
    const eq = pair!.indexOf('=');
    into.set(pair!.slice(0, eq), pair!.slice(eq + 1));
  }
  return into;
}

/** Signs `sub` in through the real provider; the session cookie as `name=value`. */
async function signIn(sub: string): Promise<string> {
  idp.overrideIdToken({ sub });
  const start = await gw.dp.request('GET', '/app/start', { headers: { accept: 'text/html' } });
  expect(start.status).toBe(302);
  const jar = setCookies(start);
  const back = await httpRequest(String(start.headers.location));
  expect(back.status).toBe(302);
  const callback = new URL(String(back.headers.location));
  const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const signedIn = await gw.dp.request('GET', `${callback.pathname}${callback.search}`, { headers: { cookie } });
  expect(signedIn.status).toBe(302);
  return `gatehouse_oidc=${setCookies(signedIn).get('gatehouse_oidc')}`;
}

beforeAll(async () => {
  echo = await startUpstream('identity-echo', { kind: 'echo' });
  shared = await startUpstream('identity-shared');
  shared.setBehaviour((req) => ({
    kind: 'fixed',
    body: `user=${req.headers['x-sub']}`,
    headers: { 'content-type': 'text/plain', 'cache-control': 'public, max-age=60' },
  }));
  idp = await startOidcProvider();
  gw = await startGateway();
  const server = await gw.admin.createOAuthServer({
    name: 'hs',
    oauth_endpoints: {
      token: { listen_path: '/oauth/hs/token', upstreams: { balancing: 'roundrobin', targets: [{ target: `${echo.url}/token` }] }, methods: ['POST'] },
    },
    token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: HS_KEY }] },
  });
  expect(server.status).toBe(201);
  expect((await gw.admin.request('POST', '/credentials/basic_auth', { body: { username: 'ann', password: PASSWORD } })).status).toBe(201);
  expect((await gw.admin.request('POST', '/credentials/key_auth', { body: { username: 'kim', key: API_KEY } })).status).toBe(201);
  const oauth2 = { name: 'oauth2', config: { server_name: 'hs', claims_to_headers: { sub: 'X-Sub' } } };
  await createApis(gw, [
    api('jwt', echo, [oauth2]),
    api('basic', echo, [{ name: 'basic_auth' }]),
    api('keyed', echo, [{ name: 'key_auth' }]),
    api('app', echo, [
      { name: 'openid_connect', config: oidcConfig() },
      { name: 'request_transformer', config: { add: { headers: { 'X-User-Id': 'set-by-gateway' } } } },
    ]),
    api('app-cached', echo, [
      { name: 'openid_connect', config: oidcConfig() },
      { name: 'proxy_cache', config: {} },
    ]),
    api('app-per-user', echo, [
      { name: 'openid_connect', config: oidcConfig() },
      { name: 'proxy_cache', config: { per_consumer: true } },
    ]),
    api('jwt-cached', shared, [oauth2, { name: 'proxy_cache', config: {} }]),
    api('jwt-per-user', shared, [oauth2, { name: 'proxy_cache', config: { per_consumer: true } }]),
    api('other', echo, []),
  ]);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, echo, shared, idp)).toBe('');
});

describe('more than one credential field: 400 CREDENTIALS_AMBIGUOUS, nothing forwarded', () => {
  const refused = async (name: string, headers: Record<string, string | string[]>) => {
    const before = seen(echo, name);
    const res = await gw.dp.request('GET', `/${name}/x`, { headers });
    expect([res.status, res.json]).toEqual([400, 'more than one credential in request']);
    expect(seen(echo, name)).toBe(before);
  };

  test('oauth2: a valid JWT followed by an alg "none" token', async () => {
    const valid = await jwt('alice');
    expect((await gw.dp.request('GET', '/jwt/x', { headers: { authorization: `Bearer ${valid}` } })).status).toBe(200);
    await refused('jwt', { authorization: [`Bearer ${valid}`, `Bearer ${ALG_NONE}`] });
  });

  test('basic_auth: the right credentials followed by others', async () => {
    expect((await gw.dp.request('GET', '/basic/x', { headers: { authorization: basic('ann', PASSWORD) } })).status).toBe(200);
    await refused('basic', { authorization: [basic('ann', PASSWORD), basic('admin', 'x')] });
  });

  test('key_auth: its header twice', async () => {
    expect((await gw.dp.request('GET', '/keyed/x', { headers: { apikey: API_KEY } })).status).toBe(200);
    await refused('keyed', { apikey: [API_KEY, 'another-key'] });
  });

  test('openid_connect: two Cookie lines, or the session cookie twice in one', async () => {
    const session = await signIn('ada');
    expect((await gw.dp.request('GET', '/app/x', { headers: { cookie: session } })).status).toBe(200);
    await refused('app', { cookie: `${session}; gatehouse_oidc=forged` });
    // node:http's client joins Cookie values into one line: two lines go over a socket of our own.
    const before = seen(echo, 'app');
    const head = await rawExchange(`GET /app/x HTTP/1.1\r\nHost: app.test\r\nCookie: ${session}\r\nCookie: theme=dark\r\nConnection: close\r\n\r\n`);
    expect(head).toMatch(/^HTTP\/1\.1 400 [^\r]*\r\n[\s\S]*"more than one credential in request"/);
    expect(seen(echo, 'app')).toBe(before);
  });
});

test("names in the client's Connection take the client's own headers only: the ones the plugins set reach the upstream", async () => {
  const session = await signIn('ada');
  const res = await gw.dp.request('GET', '/app/x', {
    headers: { cookie: session, connection: 'close, X-Authenticated-User, X-User-Id, X-Private', 'x-private': 'client', 'x-authenticated-user': 'admin' },
  });
  expect(res.status).toBe(200);
  const headers = echoed(res);
  expect([headers['x-authenticated-user'], headers['x-user-id'], headers['x-private']]).toEqual(['ada', 'set-by-gateway', undefined]);
});

describe('proxy_cache and signed-in users', () => {
  test("openid_connect: a second user never gets the first one's response; without per_consumer nothing is stored", async () => {
    const first = await gw.dp.request('GET', '/app-cached/me', { headers: { cookie: await signIn('ada') } });
    const second = await gw.dp.request('GET', '/app-cached/me', { headers: { cookie: await signIn('bob') } });
    expect([second.status, echoed(second)['x-authenticated-user']]).toEqual([200, 'bob']);
    expect([first.headers['x-cache-status'], second.headers['x-cache-status']]).toEqual(['Bypass', 'Bypass']);
  });

  test('openid_connect with per_consumer: each user has entries of their own', async () => {
    const [ada, bob] = [await signIn('ada'), await signIn('bob')];
    const get = (cookie: string) => gw.dp.request('GET', '/app-per-user/me', { headers: { cookie } });
    const answers = [];
    for (const cookie of [ada, bob, ada, bob]) {
      const res = await get(cookie);
      answers.push([res.headers['x-cache-status'], echoed(res)['x-authenticated-user']]);
    }
    expect(answers).toEqual([
      ['Miss', 'ada'],
      ['Miss', 'bob'],
      ['Hit', 'ada'],
      ['Hit', 'bob'],
    ]);
  });

  test("oauth2: even when the upstream says public, one subject never gets another's response", async () => {
    const alice = await gw.dp.request('GET', '/jwt-cached/me', { headers: { authorization: `Bearer ${await jwt('alice')}` } });
    const bob = await gw.dp.request('GET', '/jwt-cached/me', { headers: { authorization: `Bearer ${await jwt('bob')}` } });
    expect(bob.text).toBe('user=bob');
    expect([alice.text, alice.headers['x-cache-status'], bob.headers['x-cache-status']]).toEqual(['user=alice', 'Bypass', 'Bypass']);
  });

  test('oauth2 with per_consumer: entries per subject, whichever token of that subject asks', async () => {
    const get = async (sub: string) => {
      const res = await gw.dp.request('GET', '/jwt-per-user/me', { headers: { authorization: `Bearer ${await jwt(sub)}` } });
      return [res.text, res.headers['x-cache-status']];
    };
    expect(await get('alice')).toEqual(['user=alice', 'Miss']);
    expect(await get('bob')).toEqual(['user=bob', 'Miss']);
    expect(await get('alice')).toEqual(['user=alice', 'Hit']);
  });
});

test("openid_connect's cookies never reach an upstream: not its own route's, nor another route's of the same host", async () => {
  const session = await signIn('ada');
  for (const path of ['/app/x', '/other/x']) {
    const res = await gw.dp.request('GET', path, { headers: { cookie: `theme=dark; ${session}; gatehouse_oidc_flow=x` } });
    expect([path, res.status, echoed(res).cookie]).toEqual([path, 200, 'theme=dark']);
  }
  const only = await gw.dp.request('GET', '/other/y', { headers: { cookie: session } });
  expect(echoed(only).cookie).toBeUndefined();
});
