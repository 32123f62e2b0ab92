/**
 * OAuth 2.0 introspection token strategy (RFC 7662), end to end: a real introspection endpoint
 * (an HTTP server of this file that checks the gateway's client credentials, answers RFC 7662 JSON
 * and counts its calls) behind an OAuth server definition, a real CP and DP, a real upstream.
 * Active tokens pass and are cached until exp, inactive ones get 401, an endpoint that is down or
 * too slow gets the documented 503, and bad configurations are refused naming the field.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listen } from '#proto/listen';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { freePort } from '../helpers/free-port.js';
import { delay } from '../helpers/poll-until.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

const BASIC = `Basic ${Buffer.from('gatehouse:s3cret').toString('base64')}`;
/** token → seconds since epoch it expires at; absent = unknown (inactive). */
const tokens = new Map<string, number>();
const calls: { token: string; hint: string | null; authorization: string | undefined; contentType: string | undefined }[] = [];
const callsFor = (token: string) => calls.filter((c) => c.token === token).length;

function introspect(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.url === '/hang') return; // never answers
    const form = new URLSearchParams(Buffer.concat(chunks).toString());
    const token = form.get('token') ?? '';
    calls.push({ token, hint: form.get('token_type_hint'), authorization: req.headers.authorization, contentType: req.headers['content-type'] });
    if (req.method !== 'POST' || req.headers.authorization !== BASIC) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid_client"}');
      return;
    }
    const exp = tokens.get(token);
    const active = exp !== undefined && exp > Date.now() / 1000;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(active ? { active: true, exp, client_id: 'app', scope: 'read' } : { active: false }));
  });
}

let gw: Gateway;
let upstream: Upstream;
let authServer: Server;
let authUrl: string;
let deadUrl: string;

const endpoint = (name: string, target: string) => ({ listen_path: `/${name}`, upstreams: { targets: [{ target }] }, methods: ['POST'] });
const introspectionServer = (name: string, introspectTarget: string, settings: Record<string, unknown> = {}) => ({
  name,
  oauth_endpoints: { token: endpoint(`${name}/token`, `${authUrl}/token`), introspect: endpoint(`${name}/introspect`, introspectTarget) },
  token_strategy: {
    name: 'introspection',
    settings: { client_id: 'gatehouse', client_secret: 's3cret', token_type_hint: 'access_token', timeout: '500ms', ...settings },
  },
});
const protectedApi = (name: string, server: string) =>
  apiDefinition({ name, listenPath: `/${name}/*`, targets: [upstream.url], plugins: [{ name: 'oauth2', config: { server_name: server } }] });

beforeAll(async () => {
  upstream = await startUpstream('introspection-upstream');
  authServer = createServer(introspect);
  authUrl = `http://127.0.0.1:${await listen(authServer, 0, '127.0.0.1')}`;
  deadUrl = `http://127.0.0.1:${await freePort()}`;
  gw = await startGateway();
  for (const server of [
    introspectionServer('intro', `${authUrl}/introspect`, { cache_ttl: 60 }),
    introspectionServer('intro-nocache', `${authUrl}/introspect`, { cache_ttl: 0 }),
    introspectionServer('intro-badclient', `${authUrl}/introspect`, { client_secret: 'wrong' }),
    introspectionServer('intro-down', `${deadUrl}/introspect`),
    introspectionServer('intro-hang', `${authUrl}/hang`, { timeout: '300ms' }),
  ]) {
    const res = await gw.admin.createOAuthServer(server);
    expect(res.status).toBe(201);
  }
  await createApis(gw, [
    protectedApi('api', 'intro'),
    protectedApi('nocache', 'intro-nocache'),
    protectedApi('badclient', 'intro-badclient'),
    protectedApi('down', 'intro-down'),
    protectedApi('hang', 'intro-hang'),
  ]);
}, 60_000);

afterAll(async () => {
  const problems = gw ? await gw.stop() : '';
  await upstream?.close();
  authServer?.closeAllConnections();
  await new Promise((resolve) => authServer?.close(resolve));
  expect(problems).toBe('');
});

const call = (path: string, token: string) => gw.dp.request('GET', path, { headers: { authorization: `Bearer ${token}` } });

test('an active token passes with its Authorization unchanged; the endpoint got an RFC 7662 form with the client credentials', async () => {
  tokens.set('good-1', Date.now() / 1000 + 3600);
  const res = await call('/api/x', 'good-1');
  expect(res.status).toBe(200);
  expect(upstream.last()?.headers.authorization).toBe('Bearer good-1');
  expect(calls.filter((c) => c.token === 'good-1')).toEqual([
    { token: 'good-1', hint: 'access_token', authorization: BASIC, contentType: 'application/x-www-form-urlencoded' },
  ]);
});

test('an active result is cached: the next requests do not reach the introspection endpoint', async () => {
  tokens.set('good-2', Date.now() / 1000 + 3600);
  for (let i = 0; i < 5; i++) expect((await call('/api/x', 'good-2')).status).toBe(200);
  expect(callsFor('good-2')).toBe(1);
});

test("the cache never outlives the token's exp: after it, the endpoint is asked again (and says inactive → 401)", async () => {
  const exp = Math.ceil(Date.now() / 1000) + 2;
  tokens.set('short', exp);
  expect((await call('/api/x', 'short')).status).toBe(200);
  expect((await call('/api/x', 'short')).status).toBe(200);
  expect(callsFor('short')).toBe(1);
  await delay(exp * 1000 - Date.now() + 100);
  const res = await call('/api/x', 'short');
  expect(res.status).toBe(401);
  expect(res.json).toBe('access token not authorized');
  expect(callsFor('short')).toBe(2);
});

test('cache_ttl 0: every request asks', async () => {
  tokens.set('good-3', Date.now() / 1000 + 3600);
  for (let i = 0; i < 3; i++) expect((await call('/nocache/x', 'good-3')).status).toBe(200);
  expect(callsFor('good-3')).toBe(3);
});

test('an inactive token gets 401 and never reaches the upstream; inactive answers are not cached', async () => {
  const before = upstream.requests.length;
  for (let i = 0; i < 2; i++) {
    const res = await call('/api/x', 'revoked');
    expect(res.status).toBe(401);
    expect(res.json).toBe('access token not authorized');
  }
  expect(upstream.requests.length).toBe(before);
  expect(callsFor('revoked')).toBe(2);
});

test('the header checks of every oauth2 strategy come first', async () => {
  expect((await gw.dp.request('GET', '/api/x')).status).toBe(400);
  expect((await gw.dp.request('GET', '/api/x', { headers: { authorization: 'Basic abc' } })).json).toBe('bearer token malformed');
});

test.each([
  ['the endpoint refuses the gateway (401 invalid_client)', '/badclient/x'],
  ['the endpoint is down (connection refused)', '/down/x'],
  ['the endpoint does not answer within the timeout', '/hang/x'],
])('%s → 503 "token introspection unavailable", not 401, and nothing reaches the upstream', async (_row, path) => {
  tokens.set('good-4', Date.now() / 1000 + 3600);
  const before = upstream.requests.length;
  const started = Date.now();
  const res = await call(path, 'good-4');
  expect(res.status).toBe(503);
  expect(res.json).toBe('token introspection unavailable');
  expect(res.headers['content-type']).toBe('application/json');
  expect(Date.now() - started).toBeLessThan(3_000);
  expect(upstream.requests.length).toBe(before);
});

test('the introspect endpoint is still an ordinary proxied route', async () => {
  tokens.set('good-5', Date.now() / 1000 + 3600);
  const res = await gw.dp.request('POST', '/intro/introspect', {
    headers: { authorization: BASIC, 'content-type': 'application/x-www-form-urlencoded' },
    body: 'token=good-5',
  });
  expect(res.status).toBe(200);
  expect(res.json).toMatchObject({ active: true });
});

test('bad configurations are refused naming the field, and the stored server stays as it was', async () => {
  const missing = introspectionServer('intro-bad', `${authUrl}/introspect`) as { oauth_endpoints: Record<string, unknown> };
  delete missing.oauth_endpoints.introspect;
  const created = await gw.admin.createOAuthServer(missing);
  expect(created.status).toBe(400);
  expect(created.body).toEqual({ error: 'oauth_endpoints.introspect is required when token_strategy.name is "introspection"' });

  const before = await gw.admin.getOAuthServer('intro');
  const badTtl = await gw.admin.updateOAuthServer('intro', { token_strategy: { settings: { cache_ttl: -1 } } });
  expect(badTtl.status).toBe(400);
  expect(badTtl.body).toEqual({ error: 'token_strategy.settings.cache_ttl must be an integer from 0 to 86400 (seconds)' });
  const dropEndpoint = await gw.admin.updateOAuthServer('intro', { oauth_endpoints: { introspect: null } });
  expect(dropEndpoint.status).toBe(400);
  expect(dropEndpoint.body.error).toBe('oauth_endpoints.introspect is required when token_strategy.name is "introspection"');
  const after = await gw.admin.getOAuthServer('intro');
  expect(after.body).toEqual(before.body);
  expect(after.body.token_strategy).toEqual({
    name: 'introspection',
    settings: {
      use_auth_header: false,
      auth_header_type: 'Bearer',
      token_type_hint: 'access_token',
      client_id: 'gatehouse',
      client_secret: '<redacted>', // write-only: reads never show it
      client_auth: 'basic',
      timeout: '500ms',
      cache_ttl: 60,
    },
    leeway: 0,
  });
});
