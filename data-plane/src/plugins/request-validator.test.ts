import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import type { GatehouseError } from '#proto/errors';
import { parsePluginConfig } from '#proto/plugins/index';
import { bodyLimitPlugin } from '#proto/plugins/body-limit';
import { requestValidatorPlugin } from '#proto/plugins/request-validator';
import type { RouteMatch } from '#proto/routing/index';
import { bodyLimitRuntime } from './body-limit.js';
import { PluginExchange } from './pipeline.js';
import { requestValidatorRuntime } from './request-validator.js';
import type { StageDeps } from './runtime.js';

const ORDER = {
  type: 'object',
  properties: {
    items: { type: 'array', items: { type: 'object', properties: { qty: { type: 'integer', minimum: 1 } }, required: ['qty'], additionalProperties: false } },
    tier: { enum: ['gold', 'silver'] },
    tags: { type: 'object', additionalProperties: { type: 'string' } },
  },
};

/** A request carrying `body` (undefined: none; an array: chunked, one chunk each). */
function exchange(
  body: string | Buffer | (string | Buffer)[] | undefined,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): PluginExchange {
  const chunks = body === undefined ? [] : Array.isArray(body) ? body : [body];
  const all = { ...headers };
  if (Array.isArray(body)) all['transfer-encoding'] = 'chunked';
  else if (body !== undefined) all['content-length'] = String(Buffer.byteLength(body));
  const req = Object.assign(
    Readable.from(
      chunks.map((c) => Buffer.from(c)),
      { objectMode: false },
    ),
    {
      headers: all,
      rawHeaders: Object.entries(all).flat(),
      httpVersionMajor: 1,
    },
  );
  const match = { route: {}, matched: '' } as unknown as RouteMatch;
  return new PluginExchange(req as unknown as IncomingMessage, match, 'r', '/', '', { request: [], response: [], forward: [] });
}

const stageOf = (config: Record<string, unknown>) =>
  requestValidatorRuntime.stage(requestValidatorPlugin.compile(parsePluginConfig('request_validator', { body_schema: ORDER, ...config }, [])), {} as StageDeps);

/** The hook's verdict: the error's code and message, or what the upstream would get (its body and Content-Length). */
async function verdict(ex: PluginExchange, config: Record<string, unknown> = {}) {
  try {
    await stageOf(config).request!(ex);
  } catch (err) {
    return { code: (err as GatehouseError).code, message: (err as GatehouseError).message };
  }
  const lengths = ex.headers.flatMap((name, i) => (i % 2 === 0 && name.toLowerCase() === 'content-length' ? [ex.headers[i + 1]] : []));
  return { body: await text(ex.requestBody(ex.req)), length: lengths[0], lengths: lengths.length };
}

test.each<[string, string, string]>([
  ['the root of another type', '[1]', 'request body invalid: must be object'],
  ['a member below a limit', '{"items":[{"qty":1},{"qty":0}]}', 'request body invalid: /items/1/qty must be >= 1'],
  ['a required member missing', '{"items":[{}]}', "request body invalid: /items/0 must have required property 'qty'"],
  [
    'a member the schema does not know (its name is not echoed)',
    '{"items":[{"qty":1,"secret-name":2}]}',
    'request body invalid: /items/0 must NOT have additional properties',
  ],
  ['a value outside an enum (the value is not echoed)', '{"tier":"secret-tier"}', 'request body invalid: /tier must be equal to one of the allowed values'],
  ['a value of another type (the value is not echoed)', '{"tags":{"a":12345678}}', 'request body invalid: /tags/a must be string'],
  ['not JSON', '{"items":', 'request body is not valid JSON'],
  ['not UTF-8', Buffer.from([0x22, 0xff, 0x22]).toString('latin1'), 'request body is not valid JSON'],
])('refused 400: %s', async (_row, body, message) => {
  const ex = exchange(body.includes('\u00ff') ? Buffer.from(body, 'latin1') : body);
  expect(await verdict(ex)).toEqual({ code: 'REQUEST_INVALID', message });
});

test('the instance path (keys the client chose) is cut at 200 characters', async () => {
  const key = 'k'.repeat(300);
  const { message } = (await verdict(exchange(`{"tags":{"${key}":1}}`))) as { message: string };
  expect(message).toBe(`request body invalid: /tags/${key.slice(0, 194)}… must be string`);
});

test('a valid body goes upstream as it came, with one Content-Length; a chunked one gets its length', async () => {
  const body = '{ "items": [ {"qty": 2} ],\n "tier": "gold" }';
  expect(await verdict(exchange(body, { 'content-type': 'application/json', 'Content-Length': 'x' }))).toEqual({
    body,
    length: String(body.length),
    lengths: 1,
  });
  expect(await verdict(exchange(['{"items":', '[{"qty":3}]}']))).toEqual({ body: '{"items":[{"qty":3}]}', length: '21', lengths: 1 });
});

test('over max_body_bytes: 413 at once by Content-Length, or once the chunks read pass it; the connection closes', async () => {
  const big = exchange('{"items":[]}     ');
  expect(await verdict(big, { max_body_bytes: 16 })).toEqual({ code: 'REQUEST_BODY_TOO_LARGE', message: 'request body over the limit of 16 bytes' });
  expect(big.clientHeaders).toEqual({ connection: 'close' });
  expect(await verdict(exchange(['{"items":', '[]}     ', '  ']), { max_body_bytes: 16 })).toMatchObject({ code: 'REQUEST_BODY_TOO_LARGE' });
  expect(await verdict(exchange('{"items":[]}'), { max_body_bytes: 12 })).toMatchObject({ body: '{"items":[]}' });
});

test('body_limit in front counts the chunks the validator reads: its smaller limit wins with its error', async () => {
  const ex = exchange(['{"items":', '[]}        ']);
  bodyLimitRuntime.stage(bodyLimitPlugin.compile({ limit: '10B' }), {} as StageDeps).request!(ex);
  expect(await verdict(ex)).toEqual({ code: 'REQUEST_BODY_TOO_LARGE', message: 'request body over the limit of 10 bytes' });
});

test('415 for a Content-Type outside allowed_content_types, or none; parameters and case do not matter', async () => {
  expect(await verdict(exchange('{}', { 'content-type': 'text/plain' }))).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' });
  expect(await verdict(exchange('{}', {}))).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE' });
  expect(await verdict(exchange('{}', { 'content-type': 'Application/JSON; charset=UTF-8' }))).toMatchObject({ body: '{}' });
  expect(await verdict(exchange('{}', { 'content-type': 'application/problem+json' }), { allowed_content_types: ['application/*+json'] })).toMatchObject({
    body: '{}',
  });
});

test('no body passes (an empty chunked one too) unless body_required', async () => {
  expect(await verdict(exchange(undefined))).toEqual({ body: '', length: undefined, lengths: 0 });
  expect(await verdict(exchange([]))).toEqual({ body: '', length: '0', lengths: 1 });
  expect(await verdict(exchange(undefined), { body_required: true })).toEqual({ code: 'REQUEST_INVALID', message: 'request body required' });
  expect(await verdict(exchange([]), { body_required: true })).toEqual({ code: 'REQUEST_INVALID', message: 'request body required' });
});

test('gRPC, gRPC-Web and WebSocket requests are not validated (nor read)', async () => {
  for (const headers of [{ 'content-type': 'application/grpc' }, { 'content-type': 'application/grpc-web-text' }, { upgrade: 'websocket' }] as Record<
    string,
    string
  >[]) {
    const ex = exchange('not json', headers);
    expect(await verdict(ex, { body_required: true })).toEqual({ body: 'not json', length: '8', lengths: 1 });
  }
});

test('a recursive schema over a document nested deeper than the stack is refused as such, not a crash', async () => {
  const schema = { $ref: '#/$defs/list', $defs: { list: { type: 'array', items: { $ref: '#/$defs/list' } } } };
  const depth = 200_000;
  const ex = exchange('['.repeat(depth) + ']'.repeat(depth));
  expect(await verdict(ex, { body_schema: schema, max_body_bytes: 1024 * 1024 })).toEqual({
    code: 'REQUEST_INVALID',
    message: 'request body is nested too deeply',
  });
});
