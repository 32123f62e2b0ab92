/**
 * request_validator through a real control plane and data plane with a real upstream: a valid JSON body reaches
 * the upstream byte for byte (a chunked one with its Content-Length); an invalid one, one that is not JSON, one of
 * another Content-Type or over max_body_bytes is refused and the upstream sees nothing; a GET without a body passes;
 * a schema ajv refuses is a 400 naming the field and leaves the store unchanged.
 */
import { createHash } from 'node:crypto';
import { apiDefinition } from '../helpers/api-definition.js';
import { createApis } from '../helpers/create-apis.js';
import { postChunked } from '../helpers/post-chunked.js';
import { expectRefusedPluginConfig } from '../helpers/refused-plugin-config.js';
import { startGateway, type Gateway } from '../helpers/start-gateway.js';
import { stopGatewayAndServers } from '../helpers/stop-gateway.js';
import { startUpstream, type RecordedRequest, type Upstream } from '../helpers/upstream-server.js';

let gw: Gateway;
let u: Upstream;

const ORDER_SCHEMA = {
  type: 'object',
  properties: {
    items: {
      type: 'array',
      minItems: 1,
      items: { type: 'object', properties: { sku: { type: 'string' }, qty: { type: 'integer', minimum: 1 } }, required: ['sku', 'qty'] },
    },
    email: { type: 'string', format: 'email' },
  },
  required: ['items'],
};

const orders = () => ({
  ...apiDefinition({ name: 'orders', listenPath: '/orders/*', targets: [u.url] }),
  plugins: [{ name: 'request_validator', config: { body_schema: ORDER_SCHEMA, max_body_bytes: 1024 } }],
});

beforeAll(async () => {
  u = await startUpstream('validator-upstream', { kind: 'echo' });
  gw = await startGateway();
  await createApis(gw, [orders()]);
}, 60_000);

afterAll(async () => {
  expect(await stopGatewayAndServers(gw, u)).toBe('');
});

const JSON_TYPE = { 'content-type': 'application/json' };
const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');
const reached = (path: string): RecordedRequest[] => u.requests.filter((r) => r.url === path);

/** Asserts the refusal, then that a later valid request on the route does reach the upstream (so "nothing" is no race). */
async function expectRefused(path: string, res: { status: number; json: unknown }, status: number, message: string): Promise<void> {
  expect({ status: res.status, json: res.json }).toEqual({ status, json: message });
  const after = await gw.dp.request('POST', `${path}-after`, { headers: JSON_TYPE, body: '{"items":[{"sku":"a","qty":1}]}' });
  expect(after.status).toBe(200);
  expect(reached(path)).toEqual([]);
  expect(u.aborted.filter((r) => r.url === path)).toEqual([]);
}

test('a valid body reaches the upstream byte for byte, with its Content-Length', async () => {
  // Spacing, key order and a charset parameter as the client wrote them: nothing is re-serialised.
  const body = '{ "email": "a@example.com",\n  "items": [ {"qty": 2, "sku": "x-1"} ] }';
  const res = await gw.dp.request('POST', '/orders/valid', { headers: { 'content-type': 'application/json; charset=utf-8' }, body });
  expect(res.status).toBe(200);
  const seen = res.json as RecordedRequest;
  expect({ length: seen.bodyLength, sha256: seen.bodySha256, contentLength: seen.headers['content-length'] }).toEqual({
    length: Buffer.byteLength(body),
    sha256: sha256(body),
    contentLength: String(Buffer.byteLength(body)),
  });
});

test('an invalid body is a 400 naming the instance path and the rule, nothing of its values, and the upstream sees nothing', async () => {
  const res = await gw.dp.request('POST', '/orders/invalid', { headers: JSON_TYPE, body: '{"items":[{"sku":"secret-sku-123","qty":0}]}' });
  expect(res.headers['content-type']).toBe('application/json');
  expect(res.text).not.toContain('secret-sku-123');
  await expectRefused('/orders/invalid', res, 400, 'request body invalid: /items/0/qty must be >= 1');
});

test('a missing required member and a bad format are named the same way', async () => {
  const missing = await gw.dp.request('POST', '/orders/missing', { headers: JSON_TYPE, body: '{"email":"a@example.com"}' });
  expect({ status: missing.status, json: missing.json }).toEqual({ status: 400, json: "request body invalid: must have required property 'items'" });
  const email = await gw.dp.request('POST', '/orders/email', { headers: JSON_TYPE, body: '{"items":[{"sku":"a","qty":1}],"email":"not-an-address"}' });
  expect({ status: email.status, json: email.json }).toEqual({ status: 400, json: 'request body invalid: /email must match format "email"' });
  expect([...reached('/orders/missing'), ...reached('/orders/email')]).toEqual([]);
});

test('a body that is not JSON is a 400', async () => {
  const res = await gw.dp.request('POST', '/orders/not-json', { headers: JSON_TYPE, body: '{"items": [' });
  await expectRefused('/orders/not-json', res, 400, 'request body is not valid JSON');
});

test('a Content-Type outside allowed_content_types (or none) is a 415', async () => {
  const res = await gw.dp.request('POST', '/orders/form', { headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'items=1' });
  await expectRefused('/orders/form', res, 415, 'unsupported request content type');
  const none = await gw.dp.request('POST', '/orders/untyped', { body: '{"items":[{"sku":"a","qty":1}]}' });
  expect(none.status).toBe(415);
  expect(reached('/orders/untyped')).toEqual([]);
});

test("a Content-Length over max_body_bytes is a 413 (body_limit's error) and the connection closes", async () => {
  const res = await gw.dp.request('POST', '/orders/big', { headers: JSON_TYPE, body: `{"items":[{"sku":"${'a'.repeat(1100)}","qty":1}]}` });
  expect(res.headers.connection).toBe('close');
  await expectRefused('/orders/big', res, 413, 'request body too large');
});

/** A chunked JSON POST, answered with the JSON body it got. */
async function postJsonChunks(path: string, chunks: string[]): Promise<{ status: number; json: unknown }> {
  const res = await postChunked(gw.dp.proxyPort, path, chunks, JSON_TYPE);
  return { status: res.status, json: JSON.parse(res.text) };
}

test('a valid chunked body passes whole, with a Content-Length instead of chunked framing', async () => {
  const chunks = ['{"items":[', '{"sku":"a",', '"qty":3}', ']}'];
  const res = await postJsonChunks('/orders/chunked', chunks);
  expect(res.status).toBe(200);
  const seen = res.json as RecordedRequest;
  const body = chunks.join('');
  expect({ sha256: seen.bodySha256, contentLength: seen.headers['content-length'], te: seen.headers['transfer-encoding'] }).toEqual({
    sha256: sha256(body),
    contentLength: String(body.length),
    te: undefined,
  });
});

test('a chunked body is counted while read: past max_body_bytes it is a 413 and the upstream sees nothing', async () => {
  const res = await postJsonChunks('/orders/chunked-big', ['{"items":[{"sku":"', ...Array.from({ length: 8 }, () => 'a'.repeat(200)), '","qty":1}]}']);
  await expectRefused('/orders/chunked-big', res, 413, 'request body too large');
});

test('a GET without a body passes', async () => {
  const res = await gw.dp.request('GET', '/orders/list');
  expect(res.status).toBe(200);
  expect(reached('/orders/list')).toHaveLength(1);
});

test('body_required: a POST without a body is a 400', async () => {
  await createApis(gw, [
    {
      ...apiDefinition({ name: 'strict', listenPath: '/strict/*', targets: [u.url] }),
      plugins: [{ name: 'request_validator', config: { body_schema: ORDER_SCHEMA, body_required: true } }],
    },
  ]);
  const res = await gw.dp.request('POST', '/strict/empty', { headers: { ...JSON_TYPE, 'content-length': '0' } });
  expect({ status: res.status, json: res.json }).toEqual({ status: 400, json: 'request body required' });
  expect(reached('/strict/empty')).toEqual([]);
});

test('the stored config has its defaults filled', async () => {
  const res = await gw.admin.getApi('orders');
  expect(res.body.plugins).toEqual([
    {
      name: 'request_validator',
      enabled: true,
      config: { body_schema: ORDER_SCHEMA, allowed_content_types: ['application/json'], max_body_bytes: 1024, body_required: false },
    },
  ]);
});

test.each([
  [
    'an unknown keyword (ajv strict mode)',
    { type: 'object', propertiez: {} },
    'plugins[0].config.body_schema is not a valid JSON Schema (draft 2020-12): strict mode: unknown keyword: "propertiez"',
  ],
  [
    'a remote $ref (nothing is fetched)',
    { $ref: 'https://schemas.example/order.json' },
    "plugins[0].config.body_schema is not a valid JSON Schema (draft 2020-12): can't resolve reference https://schemas.example/order.json from id #",
  ],
  ['a schema that is not an object', 'order', 'plugins[0].config.body_schema must be an object'],
])('a body_schema with %s is refused with 400 naming the field, store unchanged', async (_row, bodySchema, message) => {
  await expectRefusedPluginConfig(
    gw,
    {
      definition: apiDefinition({ name: 'refused', listenPath: '/refused/*', targets: [u.url] }),
      existing: 'orders',
      plugins: [{ name: 'request_validator', config: { body_schema: bodySchema } }],
    },
    message,
  );
});
