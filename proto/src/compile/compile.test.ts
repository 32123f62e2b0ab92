import type { ApiDefinition, OAuthServerDefinition, ProxyDefinition } from '../definition/types.js';
import {
  compileApi,
  compileAllOrThrow,
  compileDefinitions,
  type CompiledConfig,
  compileHostPattern,
  compileListenPath,
  compileOAuthServer,
  compileOne,
  compileTarget,
  createCompileCache,
  resolveTarget,
  routeConflictKey,
} from './index.js';
import { parseApiDefinition, parseOAuthServer } from '../definition/index.js';
import { proxyDefaults } from '../../../test/helpers/proxy-defaults.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';

function proxy(o: Partial<ProxyDefinition> & { target?: string } = {}): ProxyDefinition {
  const { target, ...rest } = o;
  return {
    upstreams: { balancing: 'roundrobin', targets: [{ target: target ?? 'http://u' }] },
    ...proxyDefaults(),
    ...rest,
  };
}

function api(o: Partial<Omit<ApiDefinition, 'proxy'>> & { proxy?: Partial<ProxyDefinition> & { target?: string } } = {}): ApiDefinition {
  return {
    name: o.name ?? 'a',
    active: o.active ?? true,
    hosts: o.hosts ?? [],
    proxy: proxy({ listen_path: '/a/*', ...o.proxy }),
    plugins: o.plugins ?? [],
  };
}

function server(name: string, endpoints: Partial<Record<'token' | 'authorize' | 'introspect' | 'revoke', ProxyDefinition>> = {}): OAuthServerDefinition {
  return {
    name,
    oauth_endpoints: { token: proxy({ listen_path: `/${name}/token`, methods: ['POST'] }), ...endpoints },
    token_strategy: { name: 'storage', settings: {}, leeway: 0 },
  };
}

describe('listen_path matching', () => {
  test.each<[string, string, string, { params: Record<string, string>; matched: string } | null]>([
    ['/foo/* matches /foo', '/foo/*', '/foo', { params: {}, matched: '/foo' }],
    ['/foo/* matches /foo/', '/foo/*', '/foo/', { params: {}, matched: '/foo' }],
    ['/foo/* matches /foo/a/b', '/foo/*', '/foo/a/b', { params: {}, matched: '/foo' }],
    ['/foo/* never matches /foobar', '/foo/*', '/foobar', null],
    ['/foo/* never matches /', '/foo/*', '/', null],
    ['/* matches /', '/*', '/', { params: {}, matched: '' }],
    ['/* matches anything', '/*', '/x/y', { params: {}, matched: '' }],
    ['exact matches itself', '/auth/token', '/auth/token', { params: {}, matched: '/auth/token' }],
    ['exact does not match a longer path', '/auth/token', '/auth/token/x', null],
    ['exact does not match with trailing slash', '/auth/token', '/auth/token/', null],
    ['exact / matches /', '/', '/', { params: {}, matched: '/' }],
    ['{name} captures one segment', '/u/{id}', '/u/42', { params: { id: '42' }, matched: '/u/42' }],
    ['{name} does not match an empty segment', '/u/{id}', '/u/', null],
    ['{name} does not span segments', '/u/{id}', '/u/4/2', null],
    ['{name} in wildcard path', '/p/{s}/*', '/p/x/y/z', { params: { s: 'x' }, matched: '/p/x' }],
    ['{name} in wildcard path, no rest', '/p/{s}/*', '/p/x', { params: { s: 'x' }, matched: '/p/x' }],
    ['wildcard with param needs the param segment', '/p/{s}/*', '/p', null],
    [
      'regex with braces',
      '/r/{id:[\\da-f]{24}}',
      '/r/5252b1b5301bbf46038b473f',
      { params: { id: '5252b1b5301bbf46038b473f' }, matched: '/r/5252b1b5301bbf46038b473f' },
    ],
    ['regex is anchored (too long)', '/r/{id:[\\da-f]{24}}', '/r/5252b1b5301bbf46038b473fa', null],
    ['regex is anchored (prefix only)', '/r/{n:\\d+}', '/r/12abc', null],
    ['regex alternation is anchored as a whole', '/r/{k:a|b}', '/r/ax', null],
    ['regex alternation matches', '/r/{k:a|b}', '/r/b', { params: { k: 'b' }, matched: '/r/b' }],
    ['user capturing groups do not shift values', '/r/{a:(x)(y)?}/{b}', '/r/x/z', { params: { a: 'x', b: 'z' }, matched: '/r/x/z' }],
    ['param inside a segment', '/api/v{ver:\\d+}/*', '/api/v2/x', { params: { ver: '2' }, matched: '/api/v2' }],
    ['two params in one segment', '/d/{y:\\d{4}}-{m:\\d{2}}', '/d/2024-05', { params: { y: '2024', m: '05' }, matched: '/d/2024-05' }],
    ['captured value is percent-decoded', '/u/{name}', '/u/a%20b', { params: { name: 'a b' }, matched: '/u/a%20b' }],
    ['malformed escape captured raw', '/u/{name}', '/u/a%ZZ', { params: { name: 'a%ZZ' }, matched: '/u/a%ZZ' }],
    ['literal after param must match', '/u/{id}/posts', '/u/1/comments', null],
    ['case-sensitive path', '/Foo/*', '/foo', null],
  ])('%s', (_name, listenPath, path, expected) => {
    expect(compileListenPath(listenPath).match(path)).toEqual(expected);
  });

  test.each<[string, string, string, boolean, string[]]>([
    ['wildcard', '/foo/*', '/foo', true, []],
    ['exact', '/foo/bar', '/foo/bar', false, []],
    ['param', '/prepath/{service}/*', '/prepath/', true, ['service']],
    ['regex param', '/api/recipes/{id:[\\da-f]{24}}', '/api/recipes/', false, ['id']],
    ['catch-all', '/*', '', true, []],
    ['param first', '/{x}/y', '/', false, ['x']],
    ['mid-segment param', '/api/v{ver}/*', '/api/v', true, ['ver']],
  ])('compiled shape: %s', (_name, source, literalPrefix, wildcard, paramNames) => {
    expect(compileListenPath(source)).toMatchObject({ source, literalPrefix, wildcard, paramNames });
  });
});

describe('listen_path compile errors', () => {
  test.each<[string, string, RegExp]>([
    ['empty', '', /^proxy\.listen_path is required$/],
    ['no leading slash', 'foo/*', /^proxy\.listen_path must start with \/$/],
    ['unclosed brace', '/a/{id', /^proxy\.listen_path has an unclosed \{/],
    ['unclosed regex brace', '/a/{id:[a-z]{2}', /^proxy\.listen_path has an unclosed \{/],
    ['stray closing brace', '/a/id}', /^proxy\.listen_path has an unmatched \}/],
    ['bad parameter name', '/a/{1x}', /^proxy\.listen_path has an invalid parameter name "1x"$/],
    ['empty parameter name', '/a/{}', /^proxy\.listen_path has an invalid parameter name ""$/],
    ['empty regex', '/a/{id:}', /^proxy\.listen_path parameter "id" has an empty regex$/],
    ['bad regex', '/a/{id:[a-z}', /^proxy\.listen_path parameter "id" has an invalid regex: /],
    ['bad regex (unbalanced paren)', '/a/{id:(ab}', /^proxy\.listen_path parameter "id" has an invalid regex: /],
    ['duplicate parameter', '/a/{id}/b/{id}', /^proxy\.listen_path defines parameter "id" twice$/],
    ['duplicate parameter in one segment', '/a/{id}-{id}', /^proxy\.listen_path defines parameter "id" twice$/],
    ['star in the middle', '/a/*/b', /^proxy\.listen_path may contain \* only as a final \/\*$/],
    ['star without slash', '/a*', /^proxy\.listen_path may contain \* only as a final \/\*$/],
    ['query', '/a?x=1', /^proxy\.listen_path must not contain \? or #$/],
    ['empty segment', '/a//b', /^proxy\.listen_path must not contain empty segments/],
    ['dot-dot segment', '/a/../b/*', /^proxy\.listen_path must not contain \. or \.\. segments$/],
  ])('%s: %s', (_name, source, message) => {
    const err = gatehouseErrorOf(() => compileListenPath(source));
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', field: 'proxy.listen_path', status: 400 });
    expect(err.message).toMatch(message);
  });

  test('field path of an OAuth endpoint', () => {
    const err = gatehouseErrorOf(() => compileListenPath('/x/{', 'oauth_endpoints.token.listen_path'));
    expect(err.field).toBe('oauth_endpoints.token.listen_path');
    expect(err.message).toMatch(/^oauth_endpoints\.token\.listen_path has an unclosed \{/);
  });
});

describe('target validation', () => {
  test.each<[string, string, string[], string]>([
    ['undefined placeholder', 'http://{x}.com', [], 'proxy.upstreams.targets[0].target uses {x} which is not defined in proxy.listen_path'],
    ['undefined placeholder in path', 'http://u/{id}', ['other'], 'proxy.upstreams.targets[0].target uses {id} which is not defined in proxy.listen_path'],
    ['not a URL', 'not a url', [], 'proxy.upstreams.targets[0].target is not a valid URL'],
    ['relative', '/just/a/path', [], 'proxy.upstreams.targets[0].target is not a valid URL'],
    ['other scheme', 'ftp://u/x', [], 'proxy.upstreams.targets[0].target is not a valid URL'],
    ['no host', 'http://', [], 'proxy.upstreams.targets[0].target is not a valid URL'],
    ['empty', '', [], 'proxy.upstreams.targets[0].target is required'],
    ['user info', 'http://user:pw@u', [], 'proxy.upstreams.targets[0].target must not contain user info'],
  ])('%s', (_name, template, params, message) => {
    const err = gatehouseErrorOf(() => compileTarget(template, params, 'proxy.upstreams.targets[0].target'));
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', field: 'proxy.upstreams.targets[0].target', message });
  });

  test.each<[string, string, string[]]>([
    ['plain', 'http://u', []],
    ['https with port and path', 'https://u.example.com:8443/base?x=1', []],
    ['host placeholder', 'http://{service}.com', ['service']],
    ['host placeholder with port', 'http://{service}:9000', ['service']],
    ['port placeholder', 'http://u:{port}', ['port']],
    ['path placeholder', 'http://u/recipes/{id}', ['id']],
    ['IPv4', 'http://127.0.0.1:8080', []],
    ['IPv6', 'http://[::1]:8080', []],
    ['underscore host (compose service)', 'http://my_service:8080', []],
  ])('valid: %s', (_name, template, params) => {
    expect(() => compileTarget(template, params, 'proxy.upstreams.targets[0].target')).not.toThrow();
  });

  describe('Kubernetes Service targets', () => {
    const field = 'proxy.upstreams.targets[0].target';
    test.each<[string, string, object]>([
      ['own namespace, port number', 'k8s://orders:8080', { scheme: 'http', path: '/', service: { name: 'orders', namespace: null, port: 8080 } }],
      [
        'namespace, port name, path',
        'k8s://orders.shop:http/base/v1',
        { scheme: 'http', path: '/base/v1', service: { name: 'orders', namespace: 'shop', port: 'http' } },
      ],
      ['https', 'k8s+https://Orders.Shop:443', { scheme: 'https', path: '/', service: { name: 'orders', namespace: 'shop', port: 443 } }],
    ])('valid: %s', (_name, template, plan) => {
      expect(compileTarget(template, [], field)).toMatchObject(plan);
    });

    test.each<[string, string, string[], string]>([
      ['no port', 'k8s://orders', [], 'is not a valid Kubernetes Service target'],
      ['a host name', 'k8s://orders.shop.svc.cluster.local:80', [], 'is not a valid Kubernetes Service target'],
      ['a query', 'k8s://orders:80/x?y=1', [], 'is not a valid Kubernetes Service target'],
      ['port 0', 'k8s://orders:0', [], 'names a port outside 1–65535'],
      ['port 70000', 'k8s://orders:70000', [], 'names a port outside 1–65535'],
      ['placeholder', 'k8s://orders:80/{id}', ['id'], 'names a Kubernetes Service and takes no placeholders'],
    ])('refused: %s', (_name, template, params, message) => {
      const err = gatehouseErrorOf(() => compileTarget(template, params, field));
      expect(err).toMatchObject({ code: 'VALIDATION_FAILED', field });
      expect(err.message).toContain(`${field} ${message}`);
    });

    test('a data plane holding one (no ready endpoints) answers NO_ENDPOINTS, and a health check skips it', () => {
      const plan = compileTarget('k8s://orders:8080', [], field);
      expect(gatehouseErrorOf(() => resolveTarget(plan, {}))).toMatchObject({ code: 'NO_ENDPOINTS', status: 503 });
      expect(() =>
        compileApi(
          api({
            proxy: {
              upstreams: {
                balancing: 'roundrobin',
                targets: [{ target: 'k8s://orders:8080' }],
                health_check: { passive: { unhealthy_threshold: 5, ejection: '30s' } },
              } as never,
            },
          }),
        ),
      ).not.toThrow();
    });
  });

  test('routes with the same target URL share its frozen plan, each still checked against its own listen_path', () => {
    const a = compileApi(api({ name: 'a', proxy: { listen_path: '/a/{id}', target: 'http://shared:9000/x/{id}' } }));
    const b = compileApi(api({ name: 'b', proxy: { listen_path: '/b/{id}/*', target: 'http://shared:9000/x/{id}' } }));
    expect(b.targets[0].plan).toBe(a.targets[0].plan);
    expect(Object.isFrozen(a.targets[0].plan)).toBe(true);
    // The target objects stay per route: the proxy keys its upstream pools by them (dial timeout, TLS mode).
    expect(b.targets[0]).not.toBe(a.targets[0]);
    const err = gatehouseErrorOf(() => compileApi(api({ name: 'c', proxy: { listen_path: '/c/*', target: 'http://shared:9000/x/{id}' } })));
    expect(err.message).toBe('proxy.upstreams.targets[0].target uses {id} which is not defined in proxy.listen_path');
  });

  test('routes listing the same methods share one Set; a route listing others has its own', () => {
    const routeOf = (name: string, methods: string[]) => compileApi(api({ name, proxy: { listen_path: `/${name}/*`, methods } }));
    const a = routeOf('a', ['GET', 'POST']);
    const b = routeOf('b', ['get', 'POST']);
    expect(b.methods).toBe(a.methods);
    expect([...b.methods!]).toEqual(['GET', 'POST']);
    const c = routeOf('c', ['GET', 'PUT']);
    expect(c.methods).not.toBe(a.methods);
    expect([...c.methods!]).toEqual(['GET', 'PUT']);
    expect(a.methods!.has('PUT')).toBe(false);
  });

  test('index and field of a later target', () => {
    const err = gatehouseErrorOf(() =>
      compileApi(api({ proxy: { upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://u' }, { target: 'nope' }] } } })),
    );
    expect(err).toMatchObject({ field: 'proxy.upstreams.targets[1].target', message: 'proxy.upstreams.targets[1].target is not a valid URL' });
  });
});

describe('compileApi', () => {
  test('a gRPC health check needs an HTTP/2 upstream', () => {
    const checked = (protocol?: 'http2') =>
      compileApi(
        api({
          proxy: {
            upstreams: {
              balancing: 'roundrobin',
              targets: [{ target: 'http://u' }],
              health_check: { active: { grpc: { service: '' } } as never },
              ...(protocol && { protocol }),
            },
          },
        }),
      );
    expect(gatehouseErrorOf(() => checked())).toMatchObject({
      field: 'proxy.upstreams.health_check.active.grpc',
      message: 'proxy.upstreams.health_check.active.grpc needs proxy.upstreams.protocol "http2"',
    });
    expect(checked('http2').targets).toHaveLength(1);
  });

  test('grpc_web needs an HTTP/2 upstream; a disabled one does not', () => {
    const grpcWeb = (protocol: 'http1' | 'http2' | undefined, enabled = true) =>
      compileApi(
        api({
          proxy: { upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://u' }], ...(protocol && { protocol }) } },
          plugins: [
            { name: 'body_limit', enabled: true, config: { limit: '1K' } },
            { name: 'grpc_web', enabled, config: {} },
          ],
        }),
      );
    for (const protocol of [undefined, 'http1'] as const) {
      expect(gatehouseErrorOf(() => grpcWeb(protocol))).toMatchObject({
        field: 'plugins[1]',
        message: 'plugins[1] grpc_web needs proxy.upstreams.protocol "http2"',
      });
    }
    expect(grpcWeb('http2').plugins.map((p) => p.name)).toEqual(['body_limit', 'grpc_web']);
    expect(grpcWeb(undefined, false).plugins.map((p) => p.name)).toEqual(['body_limit']);
  });

  test('acl needs key_auth or basic_auth enabled on the API (no consumer to authorize otherwise); a disabled acl does not', () => {
    const acl = { name: 'acl', enabled: true, config: { allow: ['admins'], deny: [], hide_groups_header: false } } as const;
    const withPlugins = (plugins: object[]) => compileApi(api({ plugins: plugins as ApiDefinition['plugins'] }));
    const message = 'plugins[1] acl needs key_auth or basic_auth enabled on the API (there is no consumer to authorize without one)';
    for (const other of [
      { name: 'oauth2', enabled: true, config: { server_name: 's' } },
      { name: 'key_auth', enabled: false, config: {} },
    ]) {
      expect(gatehouseErrorOf(() => withPlugins([other, acl]))).toMatchObject({ field: 'plugins[1]', message });
    }
    const keyAuth = parseApiDefinition({
      name: 'k',
      proxy: { listen_path: '/k/*', upstreams: { targets: [{ target: 'http://u' }] } },
      plugins: [{ name: 'key_auth' }],
    }).plugins[0];
    const basicAuth = parseApiDefinition({
      name: 'b',
      proxy: { listen_path: '/b/*', upstreams: { targets: [{ target: 'http://u' }] } },
      plugins: [{ name: 'basic_auth' }],
    }).plugins[0];
    // After authentication whatever the listed order.
    expect(withPlugins([acl, keyAuth]).plugins.map((p) => p.name)).toEqual(['key_auth', 'acl']);
    expect(withPlugins([basicAuth, acl]).plugins.map((p) => p.name)).toEqual(['basic_auth', 'acl']);
    expect(
      withPlugins([
        { name: 'body_limit', enabled: true, config: { limit: '1K' } },
        { ...acl, enabled: false },
      ]).plugins.map((p) => p.name),
    ).toEqual(['body_limit']);
  });

  test('route shape', () => {
    const route = compileApi(
      api({
        name: 'orders',
        hosts: ['Shop.Example.com', '*.example.com'],
        proxy: { listen_path: '/orders/{id}/*', methods: ['get', 'POST'], target: 'http://{id}.svc' },
        plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'auth' } }],
      }),
    );
    expect(route).toMatchObject({
      id: 'api:orders',
      kind: 'api',
      name: 'orders',
      hosts: ['shop.example.com', '*.example.com'],
      conditionCount: 2,
      oauth2: { serverName: 'auth' },
      targets: [{ template: 'http://{id}.svc', weight: 1 }],
    });
    expect([...route.methods!]).toEqual(['GET', 'POST']);
    expect(route.listenPath?.literalPrefix).toBe('/orders/');
  });

  test.each<[string, ApiDefinition, number, boolean]>([
    ['ALL methods → null, no conditions', api(), 0, false],
    ['hosts only count', api({ hosts: ['a.com'] }), 1, false],
    ['methods count', api({ proxy: { methods: ['GET'] } }), 1, false],
    ['each header counts', api({ proxy: { match_headers: { 'x-a': ['1'], 'x-b': ['1', '2'] } } }), 2, false],
    ['hosts, methods and a header', api({ hosts: ['a.com'], proxy: { methods: ['GET'], match_headers: { 'x-a': ['1'] } } }), 3, false],
    ['disabled oauth2 plugin does not protect', api({ plugins: [{ name: 'oauth2', enabled: false, config: { server_name: 's' } }] }), 0, false],
    ['enabled oauth2 plugin protects', api({ plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 's' } }] }), 0, true],
  ])('%s', (_name, def, conditionCount, protectedRoute) => {
    const route = compileApi(def);
    expect(route.conditionCount).toBe(conditionCount);
    expect(route.oauth2 !== undefined).toBe(protectedRoute);
  });

  test.each<[string, ApiDefinition, string, string]>([
    ['no condition at all', api({ proxy: { listen_path: undefined } }), 'proxy.listen_path', 'proxy.listen_path is required'],
    ['bad host pattern', api({ hosts: ['a.com', 'bad host'] }), 'hosts[1]', 'hosts[1] must be a host name'],
    ['wildcard in the middle of a host', api({ hosts: ['a.*.com'] }), 'hosts[0]', 'hosts[0] must be a host name'],
    ['bad method', api({ proxy: { methods: ['GET', 'NOT A METHOD'] } }), 'proxy.methods[1]', 'proxy.methods[1] is not an HTTP method'],
    [
      'no targets',
      api({ proxy: { upstreams: { balancing: 'roundrobin', targets: [] } } }),
      'proxy.upstreams.targets',
      'proxy.upstreams.targets must contain at least one target',
    ],
    ['bad listen_path', api({ proxy: { listen_path: 'x' } }), 'proxy.listen_path', 'proxy.listen_path must start with /'],
    [
      'target param missing from listen_path',
      api({ proxy: { listen_path: '/a/*', target: 'http://{svc}' } }),
      'proxy.upstreams.targets[0].target',
      'proxy.upstreams.targets[0].target uses {svc} which is not defined in proxy.listen_path',
    ],
  ])('error: %s', (_name, def, field, message) => {
    const err = gatehouseErrorOf(() => compileApi(def));
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', field });
    expect(err.message.startsWith(message)).toBe(true);
  });

  test('routes on hosts only (no listen_path) are valid', () => {
    expect(compileApi(api({ hosts: ['a.com'], proxy: { listen_path: undefined } })).listenPath).toBeNull();
  });

  test('routes on headers only (no listen_path) are valid; the conditions are the stored ones, by name', () => {
    const route = compileApi(api({ proxy: { listen_path: undefined, match_headers: { 'x-a': ['1', '2'], 'x-b': ['3'] } } }));
    expect(route.listenPath).toBeNull();
    expect(route.headers).toEqual([
      { name: 'x-a', values: ['1', '2'] },
      { name: 'x-b', values: ['3'] },
    ]);
    expect(compileApi(api()).headers).toEqual([]);
  });

  test('the message of a route without any condition names every one', () => {
    expect(gatehouseErrorOf(() => compileApi(api({ proxy: { listen_path: undefined } }))).message).toBe(
      'proxy.listen_path is required (or at least one of hosts, proxy.methods, proxy.match_headers)',
    );
  });
});

describe('host patterns', () => {
  test.each<[string, string, string | null]>([
    ['exact lower-cased', 'Example.COM', 'example.com'],
    ['port dropped', 'example.com:8080', 'example.com'],
    ['leading wildcard', '*.example.com', '*.example.com'],
    ['trailing wildcard', 'example.*', 'example.*'],
    ['IPv4', '10.0.0.1', '10.0.0.1'],
    ['IPv6', '[::1]', '[::1]'],
    ['bare star', '*', null],
    ['inner star', 'a.*.com', null],
    ['double wildcard', '*.example.*', null],
    ['space', 'a b.com', null],
    ['empty', '', null],
    ['empty label', 'a..com', null],
    ['slash', 'a.com/x', null],
  ])('%s: %s', (_name, pattern, expected) => {
    if (expected === null) {
      expect(gatehouseErrorOf(() => compileHostPattern(pattern, 'hosts[0]'))).toMatchObject({ code: 'VALIDATION_FAILED', field: 'hosts[0]' });
    } else {
      expect(compileHostPattern(pattern, 'hosts[0]')).toBe(expected);
    }
  });
});

describe('compileOAuthServer', () => {
  test('one route per endpoint present, never protected', () => {
    const s = compileOAuthServer(server('auth', { revoke: proxy({ listen_path: '/auth/revoke', methods: ['POST'] }) }));
    expect(s.routes.map((r) => [r.id, r.kind, r.name, r.endpoint, r.oauth2])).toEqual([
      ['oauth:auth:token', 'oauth-endpoint', 'auth', 'token', undefined],
      ['oauth:auth:revoke', 'oauth-endpoint', 'auth', 'revoke', undefined],
    ]);
    expect(s.jwtKeys).toEqual([]);
    expect(s.routes[0].conditionCount).toBe(1);
  });

  test('jwt keys are imported through compileJwtKeys', () => {
    const def: OAuthServerDefinition = { ...server('j'), token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'secret' }], leeway: 0 } };
    const s = compileOAuthServer(def);
    expect(s.jwtKeys).toHaveLength(1);
    expect(s.jwtKeys[0].alg).toBe('HS256');
    expect(s.jwtKeys[0].key.type).toBe('secret');
  });

  test('jwt key errors name token_strategy.settings[i]', () => {
    const def: OAuthServerDefinition = { ...server('j'), token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: '' }], leeway: 0 } };
    expect(gatehouseErrorOf(() => compileOAuthServer(def))).toMatchObject({ code: 'VALIDATION_FAILED', field: 'token_strategy.settings[0].key' });
  });

  test.each<[string, OAuthServerDefinition, string, string]>([
    [
      'token listen_path missing',
      { ...server('s'), oauth_endpoints: { token: proxy() } },
      'oauth_endpoints.token.listen_path',
      'oauth_endpoints.token.listen_path is required',
    ],
    [
      'bad revoke listen_path',
      server('s', { revoke: proxy({ listen_path: '/r/{' }) }),
      'oauth_endpoints.revoke.listen_path',
      'oauth_endpoints.revoke.listen_path has an unclosed {',
    ],
    [
      'bad token target',
      { ...server('s'), oauth_endpoints: { token: proxy({ listen_path: '/t', target: 'http://{x}/token' }) } },
      'oauth_endpoints.token.upstreams.targets[0].target',
      'oauth_endpoints.token.upstreams.targets[0].target uses {x} which is not defined in oauth_endpoints.token.listen_path',
    ],
  ])('error: %s', (_name, def, field, message) => {
    const err = gatehouseErrorOf(() => compileOAuthServer(def));
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', field });
    expect(err.message.startsWith(message)).toBe(true);
  });
});

describe('compileDefinitions', () => {
  test('only active APIs and every OAuth endpoint become routes', () => {
    const config = compileDefinitions({
      apis: [api({ name: 'on' }), api({ name: 'off', active: false, proxy: { listen_path: '/off/*' } })],
      oauthServers: [server('auth')],
    });
    expect(config.routes.map((r) => r.id)).toEqual(['api:on', 'oauth:auth:token']);
    expect([...config.oauthServers.keys()]).toEqual(['auth']);
  });

  test("a cache that keeps no routes (the control plane's) gives the same verdicts and routes, compiling a route again when it is read", () => {
    const defs = {
      apis: [api({ name: 'on' }), api({ name: 'off', active: false, proxy: { listen_path: '/off/*' } }), api({ name: 'dup' })],
      oauthServers: [server('auth')],
    };
    const kept = compileDefinitions(defs, { cache: createCompileCache() });
    const cache = createCompileCache({ keepRoutes: false });
    const routeless = compileDefinitions(defs, { cache });
    expect(routeless.rejected).toEqual(kept.rejected);
    expect(routeless.routes.map(routeConflictKey)).toEqual(kept.routes.map(routeConflictKey));
    expect(routeless.inactiveRoutes.map((r) => r.id)).toEqual(['api:off']);
    const built = compileOne('api', defs.apis[0], cache);
    if (!('built' in built)) throw new Error('not compiled');
    expect(built.built.keys).toEqual([routeConflictKey(compileApi(defs.apis[0]))]);
    // Not held: each read is a new compile.
    expect(built.built.routes[0]).not.toBe(built.built.routes[0]);
    const keeping = createCompileCache();
    const held = compileOne('api', defs.apis[0], keeping);
    if (!('built' in held)) throw new Error('not compiled');
    expect(held.built.routes[0]).toBe(held.built.routes[0]);
  });

  test('inactive APIs are still validated', () => {
    const { rejected } = compileDefinitions({ apis: [api({ active: false, proxy: { listen_path: '/{' } })], oauthServers: [] });
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toMatchObject({ kind: 'api', name: 'a', error: { code: 'VALIDATION_FAILED', field: 'proxy.listen_path' } });
  });

  test('a bad definition is rejected on its own; the others are compiled', () => {
    const config = compileDefinitions({
      apis: [api({ name: 'bad', proxy: { listen_path: '/bad/{' } }), api({ name: 'good', proxy: { listen_path: '/good/*' } })],
      oauthServers: [server('auth')],
    });
    expect(config.routes.map((r) => r.id)).toEqual(['api:good', 'oauth:auth:token']);
    expect(config.rejected.map((r) => [r.kind, r.name, r.error.field])).toEqual([['api', 'bad', 'proxy.listen_path']]);
  });

  test('an API referencing a rejected server is rejected too', () => {
    const bad = server('auth');
    const broken = { ...bad, oauth_endpoints: { token: { ...bad.oauth_endpoints.token, listen_path: '/t/{' } } };
    const def = api({ plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'auth' } }] });
    const { routes, rejected } = compileDefinitions({ apis: [def], oauthServers: [broken] });
    expect(routes).toEqual([]);
    expect(rejected.map((r) => `${r.kind}:${r.name}:${r.error.field}`)).toEqual([
      'oauth-server:auth:oauth_endpoints.token.listen_path',
      'api:a:plugins[0].config.server_name',
    ]);
  });

  test.each<[string, (kind: string, name: string) => number, string]>([
    ['list order without ranks', () => 0, 'second'],
    ['the higher rank loses', (_k, name) => (name === 'first' ? 1 : 0), 'first'],
  ])('route conflict: %s', (_name, rank, loser) => {
    const config = compileDefinitions({ apis: [api({ name: 'first' }), api({ name: 'second', hosts: [] })], oauthServers: [] }, { rank });
    expect(config.rejected).toHaveLength(1);
    expect(config.rejected[0]).toMatchObject({ name: loser, error: { code: 'API_LISTEN_PATH_TAKEN', message: 'api listen path is already registered' } });
    expect(config.routes.map((r) => r.name)).toEqual([loser === 'first' ? 'second' : 'first']);
  });

  test('an inactive API keeps its route key against an active one', () => {
    const config = compileDefinitions({ apis: [api({ name: 'off', active: false }), api({ name: 'on' })], oauthServers: [] });
    expect(config.rejected.map((r) => r.name)).toEqual(['on']);
    expect(config.routes).toEqual([]);
  });

  test('compileAllOrThrow names the rejected definition', () => {
    const err = gatehouseErrorOf(() => compileAllOrThrow({ apis: [api({ name: 'x', proxy: { listen_path: '/{' } })], oauthServers: [] }));
    expect(err).toMatchObject({ code: 'VALIDATION_FAILED', field: 'proxy.listen_path' });
    expect(err.message.startsWith('api "x": proxy.listen_path')).toBe(true);
  });

  test.each<[string, boolean, boolean]>([
    ['enabled plugin on an active API', true, true],
    ['disabled plugin', false, true],
    ['plugin on an inactive API', true, false],
  ])('oauth2 naming a missing server is refused: %s', (_name, enabled, active) => {
    const def = api({ active, plugins: [{ name: 'oauth2', enabled, config: { server_name: 'x' } }] });
    const { rejected } = compileDefinitions({ apis: [def], oauthServers: [server('auth')] });
    expect(rejected).toHaveLength(1);
    expect(rejected[0].error).toMatchObject({
      code: 'VALIDATION_FAILED',
      field: 'plugins[0].config.server_name',
      message: 'plugins[0].config.server_name: oauth server "x" not found',
    });
  });

  test('oauth2 naming an existing server is accepted', () => {
    const def = api({ plugins: [{ name: 'oauth2', enabled: true, config: { server_name: 'auth' } }] });
    const config = compileDefinitions({ apis: [def], oauthServers: [server('auth')] });
    expect(config.routes[0].oauth2).toEqual({ serverName: 'auth' });
  });

  test.each<[string, () => CompiledConfig]>([
    ['duplicate API names', () => compileDefinitions({ apis: [api(), api({ proxy: { listen_path: '/other/*' } })], oauthServers: [] })],
    ['duplicate server names', () => compileDefinitions({ apis: [], oauthServers: [server('s'), server('s')] })],
  ])('%s: the second is refused', (_name, fn) => {
    const { rejected } = fn();
    expect(rejected).toHaveLength(1);
    expect(rejected[0].error).toMatchObject({ code: 'VALIDATION_FAILED', field: 'name' });
  });
});

describe('routeConflictKey', () => {
  const key = (def: ApiDefinition) => routeConflictKey(compileApi(def));
  test.each<[string, ApiDefinition, ApiDefinition, boolean]>([
    ['same listen_path, no hosts/methods', api({ name: 'a' }), api({ name: 'b' }), true],
    ['hosts in another order', api({ hosts: ['a.com', 'b.com'] }), api({ name: 'b', hosts: ['B.com', 'a.com'] }), true],
    ['methods in another order and case', api({ proxy: { methods: ['GET', 'POST'] } }), api({ name: 'b', proxy: { methods: ['post', 'GET'] } }), true],
    ['ALL equals no methods list', api({ proxy: { methods: ['ALL'] } }), api({ name: 'b', proxy: { methods: [] } }), true],
    ['different listen_path', api(), api({ name: 'b', proxy: { listen_path: '/b/*' } }), false],
    ['different hosts', api({ hosts: ['a.com'] }), api({ name: 'b', hosts: ['b.com'] }), false],
    ['different methods', api({ proxy: { methods: ['GET'] } }), api({ name: 'b', proxy: { methods: ['POST'] } }), false],
    ['hosts subset', api({ hosts: ['a.com'] }), api({ name: 'b', hosts: ['a.com', 'b.com'] }), false],
    [
      'a listen_path holding a newline is not read as hosts',
      api({ proxy: { listen_path: '/a\nb.com' } }),
      api({ name: 'b', hosts: ['b.com'], proxy: { listen_path: '/a' } }),
      false,
    ],
    ['a host is not a method', api({ hosts: ['get'] }), api({ name: 'b', proxy: { methods: ['GET'] } }), false],
  ])('%s', (_name, a, b, same) => {
    expect(key(a) === key(b)).toBe(same);
  });
});

describe('header conditions and route conflicts', () => {
  const canary = (name: string, match_headers?: Record<string, string[]>, extra: object = {}) =>
    parseApiDefinition({ name, ...extra, proxy: { listen_path: '/api/*', match_headers, upstreams: { targets: [{ target: 'http://u' }] } } });

  test.each<[string, ApiDefinition, ApiDefinition, boolean]>([
    [
      'the same conditions written in another case and order',
      canary('a', { 'X-A': ['1', '2'], 'X-B': ['3'] }),
      canary('b', { 'x-b': ['3'], 'x-a': ['2', '1', '2'] }),
      true,
    ],
    ['with and without a header', canary('a', { 'X-Canary': ['true'] }), canary('b'), false],
    ['another value', canary('a', { 'X-Canary': ['true'] }), canary('b', { 'X-Canary': ['false'] }), false],
    ['a value more', canary('a', { 'X-Canary': ['true'] }), canary('b', { 'X-Canary': ['true', 'yes'] }), false],
    ['another header', canary('a', { 'X-Canary': ['true'] }), canary('b', { 'X-Beta': ['true'] }), false],
    ['a header more', canary('a', { 'X-A': ['1'] }), canary('b', { 'X-A': ['1'], 'X-B': ['1'] }), false],
    ['values that would read alike if joined', canary('a', { 'X-A': ['1, 2'] }), canary('b', { 'X-A': ['1', '2'] }), false],
    ['a method named like the header line is not it', canary('a', { 'X-A': ['1'] }), canary('b', {}, { hosts: ['x.com'] }), false],
  ])('key: %s', (_name, a, b, same) => {
    expect(routeConflictKey(compileApi(a)) === routeConflictKey(compileApi(b))).toBe(same);
  });

  test('a route without header conditions keeps the key it had before them', () => {
    expect(routeConflictKey(compileApi(canary('a', undefined, { hosts: ['b.com', 'a.com'] })))).toBe('/api/*\na.com b.com\nALL');
  });

  test('two APIs on one listen_path with different header conditions are both accepted; equal ones are a 409', () => {
    const both = compileDefinitions({
      apis: [canary('stable'), canary('canary', { 'X-Canary': ['true'] }), canary('beta', { 'X-Beta': ['1'] })],
      oauthServers: [],
    });
    expect(both.rejected).toEqual([]);
    expect(both.routes.map((r) => r.name)).toEqual(['stable', 'canary', 'beta']);
    const twice = compileDefinitions({
      apis: [canary('canary', { 'X-Canary': ['true'] }), canary('again', { 'x-canary': ['true', 'true'] })],
      oauthServers: [],
    });
    expect(twice.rejected).toHaveLength(1);
    expect(twice.rejected[0]).toMatchObject({ name: 'again', error: { code: 'API_LISTEN_PATH_TAKEN', message: 'api listen path is already registered' } });
  });

  test('an OAuth endpoint carries its header conditions as an API does', () => {
    const s = parseOAuthServer({
      name: 'auth',
      oauth_endpoints: { token: { listen_path: '/auth/token', match_headers: { 'X-Tenant': ['a'] }, upstreams: { targets: [{ target: 'http://auth' }] } } },
      token_strategy: { name: 'storage', settings: {} },
    });
    expect(compileOAuthServer(s).routes[0]).toMatchObject({ headers: [{ name: 'x-tenant', values: ['a'] }], conditionCount: 1 });
  });
});

describe('proxy.upstreams.health_check', () => {
  const CHECK = { active: { path: '/healthz', interval: '10s', timeout: '2s', healthy_threshold: 2, unhealthy_threshold: 3 } };
  const checked = (listen_path: string, targets: string[], health_check: ProxyDefinition['upstreams']['health_check'] | null = CHECK) =>
    api({
      proxy: {
        listen_path,
        upstreams: { balancing: 'roundrobin', targets: targets.map((target) => ({ target, weight: 1 })), ...(health_check && { health_check }) },
      },
    });

  test.each<[string, string, string[], string]>([
    ['a placeholder host', '/a/{svc}/*', ['http://{svc}.internal:9000'], 'http://{svc}.internal:9000'],
    ['a placeholder port', '/a/{port}/*', ['http://u:{port}'], 'http://u:{port}'],
    ['a placeholder host in a later target', '/a/{svc}/*', ['http://fixed:1', 'https://{svc}/x'], 'https://{svc}/x'],
  ])('is refused for a target whose authority comes from the request: %s', (_name, listenPath, targets, named) => {
    const err = gatehouseErrorOf(() => compileApi(checked(listenPath, targets)));
    expect(err).toMatchObject({
      code: 'VALIDATION_FAILED',
      field: 'proxy.upstreams.health_check',
      message: `proxy.upstreams.health_check cannot check ${named}: its host comes from the request`,
    });
  });

  test('the same targets without a health check are accepted', () => {
    const def = checked('/a/{svc}/*', ['http://{svc}.internal:9000'], null);
    expect(compileApi(def).targets.map((t) => t.template)).toEqual(['http://{svc}.internal:9000']);
  });

  test.each<[string, string, string[]]>([
    ['a fixed target', '/a/*', ['http://u:9000']],
    ['a placeholder only in the path', '/a/{id}', ['http://u:9000/items/{id}']],
    ['a placeholder only in the query', '/a/{id}', ['https://u/items?id={id}']],
    ['several fixed targets', '/a/*', ['http://u1:9000', 'http://u2:9000/base']],
  ])('is accepted for %s', (_name, listenPath, targets) => {
    const route = compileApi(checked(listenPath, targets, { passive: { unhealthy_threshold: 5, ejection: '30s' } }));
    expect(route.proxy.upstreams.health_check).toEqual({ passive: { unhealthy_threshold: 5, ejection: '30s' } });
    expect(route.targets.map((t) => t.template)).toEqual(targets);
  });

  test('an OAuth endpoint is refused the same way, named under that endpoint', () => {
    const def = server('s', {
      revoke: proxy({
        listen_path: '/s/{svc}/revoke',
        upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://{svc}/revoke', weight: 1 }], health_check: CHECK },
      }),
    });
    const err = gatehouseErrorOf(() => compileOAuthServer(def));
    expect(err).toMatchObject({
      field: 'oauth_endpoints.revoke.upstreams.health_check',
      message: 'oauth_endpoints.revoke.upstreams.health_check cannot check http://{svc}/revoke: its host comes from the request',
    });
  });
});
