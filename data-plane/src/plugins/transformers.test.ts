import type { OutgoingHttpHeaders } from 'node:http';
import { requestTransformerPlugin } from '#proto/plugins/request-transformer';
import { responseTransformerPlugin } from '#proto/plugins/response-transformer';
import { IncomingMessage } from 'node:http';
import { Socket } from 'node:net';
import type { CompiledRoute } from '#proto/compile/index';
import { PluginExchange } from './pipeline.js';
import { editHeaderList, editQuery, requestTransformerRuntime } from './request-transformer.js';
import type { StageDeps } from './runtime.js';
import { editResponseHeaders } from './response-transformer.js';

const request = (config: unknown) => requestTransformerPlugin.compile(requestTransformerPlugin.schema.parse(config));
const response = (config: unknown) => responseTransformerPlugin.compile(responseTransformerPlugin.schema.parse(config));

test.each([
  ['remove: every occurrence, any case', { remove: { headers: ['x-a'] } }, ['X-A', '1', 'X-B', '2', 'x-a', '3'], ['X-B', '2']],
  [
    'replace: only when present, one value at the first place',
    { replace: { headers: { 'X-A': 'new', 'X-Z': 'z' } } },
    ['X-A', '1', 'X-B', '2', 'x-a', '3'],
    ['X-A', 'new', 'X-B', '2'],
  ],
  ['add: only when absent', { add: { headers: { 'X-A': 'no', 'X-C': 'yes' } } }, ['x-a', '1'], ['x-a', '1', 'X-C', 'yes']],
  ['append: another line', { append: { headers: { 'X-A': '2' } } }, ['X-A', '1'], ['X-A', '1', 'X-A', '2']],
  [
    "Janus's order: remove → replace → add → append",
    { remove: { headers: ['X-A'] }, replace: { headers: { 'X-A': 'r' } }, add: { headers: { 'X-A': 'a' } }, append: { headers: { 'X-A': 'p' } } },
    ['X-A', '1'],
    ['X-A', 'a', 'X-A', 'p'],
  ],
])('request headers, %s', (_row, config, raw, expected) => {
  const frozen = Object.freeze([...raw]);
  expect(editHeaderList(frozen, request(config).headers!)).toEqual(expected);
});

test.each([
  ['remove by decoded name', { remove: { querystring: ['a b'] } }, 'a%20b=1&c=2&a+b=3', 'c=2'],
  ['replace: one pair at the first place', { replace: { querystring: { a: 'x y' } } }, 'a=1&b=2&a=3', 'a=x%20y&b=2'],
  ['replace: absent parameter untouched', { replace: { querystring: { z: '1' } } }, 'a=1', 'a=1'],
  ['add: only when absent', { add: { querystring: { a: 'no', n: 'yes' } } }, 'a=1', 'a=1&n=yes'],
  ['add to an empty query', { add: { querystring: { n: '&' } } }, '', 'n=%26'],
  ['append: another pair', { append: { querystring: { a: '2' } } }, 'a=1', 'a=1&a=2'],
  ['other parameters keep their order and encoding', { add: { querystring: { z: '1' } } }, 'q=%2F&flag&x=', 'q=%2F&flag&x=&z=1'],
])('query, %s', (_row, config, query, expected) => {
  expect(editQuery(query, request(config).query!)).toBe(expected);
});

test.each([
  ['no query', '', 'n=1&m=a%20b'],
  ['a query', 'a=1&n=0', 'a=1&n=0&m=a%20b'],
])('request_transformer stage, %s: the same as editQuery', (_row, query, expected) => {
  const config = { add: { querystring: { n: '1' } }, append: { querystring: { m: 'a b' } } };
  const stage = requestTransformerRuntime.stage(request(config), {} as StageDeps);
  const pipeline = { request: [stage.request!], response: [], forward: [] };
  for (let i = 0; i < 2; i++) {
    const ex = new PluginExchange(
      new IncomingMessage(new Socket()),
      { route: { id: 'r' } as CompiledRoute, params: {}, matched: '' },
      'id',
      '/',
      query,
      pipeline,
    );
    stage.request!(ex);
    expect(ex.query).toBe(expected);
    expect(ex.query).toBe(editQuery(query, request(config).query!));
  }
});

test.each([
  ['remove', { remove: { headers: ['X-A'] } }, { 'x-a': '1', 'x-b': '2' }, { 'x-b': '2' }],
  ['replace when present only', { replace: { headers: { 'X-A': 'r', 'X-Z': 'z' } } }, { 'x-a': '1' }, { 'x-a': 'r' }],
  ['add when absent only', { add: { headers: { 'X-A': 'no', 'X-C': 'yes' } } }, { 'x-a': '1' }, { 'x-a': '1', 'x-c': 'yes' }],
  ['append to a single value', { append: { headers: { 'Set-Cookie': 'b=2' } } }, { 'set-cookie': 'a=1' }, { 'set-cookie': ['a=1', 'b=2'] }],
  ['append to a list', { append: { headers: { 'Set-Cookie': 'c=3' } } }, { 'set-cookie': ['a=1', 'b=2'] }, { 'set-cookie': ['a=1', 'b=2', 'c=3'] }],
  ['append when absent', { append: { headers: { 'X-N': '1' } } }, {}, { 'x-n': '1' }],
])('response headers, %s', (_row, config, headers: OutgoingHttpHeaders, expected) => {
  editResponseHeaders(headers, response(config).headers!);
  expect(headers).toEqual(expected);
});
