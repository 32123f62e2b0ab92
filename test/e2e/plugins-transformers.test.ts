/**
 * request_transformer and response_transformer through a real control plane and data plane: every
 * action (remove, replace, add, append) on headers and query strings, what the upstream actually
 * received, the gateway's own header rules still holding, `enabled: false`, gateway errors left
 * alone, and bad configurations refused with the field named while the store stays unchanged.
 */
import { apiDefinition } from '../helpers/api-definition.js';
import { freePort } from '../helpers/free-port.js';
import { createApis } from '../helpers/create-apis.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let echo: Upstream;
let fixed: Upstream;
let deadTarget: string;

const REQUEST_CONFIG = {
  add: { headers: { 'X-Added': 'a', 'X-Present': 'not used' }, querystring: { added: '1 2', rep: 'not used' } },
  append: { headers: { 'X-List': 'two' }, querystring: { multi: '2' } },
  replace: { headers: { 'X-Replace': 'new', 'X-Absent': 'not used' }, querystring: { rep: 'new', absent: 'not used' } },
  remove: { headers: ['X-Secret'], querystring: ['drop'] },
};

const RESPONSE_CONFIG = {
  add: { headers: { 'X-Added': 'a', 'X-Multi': 'not used' } },
  append: { headers: { 'X-Multi': 'b' } },
  replace: { headers: { 'X-Replace': 'new', 'X-Absent': 'not used' } },
  remove: { headers: { 'X-Upstream': '' } },
};

beforeAll(async () => {
  echo = await startUpstream('transform-echo', { kind: 'echo' });
  fixed = await startUpstream('transform-fixed', { kind: 'fixed', headers: { 'x-replace': 'old', 'x-multi': 'a' } });
  deadTarget = `http://127.0.0.1:${await freePort()}`;
  gw = await startGateway();
  const apis = [
    { ...apiDefinition({ name: 'req-t', listenPath: '/req-t/*', targets: [echo.url] }), plugins: [{ name: 'request_transformer', config: REQUEST_CONFIG }] },
    {
      ...apiDefinition({ name: 'req-off', listenPath: '/req-off/*', targets: [echo.url] }),
      plugins: [{ name: 'request_transformer', enabled: false, config: REQUEST_CONFIG }],
    },
    {
      ...apiDefinition({ name: 'resp-t', listenPath: '/resp-t/*', targets: [fixed.url] }),
      plugins: [{ name: 'response_transformer', config: RESPONSE_CONFIG }],
    },
    {
      ...apiDefinition({ name: 'resp-off', listenPath: '/resp-off/*', targets: [fixed.url] }),
      plugins: [{ name: 'response_transformer', enabled: false, config: RESPONSE_CONFIG }],
    },
    {
      ...apiDefinition({ name: 'resp-dead', listenPath: '/resp-dead/*', targets: [deadTarget] }),
      plugins: [{ name: 'response_transformer', config: RESPONSE_CONFIG }],
    },
  ];
  await createApis(gw, apis);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, echo, fixed)).toBe('');
});

const CLIENT_HEADERS = { 'x-present': 'yes', 'x-list': 'one', 'x-replace': 'old', 'x-secret': 's3cret', 'x-request-id': 'client-id-1' };

/** The named headers' values (undefined when absent), for one toEqual over all of them. */
const TRANSFORMED = ['x-secret', 'x-replace', 'x-absent', 'x-added', 'x-present', 'x-list', 'x-upstream', 'x-multi'];
const picked = (headers: Record<string, unknown>) => Object.fromEntries(TRANSFORMED.map((n) => [n, headers[n]]));
const none = Object.fromEntries(TRANSFORMED.map((n) => [n, undefined]));

async function sent(path: string): Promise<RecordedRequest> {
  const res = await gw.dp.request('GET', path, { headers: CLIENT_HEADERS });
  expect(res.status).toBe(200);
  return res.json as RecordedRequest;
}

test('request_transformer: the upstream gets the headers removed, replaced, added and appended', async () => {
  const seen = await sent('/req-t/x');
  expect(picked(seen.headers)).toEqual({ ...none, 'x-replace': 'new', 'x-added': 'a', 'x-present': 'yes', 'x-list': 'one, two' });
});

test('request_transformer: the query string is edited, its other parameters kept as sent', async () => {
  const seen = await sent('/req-t/x?drop=1&keep=%2F&rep=old&multi=1');
  expect(seen.url).toBe('/req-t/x?keep=%2F&rep=new&multi=1&added=1%202&multi=2');
});

test('request_transformer: the gateway header rules still hold (Host, X-Forwarded-*, X-Request-Id)', async () => {
  const seen = await sent('/req-t/x');
  expect(seen.headers.host).toBe(echo.hostHeader);
  expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
  expect(seen.headers['x-forwarded-proto']).toBe('http');
  expect(seen.headers['x-request-id']).toBe('client-id-1');
});

test('request_transformer with enabled: false changes nothing', async () => {
  const seen = await sent('/req-off/x?drop=1');
  expect(seen.url).toBe('/req-off/x?drop=1');
  expect(picked(seen.headers)).toEqual({ ...none, 'x-secret': 's3cret', 'x-replace': 'old', 'x-present': 'yes', 'x-list': 'one' });
});

test('response_transformer: the client gets the response headers removed, replaced, added and appended', async () => {
  const res = await gw.dp.request('GET', '/resp-t/x');
  expect(res.status).toBe(200);
  expect(picked(res.headers)).toEqual({ ...none, 'x-replace': 'new', 'x-added': 'a', 'x-multi': 'a, b' });
  expect(res.headers['x-request-id']).toBeDefined();
});

test('response_transformer with enabled: false changes nothing', async () => {
  const res = await gw.dp.request('GET', '/resp-off/x');
  expect(picked(res.headers)).toEqual({ ...none, 'x-upstream': 'transform-fixed', 'x-replace': 'old', 'x-multi': 'a' });
});

test('response_transformer leaves the gateway own errors alone', async () => {
  const res = await gw.dp.request('GET', '/resp-dead/x');
  expect(res.status).toBe(502);
  expect(res.json).toBe('bad gateway');
  expect(res.headers['x-added']).toBeUndefined();
});

test.each([
  [
    'request_transformer',
    'Host',
    { add: { headers: { Host: 'evil.example' } } },
    'plugins[0].config.add.headers.Host is set by the gateway and cannot be changed by a transformer',
  ],
  [
    'request_transformer',
    'a hop-by-hop header',
    { remove: { headers: ['Connection'] } },
    'plugins[0].config.remove.headers[0] is a hop-by-hop header and cannot be changed by a transformer',
  ],
  [
    'request_transformer',
    'X-Forwarded-For',
    { replace: { headers: { 'X-Forwarded-For': '10.0.0.1' } } },
    'plugins[0].config.replace.headers.X-Forwarded-For is set by the gateway and cannot be changed by a transformer',
  ],
  [
    'request_transformer',
    'CR/LF injection',
    { append: { headers: { 'X-A': 'v\r\nX-Evil: 1' } } },
    'plugins[0].config.append.headers.X-A must not contain control characters (CR, LF, NUL)',
  ],
  [
    'request_transformer',
    'an empty parameter name',
    { add: { querystring: { '': 'v' } } },
    'plugins[0].config.add.querystring: a parameter name must not be empty',
  ],
  [
    'response_transformer',
    'X-Request-Id',
    { remove: { headers: ['X-Request-Id'] } },
    'plugins[0].config.remove.headers[0] is set by the gateway and cannot be changed by a transformer',
  ],
  [
    'response_transformer',
    'Transfer-Encoding',
    { add: { headers: { 'Transfer-Encoding': 'chunked' } } },
    'plugins[0].config.add.headers.Transfer-Encoding is a hop-by-hop header and cannot be changed by a transformer',
  ],
  ['response_transformer', 'a bad header name', { add: { headers: { 'Bad Name': 'v' } } }, 'plugins[0].config.add.headers.Bad Name is not a valid header name'],
])('%s refusing %s: 400 naming the field, store unchanged', async (name, _row, config, message) => {
  const existing = name === 'request_transformer' ? 'req-t' : 'resp-t';
  const before = await gw.admin.getApi(existing);
  const updated = await gw.admin.updateApi(existing, { plugins: [{ name, config }] });
  expect(updated.status).toBe(400);
  expect(updated.body).toEqual({ error: message });
  expect((await gw.admin.getApi(existing)).body).toEqual(before.body);
  const created = await gw.admin.createApi({ ...apiDefinition({ name: 't-bad', listenPath: '/t-bad/*', targets: [echo.url] }), plugins: [{ name, config }] });
  expect(created.status).toBe(400);
  expect(created.body).toEqual({ error: message });
});

test('the stored definition shows the normalised config (Janus remove objects as lists, every section filled)', async () => {
  const res = await gw.admin.getApi('resp-t');
  expect(res.body.plugins[0].config).toEqual({
    add: { headers: { 'X-Added': 'a', 'X-Multi': 'not used' } },
    append: { headers: { 'X-Multi': 'b' } },
    replace: { headers: { 'X-Replace': 'new', 'X-Absent': 'not used' } },
    remove: { headers: ['X-Upstream'] },
  });
});
