import { compilePlugins, type CompiledProxyCache } from '#proto/plugins/index';
import { parseApiDefinition } from '#proto/definition/index';
import { cacheDirectives, freshnessMs, headerValues, keyedQuery, requestUse } from './cache-rules.js';
import { hitHeaders, responseVary } from './index.js';

const compiled = (config: unknown = {}): CompiledProxyCache => {
  const def = parseApiDefinition({
    name: 'pc',
    proxy: { listen_path: '/pc/*', upstreams: { targets: [{ target: 'http://u' }] } },
    plugins: [{ name: 'proxy_cache', config }],
  });
  return compilePlugins(def.plugins)[0].config as CompiledProxyCache;
};
const json = { 'content-type': 'application/json' };

describe('cacheDirectives', () => {
  test('names lower-cased, arguments unquoted, the first of a repeated one kept', () => {
    expect(cacheDirectives('Public, max-age=60, s-maxage="30", MAX-AGE=5, ,no-cache')).toEqual(
      new Map([
        ['public', ''],
        ['max-age', '60'],
        ['s-maxage', '30'],
        ['no-cache', ''],
      ]),
    );
    expect(cacheDirectives(undefined).size).toBe(0);
  });
});

describe('requestUse', () => {
  test.each([
    ['GET', {}, 'lookup'],
    ['HEAD', {}, 'lookup'],
    ['POST', {}, 'bypass'],
    ['GET', { 'cache-control': 'no-cache' }, 'refresh'],
    ['GET', { 'cache-control': 'max-age=0, no-store' }, 'bypass'],
    ['GET', { pragma: 'no-cache' }, 'refresh'],
    // Pragma counts only without Cache-Control (RFC 9111 §5.4).
    ['GET', { pragma: 'no-cache', 'cache-control': 'max-age=10' }, 'lookup'],
  ])('%s with %j: %s', (method, headers, expected) => {
    expect(requestUse(compiled(), method, headers)).toBe(expected);
  });

  test('without cache_control the request directives are ignored; methods outside `methods` bypass', () => {
    expect(requestUse(compiled({ cache_control: false }), 'GET', { 'cache-control': 'no-store' })).toBe('lookup');
    expect(requestUse(compiled({ methods: ['GET'] }), 'HEAD', {})).toBe('bypass');
  });
});

describe('freshnessMs', () => {
  test('ttl when the response names no freshness; s-maxage before max-age; capped at 24 h', () => {
    const c = compiled({ ttl: '10s' });
    expect(freshnessMs(c, 200, json, false)).toBe(10_000);
    expect(freshnessMs(c, 200, { ...json, 'cache-control': 'max-age=60' }, false)).toBe(60_000);
    expect(freshnessMs(c, 200, { ...json, 'cache-control': 'max-age=60, s-maxage=5' }, false)).toBe(5000);
    expect(freshnessMs(c, 200, { ...json, 'cache-control': 'max-age=999999' }, false)).toBe(86_400_000);
    expect(freshnessMs(c, 200, { ...json, 'cache-control': 'max-age=0' }, false)).toBeNull();
  });

  test.each([
    ['a status not listed', 500, json],
    ['Set-Cookie', 200, { ...json, 'set-cookie': ['a=b'] }],
    ['Vary: *', 200, { ...json, vary: 'Accept, *' }],
    ['no-store', 200, { ...json, 'cache-control': 'no-store' }],
    ['private', 200, { ...json, 'cache-control': 'private, max-age=60' }],
    ['no-cache', 200, { ...json, 'cache-control': 'no-cache' }],
  ])('%s is not stored', (_name, status, headers) => {
    expect(freshnessMs(compiled(), status, headers, false)).toBeNull();
  });

  test('a request with Authorization: only public, s-maxage or must-revalidate responses (RFC 9111 §3.5)', () => {
    const c = compiled();
    expect(freshnessMs(c, 200, json, true)).toBeNull();
    expect(freshnessMs(c, 200, { ...json, 'cache-control': 'max-age=60' }, true)).toBeNull();
    expect(freshnessMs(c, 200, { ...json, 'cache-control': 'public' }, true)).toBe(30_000);
    expect(freshnessMs(c, 200, { ...json, 'cache-control': 's-maxage=7' }, true)).toBe(7000);
    expect(freshnessMs(c, 200, { ...json, 'cache-control': 'must-revalidate, max-age=9' }, true)).toBe(9000);
  });

  test('without cache_control, a request with Authorization is never stored, whatever the response says', () => {
    const c = compiled({ cache_control: false });
    expect(freshnessMs(c, 200, json, false)).toBe(30_000);
    expect(freshnessMs(c, 200, json, true)).toBeNull();
    expect(freshnessMs(c, 200, { ...json, 'cache-control': 'public' }, true)).toBeNull();
  });

  test('content_types limits the types stored; without cache_control only the config decides', () => {
    const typed = compiled({ content_types: ['application/json'] });
    expect(freshnessMs(typed, 200, { 'content-type': 'application/json; charset=utf-8' }, false)).toBe(30_000);
    expect(freshnessMs(typed, 200, { 'content-type': 'text/html' }, false)).toBeNull();
    expect(freshnessMs(typed, 200, {}, false)).toBeNull();
    const plain = compiled({ cache_control: false, ttl: '2s' });
    expect(freshnessMs(plain, 200, { ...json, 'cache-control': 'no-store, max-age=60' }, false)).toBe(2000);
    expect(freshnessMs(plain, 200, { ...json, 'set-cookie': 'a=b' }, false)).toBeNull();
  });
});

describe('the key', () => {
  test('the whole query in canonical order: decoded, sorted by name then value, re-encoded', () => {
    expect(keyedQuery('b=2&a=1&a=0', null)).toBe('a=0&a=1&b=2');
    expect(keyedQuery('q=a+b&x=%41', null)).toBe(keyedQuery('x=A&q=a%20b', null));
    expect(keyedQuery('flag&a=', null)).toBe('a=&flag=');
    expect(keyedQuery('', null)).toBe('');
  });

  test('vary_query_params: only the named parameters; [] ignores the query', () => {
    expect(keyedQuery('page=2&utm_source=x&size=10', new Set(['page', 'size']))).toBe('page=2&size=10');
    expect(keyedQuery('page=2', new Set())).toBe('');
  });

  test('header values by name (any case), repeated ones joined, an absent one empty', () => {
    expect(headerValues(['X-Tenant', ' a ', 'Accept', 'x', 'x-tenant', 'b'], ['x-tenant', 'accept-language'])).toEqual(['a, b', '']);
  });

  test("a response's Vary names without those the client headers added (CORS's Origin), sorted", () => {
    expect(responseVary('Origin, Accept-Encoding', 'Origin')).toEqual(['accept-encoding']);
    expect(responseVary('Origin, X-A, Origin', 'Origin')).toEqual(['origin', 'x-a']);
    expect(responseVary(undefined, undefined)).toEqual([]);
  });
});

describe('hitHeaders', () => {
  test("the stored headers, this request's client headers (a Vary name not repeated), Age and X-Cache-Status", () => {
    const entry = { status: 200, headers: { ...json, vary: 'Origin, Accept-Encoding' }, body: Buffer.from('x'), storedAt: 10_000, expiresAt: 99_000 };
    expect(hitHeaders(entry, { vary: 'Origin', 'access-control-allow-origin': 'https://b.example' }, 12_500)).toEqual({
      ...json,
      vary: 'Origin, Accept-Encoding',
      'access-control-allow-origin': 'https://b.example',
      age: '2',
      'x-cache-status': 'Hit',
    });
    expect(hitHeaders({ ...entry, headers: json }, { vary: 'Origin' }, 10_000)).toMatchObject({ vary: 'Origin', age: '0' });
  });
});
