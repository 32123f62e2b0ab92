/**
 * request_termination and redirect through a real control plane and data plane, in front of a real upstream that
 * counts what reaches it: a terminated or redirected route never does. The answer is the configured one (the
 * gateway's JSON error shape for a message, a body as written, a Location of the configured parts and the
 * request's others); earlier plugins still add their headers (cors, rate_limit) and still refuse first
 * (key_auth); the access log and the metrics count the answer as any other; bad configs are a 400 naming the field.
 */
import { readFile } from 'node:fs/promises';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { httpRequest } from '../helpers/http-request.js';
import { pollUntil } from '../helpers/poll-until.js';
import { expectRefusedPluginConfig } from '../helpers/refused-plugin-config.js';
import { startDataPlane } from '../helpers/start-data-plane.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { createNamedCertificates } from '../helpers/test-certificates.js';
import { startUpstream, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

const api = (name: string, plugins: unknown[], listenPath = `/${name}/*`) => ({ ...apiDefinition({ name, listenPath, targets: [u.url] }), plugins });
const KEY = 'termination-key-0123456789';

beforeAll(async () => {
  u = await startUpstream('termination-upstream');
  gw = await startGateway();
  const credential = await gw.admin.request('POST', '/credentials/key_auth', { body: { username: 'terminated-user', key: KEY } });
  expect(credential.status).toBe(201);
  await createApis(gw, [
    api('maintenance', [
      { name: 'cors', config: { domains: ['https://app.example'] } },
      { name: 'rate_limit', config: { limit: '1000-M' } },
      { name: 'request_termination', config: { status_code: 503, message: 'down for maintenance' } },
    ]),
    api('static', [{ name: 'request_termination', config: { status_code: 200, body: 'hello\n', content_type: 'text/plain; charset=utf-8' } }]),
    api('guarded', [
      { name: 'key_auth', config: {} },
      { name: 'request_termination', config: { status_code: 410 } },
    ]),
    api('no-content', [{ name: 'request_termination', config: { status_code: 204 } }]),
    api('terminate-off', [{ name: 'request_termination', enabled: false, config: {} }]),
    api(
      'moved',
      [{ name: 'redirect', config: { status_code: 301, scheme: 'https', host: 'new.example.com', path: '/v2', strip_path: true } }],
      '/moved/{tenant}/*',
    ),
    {
      ...api('same-host', [
        { name: 'cors', config: { domains: ['https://app.example'] } },
        { name: 'redirect', config: { status_code: 308, path: '/elsewhere' } },
      ]),
      hosts: ['*.shop.example.com', 'shop.example.com', 'www.shop.example.com'],
    },
    api('other-port', [{ name: 'redirect', config: { host: 'new.example.com', port: 8443 } }]),
  ]);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u)).toBe('');
});

const reachedUpstream = (prefix: string) =>
  u.requests.filter((r) => r.url.startsWith(prefix)).length + u.aborted.filter((r) => r.url.startsWith(prefix)).length;

/** A later request to a route that does go upstream arrived: what was sent before it would have too. */
async function upstreamCaughtUp(): Promise<void> {
  expect((await gw.dp.request('GET', '/terminate-off/after')).status).toBe(200);
}

test('a message: the status and the gateway error shape, CORS and rate-limit headers on it, nothing upstream', async () => {
  const res = await gw.dp.request('POST', '/maintenance/orders?x=1', {
    headers: { origin: 'https://app.example', 'x-request-id': 'termination-maintenance' },
    body: '{"order":1}',
  });
  expect(res.status).toBe(503);
  expect(res.headers['content-type']).toBe('application/json');
  expect(res.json).toBe('down for maintenance');
  expect(res.headers['content-length']).toBe(String(Buffer.byteLength('"down for maintenance"')));
  expect(res.headers['x-request-id']).toBe('termination-maintenance');
  expect(res.headers['access-control-allow-origin']).toBe('https://app.example');
  expect(res.headers['x-ratelimit-limit']).toBe('1000');
  await upstreamCaughtUp();
  expect(reachedUpstream('/maintenance')).toBe(0);
});

test('the answer is logged and counted as any answer', async () => {
  expect((await gw.dp.request('GET', '/maintenance/logged', { headers: { 'x-request-id': 'termination-logged' } })).status).toBe(503);
  const line = await pollUntil(async () => gw.dp.process.lines().find((l) => l.json?.msg === 'access' && l.json?.requestId === 'termination-logged'), {
    what: 'the access line of termination-logged',
  });
  expect(line.json).toMatchObject({ route: 'api:maintenance', upstream: null, status: 503, path: '/maintenance/logged' });
  const metrics = await httpRequest(`${gw.dp.statusUrl}/metrics`);
  expect(metrics.text).toMatch(/gatehouse_proxy_requests_total\{route="api:maintenance",status="503"\} [1-9]/);
});

test('a body: sent as written with its content_type, to GET and HEAD', async () => {
  const res = await gw.dp.request('GET', '/static/anything');
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toBe('text/plain; charset=utf-8');
  expect(res.text).toBe('hello\n');
  const head = await gw.dp.request('HEAD', '/static/anything');
  expect(head.status).toBe(200);
  expect(head.headers['content-length']).toBe('6');
  expect(head.body.length).toBe(0);
  await upstreamCaughtUp();
  expect(reachedUpstream('/static')).toBe(0);
});

test('authentication runs first: no key is a 401, a good key gets the termination', async () => {
  const refused = await gw.dp.request('GET', '/guarded/x');
  expect(refused.status).toBe(401);
  expect(refused.json).toBe('no API key found in request');
  const terminated = await gw.dp.request('GET', '/guarded/x', { headers: { apikey: KEY } });
  expect(terminated.status).toBe(410);
  expect(terminated.json).toBe('request terminated');
  await upstreamCaughtUp();
  expect(reachedUpstream('/guarded')).toBe(0);
});

test('enabled: false forwards as usual', async () => {
  const res = await gw.dp.request('GET', '/terminate-off/through');
  expect(res.status).toBe(200);
  expect(u.last()!.url).toBe('/terminate-off/through');
});

test('a 204 termination has no body and no Content-Length (RFC 9110 §8.6)', async () => {
  const res = await gw.dp.request('GET', '/no-content/x');
  expect(res.status).toBe(204);
  expect(res.headers['content-length']).toBeUndefined();
  expect(res.headers['transfer-encoding']).toBeUndefined();
  expect(res.body.length).toBe(0);
  await upstreamCaughtUp();
  expect(reachedUpstream('/no-content')).toBe(0);
});

test('redirect with strip_path: the matched listen_path (with its parameter) replaced by path, the query kept, nothing upstream', async () => {
  const res = await gw.dp.request('GET', '/moved/acme/orders/7?page=2&q=a%20b', { headers: { host: 'gw.example.com:8080' } });
  expect(res.status).toBe(301);
  expect(res.headers.location).toBe('https://new.example.com/v2/orders/7?page=2&q=a%20b');
  expect(res.headers['content-length']).toBe('0');
  expect(res.body.length).toBe(0);
  await upstreamCaughtUp();
  expect(reachedUpstream('/moved')).toBe(0);
});

test('redirect keeps what it does not set: the listener scheme, the request Host and port; CORS headers on it', async () => {
  const res = await gw.dp.request('POST', '/same-host/a?b=1', { headers: { host: 'Shop.Example.com:8080', origin: 'https://app.example' }, body: 'x' });
  expect(res.status).toBe(308);
  expect(res.headers.location).toBe('http://shop.example.com:8080/elsewhere?b=1');
  expect(res.headers['access-control-allow-origin']).toBe('https://app.example');
  // host set, port set, scheme from the listener; the request's path and query
  const other = await gw.dp.request('GET', '/other-port/x/../y?z', { headers: { host: 'gw.example.com' } });
  expect(other.status).toBe(302);
  expect(other.headers.location).toBe('http://new.example.com:8443/other-port/y?z');
  await upstreamCaughtUp();
  expect(reachedUpstream('/same-host') + reachedUpstream('/other-port')).toBe(0);
});

test('on a TLS listener the scheme is https, and its own port is left out', async () => {
  const certs = await createNamedCertificates(['shop.example.com']);
  // Started after every API was created: its first snapshot has them.
  const dp = await startDataPlane({ controlPlaneAddr: gw.cp.grpcAddr, env: { PROXY_TLS_CERT: certs.serverCert, PROXY_TLS_KEY: certs.serverKey } });
  try {
    const ca = await readFile(certs.caCert);
    const url = `https://127.0.0.1:${dp.proxyPort}/same-host/a?b=1`;
    const custom = await httpRequest(url, { ca, headers: { host: 'shop.example.com:8443' } });
    expect(custom.status).toBe(308);
    expect(custom.headers.location).toBe('https://shop.example.com:8443/elsewhere?b=1');
    const own = await httpRequest(url, { ca, headers: { host: 'shop.example.com:443' } });
    expect(own.headers.location).toBe('https://shop.example.com/elsewhere?b=1');
  } finally {
    expect((await dp.stop()).code).toBe(0);
    await certs.dispose();
  }
});

test('without host, the Location names the request host only when the API lists it exactly, else its first exact host', async () => {
  const listed = await gw.dp.request('GET', '/same-host/a', { headers: { host: 'www.shop.example.com' } });
  expect(listed.headers.location).toBe('http://www.shop.example.com/elsewhere');
  // Matched by the wildcard only: a name the client made up is not reflected.
  const wildcard = await gw.dp.request('GET', '/same-host/a', { headers: { host: 'attacker-chosen.shop.example.com:8080' } });
  expect(wildcard.status).toBe(308);
  expect(wildcard.headers.location).toBe('http://shop.example.com:8080/elsewhere');
});

test('a redirect without host on an API that lists no exact host is refused at write: no Host is ever reflected', async () => {
  for (const hosts of [undefined, ['*.example.com']]) {
    const definition = {
      ...apiDefinition({ name: 'reflecting', listenPath: '/reflecting/*', targets: [u.url] }),
      ...(hosts && { hosts }),
      plugins: [{ name: 'redirect', config: { scheme: 'https' } }],
    };
    const res = await gw.admin.createApi(definition);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: 'plugins[0].config.host is required when the API lists no exact host in hosts (the Location would name whatever Host the client sent)',
    });
  }
  expect((await gw.admin.getApi('reflecting')).status).toBe(404);
  const probe = await gw.dp.request('GET', '/reflecting/x', { headers: { host: 'evil.example' } });
  expect(probe.headers.location).toBeUndefined();
});

test('a Host that is not a host never reaches the Location: 400 "invalid host"', async () => {
  for (const host of ['shop.example.com:99999', 'shop.example.com:x']) {
    const res = await gw.dp.request('GET', '/same-host/a', { headers: { host } });
    expect(res.status).toBe(400);
    expect(res.json).toBe('invalid host');
    expect(res.headers.location).toBeUndefined();
  }
});

test('the stored configs are the normalised ones, defaults filled', async () => {
  expect((await gw.admin.getApi('guarded')).body.plugins[1]).toEqual({
    name: 'request_termination',
    enabled: true,
    config: { status_code: 410, message: 'request terminated' },
  });
  expect((await gw.admin.getApi('same-host')).body.plugins[1]).toEqual({
    name: 'redirect',
    enabled: true,
    config: { status_code: 308, path: '/elsewhere', strip_path: false },
  });
});

test.each([
  [
    'message and body',
    [{ name: 'request_termination', config: { message: 'm', body: 'b', content_type: 'text/plain' } }],
    'plugins[0].config.body must not be set together with message',
  ],
  ['a 1xx status', [{ name: 'request_termination', config: { status_code: 100 } }], 'plugins[0].config.status_code must be at least 200'],
  [
    'a body over 64 KiB',
    [{ name: 'request_termination', config: { body: 'x'.repeat(65_537), content_type: 'text/plain' } }],
    'plugins[0].config.body is over 65536 bytes',
  ],
  [
    'a host with a path',
    [{ name: 'redirect', config: { host: 'evil.example/x' } }],
    'plugins[0].config.host must be a host name or an IP address ("[2001:db8::1]" for IPv6), without a port',
  ],
  [
    'a status that is no redirect',
    [{ name: 'redirect', config: { status_code: 200, scheme: 'https' } }],
    'plugins[0].config.status_code must be 301, 302, 303, 307 or 308',
  ],
  [
    'a redirect that changes nothing',
    [{ name: 'redirect', config: {} }],
    'plugins[0].config must set at least one of scheme, host, port or path (a redirect to the same URL loops)',
  ],
])('%s is refused with 400 naming the field, store unchanged', async (_row, plugins, message) => {
  await expectRefusedPluginConfig(
    gw,
    { definition: apiDefinition({ name: 'refused', listenPath: '/refused/*', targets: [u.url] }), existing: 'static', plugins },
    message,
  );
});
