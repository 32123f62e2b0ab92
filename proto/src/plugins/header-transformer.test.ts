import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { requestTransformerPlugin } from './request-transformer.js';
import { responseTransformerPlugin } from './response-transformer.js';

const withPlugin = (name: string, config: unknown) => ({
  name: 't',
  proxy: { listen_path: '/t/*', upstreams: { targets: [{ target: 'http://u' }] } },
  plugins: [{ name, config }],
});
const stored = (name: string, config: unknown) => parseApiDefinition(withPlugin(name, config)).plugins[0].config;
const errorOf = (name: string, config: unknown) => gatehouseErrorOf(() => parseApiDefinition(withPlugin(name, config))).message;

const EMPTY_REQUEST_SECTION = { headers: {}, querystring: {} };

test('request_transformer: defaults filled; Janus remove objects stored as lists', () => {
  expect(stored('request_transformer', { add: { headers: { 'X-A': '1' } }, remove: { headers: { 'X-Gone': '' }, querystring: ['q'] } })).toEqual({
    add: { headers: { 'X-A': '1' }, querystring: {} },
    append: EMPTY_REQUEST_SECTION,
    replace: EMPTY_REQUEST_SECTION,
    remove: { headers: ['X-Gone'], querystring: ['q'] },
  });
});

test('response_transformer has no querystring (dropped like any unknown member)', () => {
  expect(stored('response_transformer', { add: { headers: { 'X-A': '1' }, querystring: { q: '1' } } })).toEqual({
    add: { headers: { 'X-A': '1' } },
    append: { headers: {} },
    replace: { headers: {} },
    remove: { headers: [] },
  });
});

test('a stored config parses to itself', () => {
  const once = stored('request_transformer', { append: { querystring: { a: 'b' } }, remove: { headers: ['X-Y'] } });
  expect(stored('request_transformer', once)).toEqual(once);
});

describe.each(['request_transformer', 'response_transformer'])('%s refuses', (name) => {
  test.each([
    ['Host', { add: { headers: { Host: 'evil' } } }, 'plugins[0].config.add.headers.Host is set by the gateway and cannot be changed by a transformer'],
    [
      'hop-by-hop',
      { replace: { headers: { Connection: 'close' } } },
      'plugins[0].config.replace.headers.Connection is a hop-by-hop header and cannot be changed by a transformer',
    ],
    [
      'Transfer-Encoding',
      { append: { headers: { 'transfer-encoding': 'chunked' } } },
      'plugins[0].config.append.headers.transfer-encoding is a hop-by-hop header and cannot be changed by a transformer',
    ],
    [
      'X-Forwarded-For',
      { add: { headers: { 'X-Forwarded-For': '1.2.3.4' } } },
      'plugins[0].config.add.headers.X-Forwarded-For is set by the gateway and cannot be changed by a transformer',
    ],
    [
      'X-Request-Id removal',
      { remove: { headers: ['X-Ok', 'X-Request-Id'] } },
      'plugins[0].config.remove.headers[1] is set by the gateway and cannot be changed by a transformer',
    ],
    [
      'Content-Length',
      { replace: { headers: { 'Content-Length': '0' } } },
      'plugins[0].config.replace.headers.Content-Length is set by the gateway and cannot be changed by a transformer',
    ],
    [
      'X-Consumer-Username',
      { add: { headers: { 'X-Consumer-Username': 'admin' } } },
      'plugins[0].config.add.headers.X-Consumer-Username is set by the gateway and cannot be changed by a transformer',
    ],
    // The data plane writes its own traceparent upstream (proxy/headers.ts), so a configured one would be dropped.
    [
      'traceparent',
      { add: { headers: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' } } },
      'plugins[0].config.add.headers.traceparent is set by the gateway and cannot be changed by a transformer',
    ],
    [
      'removal of a hop-by-hop header (Janus object form)',
      { remove: { headers: { Upgrade: '' } } },
      'plugins[0].config.remove.headers[0] is a hop-by-hop header and cannot be changed by a transformer',
    ],
    [
      'CR/LF in a value',
      { add: { headers: { 'X-A': 'v\r\nX-Injected: 1' } } },
      'plugins[0].config.add.headers.X-A must not contain control characters (CR, LF, NUL)',
    ],
    ['NUL in a value', { append: { headers: { 'X-A': 'v\u0000' } } }, 'plugins[0].config.append.headers.X-A must not contain control characters (CR, LF, NUL)'],
    ['a bad header name', { add: { headers: { 'X A': 'v' } } }, 'plugins[0].config.add.headers.X A is not a valid header name'],
    ['a bad removed header name', { remove: { headers: ['X:A'] } }, 'plugins[0].config.remove.headers[0] is not a valid header name'],
    ['a value that is not a string', { add: { headers: { 'X-A': 1 } } }, 'plugins[0].config.add.headers.X-A must be a string'],
    ['headers not an object', { add: { headers: ['X-A'] } }, 'plugins[0].config.add.headers must be an object'],
    ['a section not an object', { add: 'X-A:1' }, 'plugins[0].config.add must be an object'],
  ])('%s', (_row, config, message) => {
    expect(errorOf(name, config)).toBe(message);
  });
});

test.each([
  ['an empty parameter name', { add: { querystring: { '': 'v' } } }, 'plugins[0].config.add.querystring: a parameter name must not be empty'],
  ['an empty removed parameter', { remove: { querystring: [''] } }, 'plugins[0].config.remove.querystring[0] must not be empty'],
  ['a parameter value not a string', { replace: { querystring: { q: 1 } } }, 'plugins[0].config.replace.querystring.q must be a string'],
])('request_transformer refuses %s', (_row, config, message) => {
  expect(errorOf('request_transformer', config)).toBe(message);
});

test('compile: lower-cased names, encoded query pairs, null when nothing is configured', () => {
  const c = requestTransformerPlugin.compile(
    requestTransformerPlugin.schema.parse({ add: { headers: { 'X-A': '1' }, querystring: { 'a b': 'c&d' } }, remove: { headers: ['X-Gone'] } }),
  );
  expect(c.headers?.add).toEqual([{ lower: 'x-a', name: 'X-A', value: '1' }]);
  expect([...c.headers!.remove]).toEqual(['x-gone']);
  expect(c.query?.add).toEqual([{ name: 'a b', pair: 'a%20b=c%26d' }]);
  expect(requestTransformerPlugin.compile(requestTransformerPlugin.schema.parse({}))).toEqual({ headers: null, query: null });
  expect(responseTransformerPlugin.compile(responseTransformerPlugin.schema.parse({}))).toEqual({ headers: null });
});
