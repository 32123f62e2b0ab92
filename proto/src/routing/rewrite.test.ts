import { compileApi, compileOAuthServer } from '../compile/index.js';
import type { ApiDefinition } from '../definition/types.js';
import { GatehouseError } from '../errors.js';
import { buildRoutingTable, joinPaths, normalizePath, rewrite } from './index.js';
import type { UpstreamTarget } from './index.js';

interface Case {
  listen_path?: string;
  hosts?: string[];
  target: string;
  /** The target's host_pattern. */
  host_pattern?: string;
  strip?: boolean;
  append?: boolean;
  preserve_host?: boolean;
  method?: string;
  /** Request target as a client sends it: path plus optional query. */
  request: string;
  host?: string;
}

function api(c: Case): ApiDefinition {
  return {
    name: 'a',
    active: true,
    hosts: c.hosts ?? [],
    proxy: {
      ...(c.listen_path === undefined ? {} : { listen_path: c.listen_path }),
      upstreams: { balancing: 'roundrobin', targets: [{ target: c.target, ...(c.host_pattern !== undefined && { host_pattern: c.host_pattern }) }] },
      methods: ['ALL'],
      strip_path: c.strip ?? false,
      append_path: c.append ?? false,
      preserve_host: c.preserve_host ?? false,
      insecure_skip_verify: false,
      forwarding_timeouts: { dial_timeout: '30s', response_header_timeout: '60s' },
    },
    plugins: [],
  };
}

/** Match the request as the proxy does (normalised path) and rewrite it. */
function forward(c: Case): UpstreamTarget {
  const route = compileApi(api(c));
  const [rawPath, query = ''] = c.request.split(/\?(.*)/s);
  const path = normalizePath(rawPath);
  const m = buildRoutingTable([route]).match({ method: c.method ?? 'GET', host: c.host, path });
  if (!m) throw new Error(`no match for ${c.request}`);
  return rewrite(m, route.targets[0], { path, query, host: c.host });
}

/** origin + path, for comparing with the upstream column of the docs/proxy.md rewrite table. */
const url = (u: UpstreamTarget): string => u.origin + u.path;

describe('SPEC §4 rewrite table', () => {
  test.each<[string, Case, string]>([
    [
      'row 1: /foo/* no strip, target without path → client URI with query',
      { listen_path: '/foo/*', target: 'http://u', request: '/foo/bar?x=1' },
      'http://u/foo/bar?x=1',
    ],
    ['row 2: /service/* strip → /a/b', { listen_path: '/service/*', target: 'http://u', strip: true, request: '/service/a/b' }, 'http://u/a/b'],
    [
      'row 3: /service/* append, target /example → /example/service/a',
      { listen_path: '/service/*', target: 'http://u/example', append: true, request: '/service/a' },
      'http://u/example/service/a',
    ],
    [
      'row 4: /prepath/{service}/* strip, target {service}:9000 → orders:9000/a',
      { listen_path: '/prepath/{service}/*', target: 'http://{service}:9000', strip: true, request: '/prepath/orders/a' },
      'http://orders:9000/a',
    ],
    [
      'row 5: regex id substituted into target path',
      { listen_path: '/api/recipes/{id:[\\da-f]{24}}', target: 'http://u/recipes/{id}', request: '/api/recipes/5252b1b5301bbf46038b473f' },
      'http://u/recipes/5252b1b5301bbf46038b473f',
    ],
    [
      'row 6: exact /auth/token strip, target /token → /token',
      { listen_path: '/auth/token', target: 'http://auth/token', strip: true, method: 'POST', request: '/auth/token' },
      'http://auth/token',
    ],
  ])('%s', (_name, c, expected) => {
    expect(url(forward(c))).toBe(expected);
  });
});

describe('seed routing rules 7, 9–12', () => {
  test.each<[string, Case, string]>([
    ['seed rule 7: query forwarded', { listen_path: '/q/*', target: 'http://u', request: '/q/x?a=1&b=2' }, 'http://u/q/x?a=1&b=2'],
    ['seed rule 9: no strip, target without path: URI unchanged', { listen_path: '/foo/*', target: 'http://u', request: '/foo/a/b/' }, 'http://u/foo/a/b/'],
    ['seed rule 9: no strip, target path / : URI unchanged', { listen_path: '/foo/*', target: 'http://u/', request: '/foo/a' }, 'http://u/foo/a'],
    ['seed rule 9: no strip, target with path: T', { listen_path: '/foo/*', target: 'http://u/fixed', request: '/foo/a' }, 'http://u/fixed'],
    ['seed rule 10: strip /service/<path> → /<path>', { listen_path: '/service/*', target: 'http://u', strip: true, request: '/service/x/y' }, 'http://u/x/y'],
    ['seed rule 10: strip exact prefix → /', { listen_path: '/service/*', target: 'http://u', strip: true, request: '/service' }, 'http://u/'],
    ['seed rule 10: strip prefix with trailing slash → /', { listen_path: '/service/*', target: 'http://u', strip: true, request: '/service/' }, 'http://u/'],
    ['seed rule 10: strip onto a target path', { listen_path: '/service/*', target: 'http://u/base', strip: true, request: '/service/x' }, 'http://u/base/x'],
    [
      'seed rule 10: strip onto a target path ending in /',
      { listen_path: '/service/*', target: 'http://u/base/', strip: true, request: '/service/x' },
      'http://u/base/x',
    ],
    [
      'seed rule 10: strip everything onto a target path',
      { listen_path: '/service/*', target: 'http://u/base', strip: true, request: '/service' },
      'http://u/base',
    ],
    [
      'seed rule 10: strip with append is still strip',
      { listen_path: '/service/*', target: 'http://u/base', strip: true, append: true, request: '/service/x' },
      'http://u/base/x',
    ],
    [
      'seed rule 11: strip with params, value becomes host',
      { listen_path: '/prepath/{service}/*', target: 'http://{service}.com', strip: true, request: '/prepath/example/p/q' },
      'http://example.com/p/q',
    ],
    [
      'seed rule 11: strip with params, only the first occurrence of the value',
      { listen_path: '/prepath/{service}/*', target: 'http://{service}.com', strip: true, request: '/prepath/dup/dup/x' },
      'http://dup.com/dup/x',
    ],
    [
      'seed rule 11: strip with params, only the first occurrence of a section',
      { listen_path: '/prepath/{service}/*', target: 'http://u', strip: true, request: '/prepath/s/prepath/x' },
      'http://u/prepath/x',
    ],
    ['seed rule 11: strip with a regex parameter', { listen_path: '/v/{n:\\d+}/*', target: 'http://u', strip: true, request: '/v/12/items' }, 'http://u/items'],
    [
      'seed rule 11: strip with a parameter in the middle of a segment',
      { listen_path: '/api/v{ver}/*', target: 'http://u/v{ver}', strip: true, request: '/api/v2/items' },
      'http://u/v2/items',
    ],
    [
      'seed rule 12: append /example + /service/<path>',
      { listen_path: '/service/*', target: 'http://u/example', append: true, request: '/service/p' },
      'http://u/example/service/p',
    ],
    [
      'seed rule 12: append onto target path ending in /',
      { listen_path: '/service/*', target: 'http://u/example/', append: true, request: '/service/p' },
      'http://u/example/service/p',
    ],
    [
      'seed rule 12: append onto a target without path',
      { listen_path: '/service/*', target: 'http://u', append: true, request: '/service/p' },
      'http://u/service/p',
    ],
  ])('%s', (_name, c, expected) => {
    expect(url(forward(c))).toBe(expected);
  });
});

describe('query merge', () => {
  test.each<[string, string, string, string]>([
    ['client query only', 'http://u', '/q?a=1', 'http://u/q?a=1'],
    ['target query only', 'http://u/t?k=v', '/q', 'http://u/t?k=v'],
    ["target's query first, then the client's", 'http://u/t?k=v', '/q?a=1', 'http://u/t?k=v&a=1'],
    ['empty client query adds no ?', 'http://u', '/q?', 'http://u/q'],
    ['placeholder in target query is encoded', 'http://u/t?id={id}', '/q', ''],
  ])('%s', (name, target, request, expected) => {
    if (name.startsWith('placeholder')) {
      const u = forward({ listen_path: '/{id}', target, request: '/a&b=c' });
      expect(url(u)).toBe('http://u/t?id=a%26b%3Dc');
      return;
    }
    expect(url(forward({ listen_path: '/q', target, request }))).toBe(expected);
  });
});

describe('Host header and origin', () => {
  test.each<[string, Case, Partial<UpstreamTarget>]>([
    [
      'target host',
      { listen_path: '/x', target: 'http://up.internal:8080/p', request: '/x', host: 'gw.example.com' },
      { origin: 'http://up.internal:8080', host: 'up.internal:8080' },
    ],
    [
      'default port omitted',
      { listen_path: '/x', target: 'https://up.internal:443', request: '/x', host: 'gw' },
      { origin: 'https://up.internal', host: 'up.internal' },
    ],
    [
      'preserve_host keeps the client Host',
      { listen_path: '/x', target: 'http://up:81', preserve_host: true, request: '/x', host: 'gw.example.com:8080' },
      { origin: 'http://up:81', host: 'gw.example.com:8080' },
    ],
    [
      'preserve_host without a client Host uses the target',
      { listen_path: '/x', target: 'http://up:81', preserve_host: true, request: '/x' },
      { host: 'up:81' },
    ],
    [
      'substituted host',
      { listen_path: '/p/{svc}/*', target: 'http://{svc}.svc.local:9000', request: '/p/orders/x' },
      { origin: 'http://orders.svc.local:9000', host: 'orders.svc.local:9000' },
    ],
  ])('%s', (_name, c, expected) => {
    expect(forward(c)).toMatchObject(expected);
  });
});

describe('placeholders in the target path are encoded', () => {
  test.each<[string, string, string]>([
    ['encoded space stays encoded', '/f/a%20b', 'http://u/files/a%20b'],
    ['value with ? cannot start a query', '/f/a%3Fx=1', 'http://u/files/a%3Fx%3D1'],
    ['value with # cannot start a fragment', '/f/a%23frag', 'http://u/files/a%23frag'],
    ['encoded slash stays inside one segment', '/f/a%2Fb', 'http://u/files/a%2Fb'],
  ])('%s', (_name, request, expected) => {
    expect(url(forward({ listen_path: '/f/{name:.+}', target: 'http://u/files/{name}', request }))).toBe(expected);
  });
});

describe('BAD_UPSTREAM_HOST: the client never picks the authority', () => {
  test.each<[string, string]>([
    ['userinfo trick', 'evil.com@x'],
    ['port injection', 'a:1'],
    ['slash', 'a%2Fb'],
    ['encoded slash alone', '%2F'],
    ['encoded at sign', 'evil.com%40x'],
    ['encoded question mark', 'evil.com%3F'],
    ['encoded hash', 'evil.com%23'],
    ['backslash', 'evil.com%5Cx'],
    ['space', 'a%20b'],
    ['percent', '%25'],
    ['empty label', 'a..b'],
    ['unicode', 'ex%C3%A4mple'],
  ])('%s: %s', (_name, value) => {
    // `.+` is the most permissive regex an admin could write: the value is captured, the host check must refuse it.
    const c: Case = { listen_path: '/prepath/{service:.+}/*', target: 'http://{service}.com:9000', strip: true, request: `/prepath/${value}/a` };
    let err: unknown;
    try {
      forward(c);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(GatehouseError);
    expect(err).toMatchObject({ code: 'BAD_UPSTREAM_HOST', status: 400 });
  });

  test.each<[string, string, string | null]>([
    ['raw slash ends the segment', '/prepath/evil.com/x/a', 'evil.com'],
    ['encoded slash does not match {service}', '/prepath/a%2Fb/a', null],
  ])('plain {service}: %s', (_name, request, captured) => {
    const route = compileApi(api({ listen_path: '/prepath/{service}/*', target: 'http://{service}:9000', request }));
    const m = buildRoutingTable([route]).match({ method: 'GET', host: undefined, path: normalizePath(request) });
    expect(m?.params.service ?? null).toBe(captured);
  });

  test('a one-label value passes, in any case', () => {
    expect(url(forward({ listen_path: '/prepath/{service}/*', target: 'http://{service}:9000', strip: true, request: '/prepath/My-Svc/a' }))).toBe(
      'http://my-svc:9000/a',
    );
    expect(url(forward({ listen_path: '/p/{service}/*', target: 'http://{service}.ns.svc:9000', strip: true, request: '/p/orders/a' }))).toBe(
      'http://orders.ns.svc:9000/a',
    );
  });

  const refused = (c: Case): unknown => {
    try {
      forward(c);
    } catch (e) {
      return e;
    }
    return null;
  };

  test.each<[string, string]>([
    ['localhost', 'localhost'],
    ['localhost in capitals', 'LOCALHOST'],
    ['an IPv4 literal', '127.0.0.1'],
    ['the link-local metadata address', '169.254.169.254'],
    ['an IPv4 address as one number', '2130706433'],
    ['an IPv4 address in hex', '0x7f000001'],
    ['a one-digit label the URL parser reads as an address', '1'],
    ['a name of two labels', 'evil.com'],
    ['a label that starts with a hyphen', '-a'],
    ['a label longer than 63 characters', 'a'.repeat(64)],
  ])('by default a host placeholder refuses %s (%s)', (_name, value) => {
    const err = refused({ listen_path: '/prepath/{service:.+}/*', target: 'http://{service}:9000', strip: true, request: `/prepath/${value}/a` });
    expect(err).toMatchObject({ code: 'BAD_UPSTREAM_HOST', status: 400 });
  });

  test('a placeholder in the last label cannot complete an IP literal', () => {
    expect(refused({ listen_path: '/p/{n}/*', target: 'http://10.0.0.{n}:9000', request: '/p/5/a' })).toMatchObject({ code: 'BAD_UPSTREAM_HOST' });
  });

  test('a port placeholder takes a port number only', () => {
    expect(url(forward({ listen_path: '/p/{port}/*', target: 'http://orders:{port}', strip: true, request: '/p/8081/a' }))).toBe('http://orders:8081/a');
    expect(refused({ listen_path: '/p/{port}/*', target: 'http://orders:{port}', request: '/p/80a/a' })).toMatchObject({ code: 'BAD_UPSTREAM_HOST' });
  });

  test('host_pattern widens what the host may be, and still never allows an IP literal or localhost', () => {
    const c = (value: string): Case => ({
      listen_path: '/p/{service:.+}/*',
      target: 'http://{service}:9000',
      host_pattern: '[a-z0-9-]+\\.[a-z0-9-]+\\.svc|localhost|[0-9.]+',
      strip: true,
      request: `/p/${value}/a`,
    });
    expect(url(forward(c('my-svc.ns.svc')))).toBe('http://my-svc.ns.svc:9000/a');
    expect(refused(c('my-svc.ns'))).toMatchObject({ code: 'BAD_UPSTREAM_HOST' });
    expect(refused(c('a.b.svc.evil.com'))).toMatchObject({ code: 'BAD_UPSTREAM_HOST' });
    expect(refused(c('localhost'))).toMatchObject({ code: 'BAD_UPSTREAM_HOST' });
    expect(refused(c('127.0.0.1'))).toMatchObject({ code: 'BAD_UPSTREAM_HOST' });
  });

  test('host_pattern is refused on a target whose host has no placeholder, and must be a valid regex', () => {
    expect(() => compileApi(api({ listen_path: '/p/{port}/*', target: 'http://orders:{port}', host_pattern: 'a', request: '/' }))).toThrow(
      expect.objectContaining({ code: 'VALIDATION_FAILED', field: 'proxy.upstreams.targets[0].host_pattern' }),
    );
    expect(() => compileApi(api({ listen_path: '/p/{s}/*', target: 'http://{s}:9000', host_pattern: '(', request: '/' }))).toThrow(
      expect.objectContaining({ code: 'VALIDATION_FAILED', field: 'proxy.upstreams.targets[0].host_pattern' }),
    );
  });

  test('a dot-segment value in the target path is refused', () => {
    const c: Case = { listen_path: '/d/v{x:.+}', target: 'http://u/files/{x}/raw', request: '/d/v..' };
    expect(() => forward(c)).toThrow(expect.objectContaining({ code: 'BAD_UPSTREAM_HOST' }));
  });
});

describe('OAuth endpoint routes rewrite like APIs', () => {
  test('token endpoint with strip', () => {
    const server = compileOAuthServer({
      name: 'auth',
      oauth_endpoints: {
        token: { ...api({ listen_path: '/auth/token', target: 'http://idp:9000/oauth/token', strip: true, request: '' }).proxy, methods: ['POST'] },
      },
      token_strategy: { name: 'storage', settings: {}, leeway: 0 },
    });
    const t = buildRoutingTable(server.routes);
    const m = t.match({ method: 'POST', host: 'gw', path: '/auth/token' });
    expect(m?.route.id).toBe('oauth:auth:token');
    expect(rewrite(m!, m!.route.targets[0], { path: '/auth/token', query: 'grant_type=x', host: 'gw' })).toEqual({
      origin: 'http://idp:9000',
      path: '/oauth/token?grant_type=x',
      host: 'idp:9000',
    });
  });
});

describe('joinPaths', () => {
  test.each<[string, string, string, string]>([
    ['both slashes: one kept', '/a/', '/b', '/a/b'],
    ['no slash: one added', '/a', 'b', '/a/b'],
    ['one slash kept', '/a', '/b', '/a/b'],
    ['empty rest keeps target', '/a', '', '/a'],
    ['empty target keeps rest', '', '/b', '/b'],
    ['both empty → /', '', '', '/'],
    ['root + root → /', '/', '/', '/'],
    ['trailing slash of rest kept', '/a', '/b/', '/a/b/'],
  ])('%s', (_name, a, b, expected) => {
    expect(joinPaths(a, b)).toBe(expected);
  });
});
