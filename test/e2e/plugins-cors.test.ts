/**
 * cors through a real control plane and data plane: preflights answered by the gateway (also for
 * an API whose methods leave OPTIONS out, and before oauth2), actual requests, wildcard domains,
 * credentials, max age, options_passthrough, `enabled: false`, and bad configurations refused
 * with the field named while the stored definition stays as it was.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

const APP = 'https://app.example.com';
const api = (name: string, cors: unknown, extra: Record<string, unknown> = {}) => ({
  ...apiDefinition({ name, listenPath: `/${name}/*`, targets: [u.url], ...extra }),
  plugins: [{ name: 'cors', ...(cors as object) }],
});

beforeAll(async () => {
  u = await startUpstream('cors-upstream');
  gw = await startGateway();
  const server = await gw.admin.createOAuthServer({
    name: 'cors-auth',
    oauth_endpoints: { token: { listen_path: '/cors-auth/token', upstreams: { targets: [{ target: u.url }] } } },
    token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'k'.repeat(32) }] },
  });
  expect(server.status).toBe(201);
  const apis = [
    api(
      'cors-list',
      {
        config: {
          domains: [APP, '*.example.org'],
          methods: 'GET,PUT',
          request_headers: ['X-Token'],
          exposed_headers: ['X-Total'],
          allow_credentials: true,
          max_age: 600,
        },
      },
      { methods: ['GET', 'PUT'] },
    ),
    api('cors-any', {}),
    api('cors-pass', { config: { domains: [APP], options_passthrough: true } }),
    api('cors-off', { enabled: false, config: { domains: [APP] } }),
    {
      ...api('cors-auth', { config: { domains: [APP] } }),
      plugins: [
        { name: 'oauth2', config: { server_name: 'cors-auth' } },
        { name: 'cors', config: { domains: [APP] } },
      ],
    },
  ];
  await createApis(gw, apis);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u)).toBe('');
});

const preflight = (path: string, origin: string, method: string, headers?: string) =>
  gw.dp.request('OPTIONS', path, {
    headers: { origin, 'access-control-request-method': method, ...(headers ? { 'access-control-request-headers': headers } : {}) },
  });

const urlsSeen = (prefix: string) => u.requests.filter((r) => r.url.startsWith(prefix)).length;

test('a preflight is answered 204 by the gateway with every CORS header, and never reaches the upstream', async () => {
  const before = urlsSeen('/cors-list/');
  const res = await preflight('/cors-list/x', APP, 'PUT', 'X-Token');
  expect(res.status).toBe(204);
  // RFC 9110 §8.6: a 204 carries no Content-Length.
  expect(res.headers['content-length']).toBeUndefined();
  expect(res.headers).toMatchObject({
    'access-control-allow-origin': APP,
    'access-control-allow-methods': 'GET, PUT',
    'access-control-allow-headers': 'x-token',
    'access-control-allow-credentials': 'true',
    'access-control-max-age': '600',
    vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
  });
  expect(res.headers['x-request-id']).toBeDefined();
  expect(urlsSeen('/cors-list/')).toBe(before);
});

test('a wildcard domain allows subdomains at any depth, not the apex', async () => {
  expect((await preflight('/cors-list/x', 'https://a.b.example.org', 'GET')).headers['access-control-allow-origin']).toBe('https://a.b.example.org');
  expect((await preflight('/cors-list/x', 'https://example.org', 'GET')).headers['access-control-allow-origin']).toBeUndefined();
});

test.each([
  ['an origin not listed', '/cors-list/x', 'https://evil.com', 'GET', undefined],
  ['a method not listed (the API itself takes any method)', '/cors-any/x', APP, 'DELETE', undefined],
  ['a request header not listed', '/cors-list/x', APP, 'GET', 'X-Token, X-Other'],
])('a preflight with %s gets 204 without CORS headers', async (_row, path, origin, method, headers) => {
  const res = await preflight(path, origin, method, headers);
  expect(res.status).toBe(204);
  expect(res.headers['access-control-allow-origin']).toBeUndefined();
  expect(res.headers['access-control-allow-methods']).toBeUndefined();
});

test('a preflight for a method no API takes there is a 404, as that request would be', async () => {
  const res = await preflight('/cors-list/x', APP, 'DELETE');
  expect(res.status).toBe(404);
  expect(res.json).toBe('no API found with those values');
});

test('an allowed actual request gets the origin, credentials, exposed headers and Vary on the upstream response', async () => {
  const res = await gw.dp.request('GET', '/cors-list/x', { headers: { origin: APP } });
  expect(res.status).toBe(200);
  expect(res.headers['x-upstream']).toBe('cors-upstream');
  expect(res.headers).toMatchObject({
    'access-control-allow-origin': APP,
    'access-control-allow-credentials': 'true',
    'access-control-expose-headers': 'X-Total',
    vary: 'Origin',
  });
});

test('a disallowed origin gets the upstream response without CORS headers, with Vary: Origin', async () => {
  const res = await gw.dp.request('GET', '/cors-list/x', { headers: { origin: 'https://evil.com' } });
  expect(res.status).toBe(200);
  expect(res.headers['access-control-allow-origin']).toBeUndefined();
  expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  expect(res.headers.vary).toBe('Origin');
});

test('defaults: any origin is answered "*", never echoed, and without credentials', async () => {
  const res = await gw.dp.request('GET', '/cors-any/x', { headers: { origin: 'https://whoever.net' } });
  expect(res.headers['access-control-allow-origin']).toBe('*');
  expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  const pre = await preflight('/cors-any/x', 'https://whoever.net', 'POST', 'Content-Type');
  expect(pre.headers).toMatchObject({ 'access-control-allow-origin': '*', 'access-control-allow-methods': 'GET, POST, HEAD' });
  expect(pre.headers['access-control-max-age']).toBeUndefined();
});

test('options_passthrough: the preflight reaches the upstream and its answer carries the CORS headers', async () => {
  const before = urlsSeen('/cors-pass/');
  const res = await preflight('/cors-pass/x', APP, 'GET');
  expect(res.status).toBe(200);
  expect(res.headers['x-upstream']).toBe('cors-upstream');
  expect(res.headers['access-control-allow-origin']).toBe(APP);
  expect(urlsSeen('/cors-pass/')).toBe(before + 1);
  expect(u.requests.filter((r) => r.url.startsWith('/cors-pass/')).at(-1)?.method).toBe('OPTIONS');
});

test('enabled: false does nothing: the preflight is forwarded, no CORS header is added', async () => {
  const res = await preflight('/cors-off/x', APP, 'GET');
  expect(res.status).toBe(200);
  expect(res.headers['x-upstream']).toBe('cors-upstream');
  expect(res.headers['access-control-allow-origin']).toBeUndefined();
  expect(res.headers.vary).toBeUndefined();
  const stored = await gw.admin.getApi('cors-off');
  expect(stored.body.plugins[0]).toMatchObject({ name: 'cors', enabled: false, config: { domains: [APP] } });
});

test('cors runs before oauth2: the preflight needs no token, and the 400 carries the CORS headers', async () => {
  const pre = await preflight('/cors-auth/x', APP, 'GET');
  expect(pre.status).toBe(204);
  expect(pre.headers['access-control-allow-origin']).toBe(APP);
  const refused = await gw.dp.request('GET', '/cors-auth/x', { headers: { origin: APP } });
  expect(refused.status).toBe(400);
  expect(refused.json).toBe('authorization field missing');
  expect(refused.headers['access-control-allow-origin']).toBe(APP);
  expect(refused.headers.vary).toBe('Origin');
});

test('the stored definition shows the normalised config with every default', async () => {
  const res = await gw.admin.getApi('cors-any');
  expect(res.body.plugins).toEqual([
    {
      name: 'cors',
      enabled: true,
      config: {
        domains: ['*'],
        methods: ['GET', 'POST', 'HEAD'],
        request_headers: ['Origin', 'Accept', 'Content-Type', 'X-Requested-With'],
        exposed_headers: [],
        options_passthrough: false,
        allow_credentials: false,
        max_age: 0,
      },
    },
  ]);
});

test.each([
  [
    'a bad domain',
    { domains: ['https://a.com/path'] },
    'plugins[0].config.domains[0] must be "*", an origin such as "https://app.example.com" or a host pattern such as "*.example.com"',
  ],
  ['credentials with any origin', { allow_credentials: true }, 'plugins[0].config.allow_credentials must be false when domains contains "*"'],
  ['a bad method', { methods: ['G T'] }, 'plugins[0].config.methods[0] is not a valid HTTP method'],
  ['a negative max_age', { max_age: -5 }, 'plugins[0].config.max_age must be at least 0'],
])('%s is refused with 400 naming the field, on create and on update (store unchanged)', async (_row, config, message) => {
  const created = await gw.admin.createApi({
    ...apiDefinition({ name: 'cors-bad', listenPath: '/cors-bad/*', targets: [u.url] }),
    plugins: [{ name: 'cors', config }],
  });
  expect(created.status).toBe(400);
  expect(created.body).toEqual({ error: message });
  expect((await gw.admin.getApi('cors-bad')).status).toBe(404);

  const before = await gw.admin.getApi('cors-any');
  const updated = await gw.admin.updateApi('cors-any', { plugins: [{ name: 'cors', config }] });
  expect(updated.status).toBe(400);
  expect(updated.body).toEqual({ error: message });
  expect((await gw.admin.getApi('cors-any')).body).toEqual(before.body);
});
