import { parseApiDefinition } from '../definition/index.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { corsPlugin, originListed, DEFAULT_CORS_METHODS, DEFAULT_CORS_REQUEST_HEADERS } from './cors.js';

const withCors = (config: unknown) => ({
  name: 'c',
  proxy: { listen_path: '/c/*', upstreams: { targets: [{ target: 'http://u' }] } },
  plugins: [
    { name: 'oauth2', enabled: false, config: { server_name: 's' } },
    { name: 'cors', config },
  ],
});
const stored = (config: unknown) => parseApiDefinition(withCors(config)).plugins[1].config;
const errorOf = (config: unknown) => gatehouseErrorOf(() => parseApiDefinition(withCors(config)));
const compiled = (config: unknown) => corsPlugin.compile(corsPlugin.schema.parse(config));

test('defaults are filled and stored (what is shown is what runs)', () => {
  expect(stored({})).toEqual({
    domains: ['*'],
    methods: DEFAULT_CORS_METHODS,
    request_headers: DEFAULT_CORS_REQUEST_HEADERS,
    exposed_headers: [],
    options_passthrough: false,
    allow_credentials: false,
    max_age: 0,
  });
});

test('Janus comma-delimited strings become lists; methods upper-cased, domains lower-cased, duplicates dropped', () => {
  expect(
    stored({ domains: 'HTTPS://A.example.com, *.example.org', methods: 'get,POST, get', request_headers: 'X-A, x-a', exposed_headers: 'X-B' }),
  ).toMatchObject({
    domains: ['https://a.example.com', '*.example.org'],
    methods: ['GET', 'POST'],
    request_headers: ['X-A'],
    exposed_headers: ['X-B'],
  });
});

test('a stored config parses to itself', () => {
  const once = stored({ domains: ['*.x.com'], max_age: 60, allow_credentials: true });
  expect(stored(once)).toEqual(once);
});

test.each([
  [
    'domain with a path',
    { domains: ['https://a.com/x'] },
    'plugins[1].config.domains[0] must be "*", an origin such as "https://app.example.com" or a host pattern such as "*.example.com"',
  ],
  [
    'domain with two wildcards',
    { domains: ['ok.com', '*.*.com'] },
    'plugins[1].config.domains[1] must be "*", an origin such as "https://app.example.com" or a host pattern such as "*.example.com"',
  ],
  ['domain not a string', { domains: [3] }, 'plugins[1].config.domains[0] must be a string'],
  ['domains not a list', { domains: 3 }, 'plugins[1].config.domains must be an array'],
  ['bad method', { methods: ['GET', 'GE T'] }, 'plugins[1].config.methods[1] is not a valid HTTP method'],
  ['bad request header', { request_headers: ['X-Ok', 'X Bad'] }, 'plugins[1].config.request_headers[1] is not a valid header name'],
  ['bad exposed header', { exposed_headers: ['a:b'] }, 'plugins[1].config.exposed_headers[0] is not a valid header name'],
  ['options_passthrough not a boolean', { options_passthrough: 'yes' }, 'plugins[1].config.options_passthrough must be a boolean'],
  ['allow_credentials not a boolean', { allow_credentials: 1 }, 'plugins[1].config.allow_credentials must be a boolean'],
  ['max_age negative', { max_age: -1 }, 'plugins[1].config.max_age must be at least 0'],
  ['max_age not an integer', { max_age: 1.5 }, 'plugins[1].config.max_age must be an integer number of seconds'],
  ['credentials with any origin', { domains: ['*'], allow_credentials: true }, 'plugins[1].config.allow_credentials must be false when domains contains "*"'],
  ['credentials with the default (any) origin', { allow_credentials: true }, 'plugins[1].config.allow_credentials must be false when domains contains "*"'],
  ['config not an object', 'x', 'plugins[1].config must be an object'],
])('refuses %s with a field-named error', (_row, config, message) => {
  const err = errorOf(config);
  expect(err.code).toBe('VALIDATION_FAILED');
  expect(err.message).toBe(message);
});

test.each([
  ['exact origin', ['https://a.example.com'], 'https://a.example.com', true],
  ['exact origin, case-insensitive', ['https://a.example.com'], 'HTTPS://A.Example.com', true],
  ['exact origin, other scheme', ['https://a.example.com'], 'http://a.example.com', false],
  ['host without scheme, any scheme', ['a.example.com'], 'http://a.example.com', true],
  ['host without scheme, other port', ['a.example.com'], 'http://a.example.com:8080', false],
  ['host wildcard, one level', ['*.example.com'], 'https://a.example.com', true],
  ['host wildcard, two levels', ['*.example.com'], 'https://x.y.example.com', true],
  ['host wildcard, not the apex', ['*.example.com'], 'https://example.com', false],
  ['host wildcard, not a suffix lookalike', ['*.example.com'], 'https://evilexample.com', false],
  ['origin wildcard keeps its scheme', ['https://*.example.com'], 'http://a.example.com', false],
  ['origin wildcard', ['https://*.example.com'], 'https://a.example.com', true],
  ['port wildcard', ['http://localhost:*'], 'http://localhost:3000', true],
  ['"*" is not a listing', ['*'], 'https://a.com', false],
  ['unlisted', ['https://a.com'], 'https://b.com', false],
  ['the null origin', ['https://a.com'], 'null', false],
])('originListed: %s', (_row, domains, origin, listed) => {
  expect(originListed(compiled({ domains }), origin)).toBe(listed);
});

test('compile parses once: sets, joined header values, null when absent', () => {
  const c = compiled({ domains: ['*', 'https://a.com'], methods: ['GET', 'PUT'], request_headers: ['X-A', '*'], max_age: 0 });
  expect(c.anyOrigin).toBe(true);
  expect(c.allowMethods).toBe('GET, PUT');
  expect(c.anyHeader).toBe(true);
  expect([...c.requestHeaders]).toEqual(['x-a']);
  expect(c.exposeHeaders).toBeNull();
  expect(c.maxAge).toBeNull();
  expect(Object.isFrozen(c)).toBe(true);
  expect(compiled({ exposed_headers: ['X-A', 'X-B'], max_age: 600 })).toMatchObject({ exposeHeaders: 'X-A, X-B', maxAge: '600' });
});
