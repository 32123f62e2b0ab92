import { parseApiDefinition } from '#proto/definition/index';
import { joinPaths, stripMatched } from '#proto/routing/rewrite';
import {
  allows,
  definitionName,
  hostsOf,
  listenerKinds,
  referenceGranted,
  translateRoute,
  type GRPCRouteObject,
  type HTTPRouteObject,
  type Listener,
  type ReferenceGrantObject,
} from './translate.js';

const route = (spec: HTTPRouteObject['spec']): HTTPRouteObject => ({
  metadata: { name: 'r', namespace: 'ns' },
  spec: { parentRefs: [{ name: 'gw' }], ...spec },
});
const exists = () => true;
const backend = { name: 'svc', port: 8080 };

describe('translateRoute', () => {
  test('matches: PathPrefix (trailing slash or not), Exact, method, Exact headers; weights, weight 0 left out', () => {
    const t = translateRoute(
      route({
        hostnames: ['shop.example.com'],
        rules: [
          {
            matches: [
              { path: { type: 'PathPrefix', value: '/api/' }, method: 'POST', headers: [{ name: 'X-Canary', value: 'true' }] },
              { path: { type: 'Exact', value: '/health' } },
            ],
            backendRefs: [
              { ...backend, weight: 3 },
              { name: 'b', port: 80, weight: 0 },
              { name: 'c', port: 81 },
            ],
          },
        ],
      }),
      [undefined],
      exists,
    );
    expect(t.accepted.status).toBe('True');
    expect(t.apis).toEqual([
      {
        name: 'httproute.ns.r.0.0',
        hosts: ['shop.example.com'],
        proxy: {
          listen_path: '/api/*',
          methods: ['POST'],
          match_headers: { 'X-Canary': ['true'] },
          preserve_host: true,
          upstreams: {
            balancing: 'weight',
            targets: [
              { target: 'k8s://svc.ns:8080', weight: 3 },
              { target: 'k8s://c.ns:81', weight: 1 },
            ],
          },
        },
      },
      expect.objectContaining({ name: 'httproute.ns.r.0.1', proxy: expect.objectContaining({ listen_path: '/health' }) }),
    ]);
    for (const api of t.apis) expect(() => parseApiDefinition(api)).not.toThrow();
  });

  test('no match is PathPrefix /; a rule without a backend (and no redirect) answers 500', () => {
    const t = translateRoute(route({ rules: [{ backendRefs: [backend] }, { matches: [{ path: { type: 'Exact', value: '/x' } }] }] }), [undefined], exists);
    expect(t.apis.map((a) => (a.proxy as { listen_path: string }).listen_path)).toEqual(['/*', '/x']);
    expect(t.apis[0].plugins).toBeUndefined();
    expect(t.apis[1].plugins).toEqual([
      { name: 'request_termination', config: { status_code: 500, body: 'no valid backend for this route rule', content_type: 'text/plain; charset=utf-8' } },
    ]);
    for (const api of t.apis) expect(() => parseApiDefinition(api)).not.toThrow();
  });

  test.each([
    ['RegularExpression path', { matches: [{ path: { type: 'RegularExpression', value: '/a.*' } }] }, 'path match type RegularExpression is not supported'],
    [
      'RegularExpression header',
      { matches: [{ headers: [{ type: 'RegularExpression', name: 'a', value: '.*' }] }] },
      'header match type RegularExpression is not supported',
    ],
    ['queryParams', { matches: [{ queryParams: [{ name: 'a', value: 'b' }] }] }, 'queryParams is not supported'],
    ['RequestMirror', { filters: [{ type: 'RequestMirror' }] }, 'filter RequestMirror is not supported'],
    ['URLRewrite hostname', { filters: [{ type: 'URLRewrite', urlRewrite: { hostname: 'x' } }] }, 'filter URLRewrite with hostname is not supported'],
  ])('%s: Accepted False UnsupportedValue, nothing served', (_name, rule, message) => {
    const t = translateRoute(route({ rules: [{ backendRefs: [backend], ...rule } as never] }), [undefined], exists);
    expect(t.accepted).toMatchObject({ status: 'False', reason: 'UnsupportedValue' });
    expect(t.accepted.message).toContain(message);
    expect(t.apis).toEqual([]);
  });

  test.each([
    ['another namespace without a ReferenceGrant', { name: 'x', namespace: 'other', port: 80 }, 'RefNotPermitted'],
    ['another kind', { group: 'example.com', kind: 'Bucket', name: 'x', port: 80 }, 'InvalidKind'],
    ['a missing Service', { name: 'missing', port: 80 }, 'BackendNotFound'],
  ])('a backendRef to %s: ResolvedRefs False, left out; alone in its rule, the rule answers 500', (_name, ref, reason) => {
    const t = translateRoute(
      route({ rules: [{ backendRefs: [backend, ref] }, { matches: [{ path: { value: '/only' } }], backendRefs: [ref] }] }),
      [undefined],
      (_ns, name) => name !== 'missing',
    );
    expect(t.resolvedRefs).toMatchObject({ status: 'False', reason });
    expect((t.apis[0].proxy as { upstreams: { targets: unknown[] } }).upstreams.targets).toEqual([{ target: 'k8s://svc.ns:8080', weight: 1 }]);
    expect(t.apis[1].plugins).toEqual([expect.objectContaining({ name: 'request_termination', config: expect.objectContaining({ status_code: 500 }) })]);
  });

  test('a backendRef to another namespace that a grant allows is a target in that namespace', () => {
    const ref = { name: 'x', namespace: 'other', port: 80 };
    const t = translateRoute(route({ rules: [{ backendRefs: [ref] }] }), [undefined], exists, 'HTTPRoute', (to, name) => to === 'other' && name === 'x');
    expect(t.resolvedRefs.status).toBe('True');
    expect((t.apis[0].proxy as { upstreams: { targets: unknown[] } }).upstreams.targets).toEqual([{ target: 'k8s://x.other:80', weight: 1 }]);
  });

  test('header modifiers: set = replace + add, add = append, remove; RequestRedirect; URLRewrite as strip_path + target path', () => {
    const t = translateRoute(
      route({
        rules: [
          {
            matches: [{ path: { type: 'PathPrefix', value: '/foo' } }],
            backendRefs: [backend],
            filters: [
              { type: 'RequestHeaderModifier', requestHeaderModifier: { set: [{ name: 'A', value: '1' }], add: [{ name: 'B', value: '2' }], remove: ['C'] } },
              { type: 'URLRewrite', urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/bar' } } },
            ],
          },
          {
            matches: [{ path: { type: 'PathPrefix', value: '/old' } }],
            filters: [{ type: 'RequestRedirect', requestRedirect: { scheme: 'https', path: { type: 'ReplacePrefixMatch', replacePrefixMatch: '/new' } } }],
          },
          {
            matches: [{ path: { type: 'PathPrefix', value: '/full' } }],
            backendRefs: [backend],
            filters: [{ type: 'URLRewrite', urlRewrite: { path: { type: 'ReplaceFullPath', replaceFullPath: '/one' } } }],
          },
        ],
      }),
      [undefined],
      exists,
    );
    expect(t.apis[0]).toMatchObject({
      proxy: { listen_path: '/foo/*', strip_path: true, upstreams: { targets: [{ target: 'k8s://svc.ns:8080/bar' }] } },
      plugins: [
        {
          name: 'request_transformer',
          config: { replace: { headers: { A: '1' } }, add: { headers: { A: '1' } }, append: { headers: { B: '2' } }, remove: { headers: ['C'] } },
        },
      ],
    });
    expect(t.apis[1].plugins).toEqual([{ name: 'redirect', config: { status_code: 302, scheme: 'https', path: '/new', strip_path: true } }]);
    expect(t.apis[2]).toMatchObject({ proxy: { listen_path: '/full/*', upstreams: { targets: [{ target: 'k8s://svc.ns:8080/one' }] } } });
    expect(t.apis[2].proxy).not.toHaveProperty('strip_path');
    for (const api of t.apis) expect(() => parseApiDefinition(api)).not.toThrow();
  });
});

describe('hostsOf', () => {
  test.each<[string[], Array<string | undefined>, string[] | null]>([
    [[], [undefined], []],
    [['a.example.com'], [undefined], ['a.example.com']],
    [[], ['*.example.com'], ['*.example.com']],
    [['a.example.com', 'other.test'], ['*.example.com'], ['a.example.com']],
    [['*.example.com'], ['a.example.com'], ['a.example.com']],
    [['other.test'], ['a.example.com'], null],
  ])('route %j on listeners %j → %j', (route, listeners, expected) => {
    expect(hostsOf(route, listeners)).toEqual(expected);
  });
});

test('definition names are deterministic and within the name rules, a long one shortened with a hash', () => {
  expect(definitionName('ns', 'r', 2, 1)).toBe('httproute.ns.r.2.1');
  const long = definitionName('ns', 'r'.repeat(200), 0, 0);
  expect(long).toHaveLength(128);
  expect(long).toMatch(/^[A-Za-z0-9._-]+$/);
  expect(definitionName('ns', 'r'.repeat(200), 0, 0)).toBe(long);
  expect(definitionName('ns', 'r'.repeat(201), 0, 0)).not.toBe(long);
});

/**
 * ReplacePrefixMatch against the Gateway API's own examples (HTTPPathModifier): the translated target path and
 * strip_path, forwarded by the data plane's rule "T joined with R minus L" (rewrite.ts), L the matched prefix.
 */
test.each([
  ['/foo', '/xyz', '/foo/bar', '/xyz/bar'],
  ['/foo', '/xyz', '/foo', '/xyz'],
  ['/foo', '/xyz', '/foo/', '/xyz/'],
  ['/foo/', '/xyz', '/foo/bar', '/xyz/bar'],
  ['/foo', '/xyz/', '/foo/bar', '/xyz/bar'],
  ['/foo', '/', '/foo', '/'],
  ['/foo', '/', '/foo/bar', '/bar'],
  ['/foo/', '/', '/foo/bar', '/bar'],
  ['/', '/xyz', '/bar', '/xyz/bar'],
])('PathPrefix %s, ReplacePrefixMatch %s: %s → %s', (prefix, replace, request, upstream) => {
  const t = translateRoute(
    route({
      rules: [
        {
          matches: [{ path: { type: 'PathPrefix', value: prefix } }],
          backendRefs: [backend],
          filters: [{ type: 'URLRewrite', urlRewrite: { path: { type: 'ReplacePrefixMatch', replacePrefixMatch: replace } } }],
        },
      ],
    }),
    [undefined],
    exists,
  );
  const proxy = t.apis[0].proxy as { listen_path: string; strip_path?: boolean; upstreams: { targets: Array<{ target: string }> } };
  // What Service discovery makes of the target: an endpoint URL with the same path ('' → '/').
  const targetPath = new URL(proxy.upstreams.targets[0].target.replace(/^k8s:\/\/[^/]+/, 'http://10.0.0.1:8080')).pathname;
  const matched = proxy.listen_path.slice(0, -2); // before `/*`
  const forwarded = proxy.strip_path ? joinPaths(targetPath, stripMatched(request, matched)) : targetPath === '/' ? request : targetPath;
  expect(forwarded).toBe(upstream);
});

describe('translateRoute of a GRPCRoute', () => {
  const grpcRoute = (rules: NonNullable<GRPCRouteObject['spec']['rules']>): GRPCRouteObject => ({
    metadata: { name: 'g', namespace: 'ns' },
    spec: { parentRefs: [{ name: 'gw' }], hostnames: ['grpc.test'], rules },
  });

  test('service + method → Exact /service/method, service only → /service/*, no match → /*; POST over http2; headers, header modifiers', () => {
    const t = translateRoute(
      grpcRoute([
        {
          matches: [
            { method: { service: 'shop.v1.Cart', method: 'Add' }, headers: [{ name: 'x-tenant', value: 'acme' }] },
            { method: { type: 'Exact', service: 'shop.v1.Stock' } },
          ],
          backendRefs: [backend],
          filters: [{ type: 'ResponseHeaderModifier', responseHeaderModifier: { set: [{ name: 'X-Via', value: 'gw' }] } }],
        },
        { backendRefs: [backend] },
      ]),
      [undefined],
      exists,
      'GRPCRoute',
    );
    expect(t.accepted.status).toBe('True');
    expect(t.apis).toEqual([
      {
        name: 'grpcroute.ns.g.0.0',
        hosts: ['grpc.test'],
        proxy: {
          listen_path: '/shop.v1.Cart/Add',
          methods: ['POST'],
          match_headers: { 'x-tenant': ['acme'] },
          preserve_host: true,
          upstreams: { balancing: 'weight', protocol: 'http2', targets: [{ target: 'k8s://svc.ns:8080', weight: 1 }] },
        },
        plugins: [{ name: 'response_transformer', config: { replace: { headers: { 'X-Via': 'gw' } }, add: { headers: { 'X-Via': 'gw' } } } }],
      },
      expect.objectContaining({ name: 'grpcroute.ns.g.0.1', proxy: expect.objectContaining({ listen_path: '/shop.v1.Stock/*', methods: ['POST'] }) }),
      expect.objectContaining({ name: 'grpcroute.ns.g.1.0', proxy: expect.objectContaining({ listen_path: '/*', methods: ['POST'] }) }),
    ]);
    for (const api of t.apis) expect(() => parseApiDefinition(api)).not.toThrow();
  });

  test.each([
    ['a method without service', { matches: [{ method: { method: 'Add' } }] }, 'a method match without service is not supported'],
    [
      'a RegularExpression method',
      { matches: [{ method: { type: 'RegularExpression', service: 'shop\\..*' } }] },
      'method match type RegularExpression is not supported',
    ],
    ['RequestMirror', { filters: [{ type: 'RequestMirror' }] }, 'filter RequestMirror is not supported'],
    ['ExtensionRef', { filters: [{ type: 'ExtensionRef' }] }, 'filter ExtensionRef is not supported'],
  ])('%s: Accepted False UnsupportedValue, nothing served', (_name, rule, message) => {
    const t = translateRoute(grpcRoute([{ backendRefs: [backend], ...rule } as never]), [undefined], exists, 'GRPCRoute');
    expect(t.accepted).toMatchObject({ status: 'False', reason: 'UnsupportedValue', message: expect.stringContaining(message) });
    expect(t.apis).toEqual([]);
  });
});

describe('listener allowedRoutes', () => {
  const listener = (allowedRoutes?: Listener['allowedRoutes'], protocol = 'HTTP'): Listener => ({
    name: 'l',
    protocol,
    port: 80,
    ...(allowedRoutes && { allowedRoutes }),
  });

  test.each<[string, Listener, string[], string[]]>([
    ['HTTP without kinds: both', listener(), ['HTTPRoute', 'GRPCRoute'], []],
    ['HTTPS without kinds: both', listener(undefined, 'HTTPS'), ['HTTPRoute', 'GRPCRoute'], []],
    ['TCP: none', listener(undefined, 'TCP'), [], []],
    ['kinds GRPCRoute', listener({ kinds: [{ kind: 'GRPCRoute' }] }), ['GRPCRoute'], []],
    [
      'kinds HTTPRoute of the group, and a TCPRoute',
      listener({ kinds: [{ group: 'gateway.networking.k8s.io', kind: 'HTTPRoute' }, { kind: 'TCPRoute' }] }),
      ['HTTPRoute'],
      ['gateway.networking.k8s.io/TCPRoute'],
    ],
    ['a kind of another group', listener({ kinds: [{ group: 'example.com', kind: 'HTTPRoute' }] }), [], ['example.com/HTTPRoute']],
  ])('%s', (_name, l, kinds, invalid) => {
    expect(listenerKinds(l)).toEqual({ kinds, invalid });
    for (const kind of ['HTTPRoute', 'GRPCRoute'] as const) expect(allows(l, kind, 'ns', 'ns', () => ({}))).toBe(kinds.includes(kind));
  });

  test("namespaces.from: Same (the default) admits the Gateway's namespace only, All any, Selector those whose labels it selects", () => {
    const labels = (ns: string) => (({ a: { team: 'red', tier: 'web' }, b: { team: 'blue' } }) as Record<string, Record<string, string>>)[ns];
    const admits = (namespaces: NonNullable<Listener['allowedRoutes']>['namespaces'], ns: string) =>
      allows(listener(namespaces && { namespaces }), 'HTTPRoute', ns, 'gw', labels);
    expect([admits(undefined, 'gw'), admits(undefined, 'a'), admits({ from: 'Same' }, 'a')]).toEqual([true, false, false]);
    expect([admits({ from: 'All' }, 'a'), admits({ from: 'All' }, 'gw')]).toEqual([true, true]);
    expect([
      admits({ from: 'Selector', selector: { matchLabels: { team: 'red' } } }, 'a'),
      admits({ from: 'Selector', selector: { matchLabels: { team: 'red' } } }, 'b'),
    ]).toEqual([true, false]);
    const expr = (operator: string, values?: string[]) => ({
      from: 'Selector',
      selector: { matchExpressions: [{ key: 'tier', operator, ...(values && { values }) }] },
    });
    expect(['a', 'b'].map((ns) => admits(expr('In', ['web']), ns))).toEqual([true, false]);
    expect(['a', 'b'].map((ns) => admits(expr('NotIn', ['web']), ns))).toEqual([false, true]);
    expect(['a', 'b'].map((ns) => admits(expr('Exists'), ns))).toEqual([true, false]);
    expect(['a', 'b'].map((ns) => admits(expr('DoesNotExist'), ns))).toEqual([false, true]);
    // A namespace not (yet) known, or a Selector without selector, admits nothing.
    expect([admits({ from: 'Selector', selector: {} }, 'unknown'), admits({ from: 'Selector' }, 'a')]).toEqual([false, false]);
  });

  test('referenceGranted: the same namespace always; another only by a grant there from this kind and namespace to Services (all, or this name)', () => {
    const grant = (namespace: string, from: { kind: string; namespace: string }, name?: string): ReferenceGrantObject => ({
      metadata: { name: 'g', namespace },
      spec: { from: [{ group: 'gateway.networking.k8s.io', ...from }], to: [{ group: '', kind: 'Service', ...(name && { name }) }] },
    });
    expect(referenceGranted([], 'HTTPRoute', 'a', 'a', 'svc')).toBe(true);
    expect(referenceGranted([], 'HTTPRoute', 'a', 'b', 'svc')).toBe(false);
    expect(referenceGranted([grant('b', { kind: 'HTTPRoute', namespace: 'a' })], 'HTTPRoute', 'a', 'b', 'svc')).toBe(true);
    expect(referenceGranted([grant('b', { kind: 'HTTPRoute', namespace: 'a' }, 'svc')], 'HTTPRoute', 'a', 'b', 'svc')).toBe(true);
    expect(referenceGranted([grant('b', { kind: 'HTTPRoute', namespace: 'a' }, 'other')], 'HTTPRoute', 'a', 'b', 'svc')).toBe(false);
    expect(referenceGranted([grant('b', { kind: 'GRPCRoute', namespace: 'a' })], 'HTTPRoute', 'a', 'b', 'svc')).toBe(false);
    expect(referenceGranted([grant('b', { kind: 'HTTPRoute', namespace: 'c' })], 'HTTPRoute', 'a', 'b', 'svc')).toBe(false);
    expect(referenceGranted([grant('c', { kind: 'HTTPRoute', namespace: 'a' })], 'HTTPRoute', 'a', 'b', 'svc')).toBe(false);
  });
});
