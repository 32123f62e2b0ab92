import { compileApi, compileDefinitions } from '../compile/index.js';
import { parseApiDefinition, type ApiDefinition } from '../definition/index.js';
import { buildRoutingTable, normalizePath } from './index.js';
import type { RequestHeaders, RoutingTable } from './index.js';

interface ApiOpts {
  name?: string;
  active?: boolean;
  hosts?: string[];
  listen_path?: string;
  methods?: string[];
  match_headers?: Record<string, string[]>;
  target?: string;
}

/** A definition as the admin API stores it: raw input through the real normaliser. */
function api(o: ApiOpts): ApiDefinition {
  return parseApiDefinition({
    name: o.name ?? 'a',
    active: o.active,
    hosts: o.hosts,
    proxy: { listen_path: o.listen_path, methods: o.methods, match_headers: o.match_headers, upstreams: { targets: [{ target: o.target ?? 'http://u' }] } },
  });
}

function table(apis: ApiOpts[]): RoutingTable {
  return buildRoutingTable(apis.map((o) => compileApi(api(o))));
}

interface Req {
  path: string;
  method?: string;
  host?: string;
  /** As node gives them: lower-case names, a repeated header joined with ", ". */
  headers?: RequestHeaders;
}

/** Name of the matched API, or null. */
function winner(t: RoutingTable, r: Req): string | null {
  return t.match({ method: r.method ?? 'GET', host: r.host, path: normalizePath(r.path), headers: r.headers })?.route.name ?? null;
}

type Row = [name: string, apis: ApiOpts[], req: Req, expected: string | null];

describe('seed routing rules 1–8', () => {
  test.each<Row>([
    ['seed rule 1: hosts-only condition routes every path', [{ name: 'h', hosts: ['a.com'] }], { path: '/any/thing', host: 'a.com' }, 'h'],
    ['seed rule 1: methods-only condition routes every path', [{ name: 'm', methods: ['POST'] }], { path: '/x', method: 'POST' }, 'm'],
    [
      'seed rule 2: every condition must hold (host fails)',
      [{ name: 'a', hosts: ['a.com'], listen_path: '/foo/*', methods: ['GET'] }],
      { path: '/foo/x', host: 'b.com' },
      null,
    ],
    [
      'seed rule 2: every condition must hold (method fails)',
      [{ name: 'a', hosts: ['a.com'], listen_path: '/foo/*', methods: ['GET'] }],
      { path: '/foo/x', host: 'a.com', method: 'POST' },
      null,
    ],
    [
      'seed rule 2: every condition must hold (path fails)',
      [{ name: 'a', hosts: ['a.com'], listen_path: '/foo/*', methods: ['GET'] }],
      { path: '/bar', host: 'a.com' },
      null,
    ],
    ['seed rule 2: every condition holds', [{ name: 'a', hosts: ['a.com'], listen_path: '/foo/*', methods: ['GET'] }], { path: '/foo/x', host: 'a.com' }, 'a'],
    ['seed rule 3: any one host is enough', [{ name: 'a', hosts: ['a.com', 'b.com'] }], { path: '/', host: 'b.com' }, 'a'],
    ['seed rule 3: any one method is enough', [{ name: 'a', methods: ['GET', 'PUT'] }], { path: '/', method: 'PUT' }, 'a'],
    ['seed rule 4: /foo/* matches /foo', [{ name: 'a', listen_path: '/foo/*' }], { path: '/foo' }, 'a'],
    ['seed rule 4: /foo/* matches /foo/', [{ name: 'a', listen_path: '/foo/*' }], { path: '/foo/' }, 'a'],
    ['seed rule 4: /foo/* matches /foo/<path>', [{ name: 'a', listen_path: '/foo/*' }], { path: '/foo/bar/baz' }, 'a'],
    ['seed rule 4: /foo/* does not match /', [{ name: 'a', listen_path: '/foo/*' }], { path: '/' }, null],
    ['seed rule 4: /foo/* does not match /foobar', [{ name: 'a', listen_path: '/foo/*' }], { path: '/foobar' }, null],
    ['seed rule 4: /foo/* does not match /fo', [{ name: 'a', listen_path: '/foo/*' }], { path: '/fo' }, null],
    ['seed rule 4: exact listen_path matches only itself', [{ name: 'a', listen_path: '/auth/token' }], { path: '/auth/token/x' }, null],
    ['seed rule 4: exact listen_path matches itself', [{ name: 'a', listen_path: '/auth/token' }], { path: '/auth/token' }, 'a'],
    ['seed rule 5: host not configured', [{ name: 'a', hosts: ['a.com'] }], { path: '/', host: 'c.com' }, null],
    ['seed rule 5: no Host header against a hosts condition', [{ name: 'a', hosts: ['a.com'] }], { path: '/' }, null],
    ['seed rule 5: method not configured', [{ name: 'a', methods: ['GET'] }], { path: '/', method: 'DELETE' }, null],
    [
      'seed rule 6: longest prefix first',
      [
        { name: 'short', listen_path: '/a/*' },
        { name: 'long', listen_path: '/a/b/*' },
      ],
      { path: '/a/b/c' },
      'long',
    ],
    [
      'seed rule 6: short prefix still serves the rest',
      [
        { name: 'short', listen_path: '/a/*' },
        { name: 'long', listen_path: '/a/b/*' },
      ],
      { path: '/a/c' },
      'short',
    ],
    [
      'seed rule 8: regex parameter matches',
      [{ name: 'r', listen_path: '/api/recipes/{id:[\\da-f]{24}}' }],
      { path: '/api/recipes/5252b1b5301bbf46038b473f' },
      'r',
    ],
    ['seed rule 8: regex parameter rejects', [{ name: 'r', listen_path: '/api/recipes/{id:[\\da-f]{24}}' }], { path: '/api/recipes/nothex' }, null],
    ['seed rule 8: plain parameter is one segment', [{ name: 'p', listen_path: '/users/{id}' }], { path: '/users/1/x' }, null],
  ])('%s', (_name, apis, req, expected) => {
    expect(winner(table(apis), req)).toBe(expected);
  });
});

describe('priority', () => {
  test.each<Row>([
    [
      'long prefix wins, long inserted first',
      [
        { name: 'long', listen_path: '/a/b/*' },
        { name: 'short', listen_path: '/a/*' },
      ],
      { path: '/a/b/x' },
      'long',
    ],
    [
      'long prefix wins, short inserted first',
      [
        { name: 'short', listen_path: '/a/*' },
        { name: 'long', listen_path: '/a/b/*' },
      ],
      { path: '/a/b/x' },
      'long',
    ],
    [
      'long prefix wins even against a name that sorts first',
      [
        { name: 'aaa', listen_path: '/a/*' },
        { name: 'zzz', listen_path: '/a/b/*' },
      ],
      { path: '/a/b' },
      'zzz',
    ],
    [
      'long prefix wins even against more conditions',
      [
        { name: 'cond', listen_path: '/a/*', hosts: ['h.com'], methods: ['GET'] },
        { name: 'long', listen_path: '/a/b/*' },
      ],
      { path: '/a/b', host: 'h.com' },
      'long',
    ],
    [
      'catch-all /* never shadows a longer prefix',
      [
        { name: 'all', listen_path: '/*' },
        { name: 'foo', listen_path: '/foo/*' },
      ],
      { path: '/foo/x' },
      'foo',
    ],
    [
      'catch-all /* takes the rest',
      [
        { name: 'all', listen_path: '/*' },
        { name: 'foo', listen_path: '/foo/*' },
      ],
      { path: '/bar' },
      'all',
    ],
    [
      'route without listen_path never shadows a listen_path',
      [
        { name: 'h', hosts: ['a.com'] },
        { name: 'foo', listen_path: '/foo/*' },
      ],
      { path: '/foo', host: 'a.com' },
      'foo',
    ],
    [
      'equal prefix: more conditions first (hosts)',
      [
        { name: 'a', listen_path: '/x/*' },
        { name: 'b', listen_path: '/x/*', hosts: ['h.com'] },
      ],
      { path: '/x', host: 'h.com' },
      'b',
    ],
    [
      'equal prefix: more conditions first (hosts + methods)',
      [
        { name: 'a', listen_path: '/x/*', hosts: ['h.com'] },
        { name: 'b', listen_path: '/x/*', hosts: ['h.com'], methods: ['GET'] },
      ],
      { path: '/x', host: 'h.com' },
      'b',
    ],
    [
      'equal prefix: fewer conditions when the specific one fails',
      [
        { name: 'a', listen_path: '/x/*' },
        { name: 'b', listen_path: '/x/*', methods: ['POST'] },
      ],
      { path: '/x' },
      'a',
    ],
    [
      'equal prefix and conditions: name ascending (inserted z first)',
      [
        { name: 'z', listen_path: '/x/*' },
        { name: 'm', listen_path: '/x/*' },
      ],
      { path: '/x/1' },
      'm',
    ],
    [
      'equal prefix and conditions: name ascending (inserted m first)',
      [
        { name: 'm', listen_path: '/x/*' },
        { name: 'z', listen_path: '/x/*' },
      ],
      { path: '/x/1' },
      'm',
    ],
    [
      'equal prefix: exact listen_path before /*',
      [
        { name: 'a', listen_path: '/x/*' },
        { name: 'b', listen_path: '/x' },
      ],
      { path: '/x' },
      'b',
    ],
    [
      'literal beats parameter (longer literal prefix)',
      [
        { name: 'param', listen_path: '/users/{id}' },
        { name: 'me', listen_path: '/users/me' },
      ],
      { path: '/users/me' },
      'me',
    ],
    [
      'parameter serves other values',
      [
        { name: 'param', listen_path: '/users/{id}' },
        { name: 'me', listen_path: '/users/me' },
      ],
      { path: '/users/42' },
      'param',
    ],
    [
      'parameter beats shorter wildcard',
      [
        { name: 'wild', listen_path: '/users/*' },
        { name: 'param', listen_path: '/users/{id}' },
      ],
      { path: '/users/42' },
      'param',
    ],
    [
      'failed regex falls back to shorter prefix',
      [
        { name: 'wild', listen_path: '/users/*' },
        { name: 'num', listen_path: '/users/{id:\\d+}' },
      ],
      { path: '/users/abc' },
      'wild',
    ],
    [
      'char-level prefix shared without segment match',
      [
        { name: 'foo', listen_path: '/foo/*' },
        { name: 'foobar', listen_path: '/foobar/*' },
      ],
      { path: '/foobar/x' },
      'foobar',
    ],
    [
      'char-level prefix: /foobaz does not reach /foo/*',
      [
        { name: 'foo', listen_path: '/foo/*' },
        { name: 'foobar', listen_path: '/foobar/*' },
      ],
      { path: '/foobaz' },
      null,
    ],
  ])('%s', (_name, apis, req, expected) => {
    expect(winner(table(apis), req)).toBe(expected);
  });
});

describe('hosts', () => {
  test.each<[string, string[], string | undefined, boolean]>([
    ['exact', ['example.com'], 'example.com', true],
    ['case-insensitive request', ['example.com'], 'EXAMPLE.Com', true],
    ['case-insensitive pattern', ['Example.COM'], 'example.com', true],
    ['port removed', ['example.com'], 'example.com:8080', true],
    ['trailing dot removed', ['example.com'], 'example.com.', true],
    ['other host', ['example.com'], 'example.org', false],
    ['suffix is not enough', ['example.com'], 'a.example.com', false],
    ['*.example.com matches a.example.com', ['*.example.com'], 'a.example.com', true],
    ['*.example.com matches x.y.example.com', ['*.example.com'], 'x.y.example.com:443', true],
    ['*.example.com does not match example.com', ['*.example.com'], 'example.com', false],
    ['*.example.com does not match badexample.com', ['*.example.com'], 'badexample.com', false],
    ['example.* matches example.com', ['example.*'], 'example.com', true],
    ['example.* matches example.co.uk', ['example.*'], 'example.co.uk', true],
    ['example.* does not match example', ['example.*'], 'example', false],
    ['example.* does not match myexample.com', ['example.*'], 'myexample.com', false],
    ['IPv6 literal with port', ['[::1]'], '[::1]:8080', true],
    ['absent Host header', ['example.com'], undefined, false],
  ])('%s', (_name, hosts, host, matches) => {
    const t = table([{ name: 'h', hosts, listen_path: '/*' }]);
    expect(winner(t, { path: '/x', host })).toBe(matches ? 'h' : null);
  });
});

/** `count` APIs, one per tenant host, on one listen_path: one bucket, indexed by host. */
function tenants(count: number, listenPath: string | undefined): ApiOpts[] {
  return Array.from({ length: count }, (_, i) => ({ name: `t${i}`, hosts: [`t${i}.example.com`], listen_path: listenPath }));
}

describe('host index (a bucket of exact-host APIs is not scanned)', () => {
  test.each<Row>([
    ['tenants on one prefix: the request host picks its API', tenants(50, '/api/*'), { path: '/api/x', host: 'T37.example.com:8443' }, 't37'],
    [
      'tenants on one prefix: an unknown host falls to the API without hosts',
      [...tenants(50, '/api/*'), { name: 'default', listen_path: '/api/*' }],
      { path: '/api/x', host: 'nobody.example.com' },
      'default',
    ],
    [
      'tenants on one prefix: no Host header falls to the API without hosts',
      [...tenants(50, '/api/*'), { name: 'default', listen_path: '/api/*' }],
      { path: '/api/x' },
      'default',
    ],
    ['tenants on one prefix: an unknown host matches nothing else', tenants(50, '/api/*'), { path: '/api/x', host: 'nobody.example.com' }, null],
    ['hosts-only APIs at the root: the request host picks its API', tenants(100, undefined), { path: '/any/path', host: 't42.example.com' }, 't42'],
    [
      'hosts-only APIs never shadow a listen_path',
      [...tenants(100, undefined), { name: 'foo', listen_path: '/foo/*' }],
      { path: '/foo', host: 't1.example.com' },
      'foo',
    ],
    [
      'equal conditions: a wildcard host API whose name sorts first wins',
      [
        { name: 'a-wild', hosts: ['*.example.com'], listen_path: '/api/*' },
        { name: 'b-exact', hosts: ['t1.example.com'], listen_path: '/api/*' },
      ],
      { path: '/api', host: 't1.example.com' },
      'a-wild',
    ],
    [
      'equal conditions: an exact host API whose name sorts first wins',
      [
        { name: 'b-wild', hosts: ['*.example.com'], listen_path: '/api/*' },
        { name: 'a-exact', hosts: ['t1.example.com'], listen_path: '/api/*' },
      ],
      { path: '/api', host: 't1.example.com' },
      'a-exact',
    ],
    [
      'more conditions first, across indexed and wildcard APIs',
      [
        { name: 'z-wild', hosts: ['*.example.com'], methods: ['GET'], listen_path: '/api/*' },
        { name: 'a-exact', hosts: ['t1.example.com'], listen_path: '/api/*' },
      ],
      { path: '/api', host: 't1.example.com' },
      'z-wild',
    ],
    [
      'an indexed API whose method fails falls through to the next',
      [
        { name: 'a', hosts: ['t.com'], methods: ['POST'], listen_path: '/api/*' },
        { name: 'z', listen_path: '/api/*' },
      ],
      { path: '/api', host: 't.com' },
      'z',
    ],
    [
      'an indexed API whose exact listen_path fails falls through to the next',
      [
        { name: 'a', hosts: ['t.com'], listen_path: '/api' },
        { name: 'z', hosts: ['t.com'], listen_path: '/api/*' },
      ],
      { path: '/api/x', host: 't.com' },
      'z',
    ],
    [
      'an API with several exact hosts is found under each',
      [...tenants(10, '/api/*'), { name: 'multi', hosts: ['a.com', 'b.com'], listen_path: '/api/*' }],
      { path: '/api', host: 'b.com' },
      'multi',
    ],
    [
      'an API mixing exact and wildcard hosts matches the wildcard',
      [...tenants(10, '/api/*'), { name: 'mixed', hosts: ['m.com', '*.other.com'], listen_path: '/api/*' }],
      { path: '/api', host: 'x.other.com' },
      'mixed',
    ],
    [
      'an API mixing exact and wildcard hosts matches the exact one',
      [...tenants(10, '/api/*'), { name: 'mixed', hosts: ['m.com', '*.other.com'], listen_path: '/api/*' }],
      { path: '/api', host: 'm.com' },
      'mixed',
    ],
    [
      'a longer prefix still wins over an indexed host on a shorter one',
      [...tenants(10, '/api/*'), { name: 'long', listen_path: '/api/v2/*' }],
      { path: '/api/v2/x', host: 't3.example.com' },
      'long',
    ],
    [
      'an indexed host on a longer prefix wins over a shorter one',
      [{ name: 'short', listen_path: '/api/*' }, ...tenants(10, '/api/v2/*')],
      { path: '/api/v2/x', host: 't3.example.com' },
      't3',
    ],
  ])('%s', (_name, apis, req, expected) => {
    expect(winner(table(apis), req)).toBe(expected);
  });
});

/** `count` APIs `<name>N` on `make(N)`: a family sharing one literal prefix, told apart after a parameter. */
function family(count: number, make: (n: number) => string, name = 'f', extra: Partial<ApiOpts> = {}): ApiOpts[] {
  return Array.from({ length: count }, (_, n) => ({ name: `${name}${n}`, listen_path: make(n), ...extra }));
}
const res = (n: number): string => `/api/{id}/res-${n}/*`;

describe('parameter families (a bucket indexed by the literal segment after a parameter)', () => {
  test.each<Row>([
    ['1 sibling: its literal matches', family(1, res), { path: '/api/42/res-0/x' }, 'f0'],
    ['1 sibling: another literal misses', family(1, res), { path: '/api/42/res-1/x' }, null],
    ['1 sibling: the parameter segment is required', family(1, res), { path: '/api/res-0' }, null],
    ['2 siblings: the first', family(2, res), { path: '/api/42/res-0' }, 'f0'],
    ['2 siblings: the second', family(2, res), { path: '/api/42/res-1/' }, 'f1'],
    ['2 siblings: neither', family(2, res), { path: '/api/42/res-2' }, null],
    ['many siblings: picks by literal', family(500, res), { path: '/api/42/res-377/deep/path' }, 'f377'],
    ['many siblings: first member', family(500, res), { path: '/api/7/res-0' }, 'f0'],
    ['many siblings: last member', family(500, res), { path: '/api/7/res-499' }, 'f499'],
    ['many siblings: unknown literal misses', family(500, res), { path: '/api/42/res-500/x' }, null],
    ['many siblings: literal at another position misses', family(500, res), { path: '/api/res-3/42' }, null],
    [
      'many siblings: unknown literal falls to a shorter wildcard',
      [...family(500, res), { name: 'wild', listen_path: '/api/*' }],
      { path: '/api/42/res-500' },
      'wild',
    ],
    ['exact members: the path must end there', family(50, (n) => `/api/{id}/res-${n}`), { path: '/api/42/res-7/x' }, null],
    ['exact members: matches', family(50, (n) => `/api/{id}/res-${n}`), { path: '/api/42/res-7' }, 'f7'],
    [
      '/users/{id} family: the parent',
      [
        { name: 'user', listen_path: '/users/{id}' },
        { name: 'orders', listen_path: '/users/{id}/orders' },
        { name: 'order', listen_path: '/users/{id}/orders/{oid}' },
      ],
      { path: '/users/42' },
      'user',
    ],
    [
      '/users/{id} family: a child list',
      [
        { name: 'user', listen_path: '/users/{id}' },
        { name: 'orders', listen_path: '/users/{id}/orders' },
        { name: 'order', listen_path: '/users/{id}/orders/{oid}' },
      ],
      { path: '/users/42/orders' },
      'orders',
    ],
    [
      '/users/{id} family: a child item',
      [
        { name: 'user', listen_path: '/users/{id}' },
        { name: 'orders', listen_path: '/users/{id}/orders' },
        { name: 'order', listen_path: '/users/{id}/orders/{oid}' },
      ],
      { path: '/users/42/orders/7' },
      'order',
    ],
    [
      '/users/{id} family: an unknown child',
      [
        { name: 'user', listen_path: '/users/{id}' },
        { name: 'orders', listen_path: '/users/{id}/orders' },
        { name: 'order', listen_path: '/users/{id}/orders/{oid}' },
      ],
      { path: '/users/42/profile' },
      null,
    ],
    [
      '/users/{id} family: many children',
      [{ name: 'user', listen_path: '/users/{id}' }, ...family(300, (n) => `/users/{id}/child-${n}/{cid}`, 'c')],
      { path: '/users/42/child-123/9' },
      'c123',
    ],
    ['families at two positions: the first', [...family(100, res), ...family(50, (n) => `/api/{a}/{b}/deep-${n}`, 'd')], { path: '/api/1/res-20' }, 'f20'],
    ['families at two positions: the second', [...family(100, res), ...family(50, (n) => `/api/{a}/{b}/deep-${n}`, 'd')], { path: '/api/1/2/deep-20' }, 'd20'],
    ['percent-encoded literal in a family', family(20, (n) => `/api/{id}/%7Eres-${n}`), { path: '/api/1/%7eres-4' }, 'f4'],
  ])('%s', (_name, apis, req, expected) => {
    expect(winner(table(apis), req)).toBe(expected);
  });
});

describe('parameter families: priority is unchanged', () => {
  test.each<Row>([
    [
      'a literal route beats the family (longer prefix)',
      [...family(100, res), { name: 'zz-me', listen_path: '/api/me/res-1/*' }],
      { path: '/api/me/res-1/x' },
      'zz-me',
    ],
    [
      'the family serves other values of the parameter',
      [...family(100, res), { name: 'zz-me', listen_path: '/api/me/res-1/*' }],
      { path: '/api/you/res-1/x' },
      'f1',
    ],
    ['a member beats a shorter wildcard', [{ name: 'a-wild', listen_path: '/api/*' }, ...family(100, res)], { path: '/api/42/res-5' }, 'f5'],
    [
      'same bucket, unindexed wildcard, name sorts first: it wins',
      [{ name: 'a-any', listen_path: '/api/{x}/*' }, ...family(100, res)],
      { path: '/api/42/res-5/x' },
      'a-any',
    ],
    [
      'same bucket, unindexed wildcard, name sorts last: the member wins',
      [{ name: 'z-any', listen_path: '/api/{x}/*' }, ...family(100, res)],
      { path: '/api/42/res-5/x' },
      'f5',
    ],
    [
      'same bucket: a member with more conditions wins',
      [{ name: 'a-any', listen_path: '/api/{x}/*' }, ...family(100, res), { name: 'z-get', listen_path: '/api/{id}/res-5/*', methods: ['GET'] }],
      { path: '/api/42/res-5' },
      'z-get',
    ],
    [
      'same bucket: an unindexed route with more conditions wins',
      [{ name: 'z-any', listen_path: '/api/{x}/*', methods: ['GET'] }, ...family(100, res)],
      { path: '/api/42/res-5' },
      'z-any',
    ],
    [
      'same bucket: a member whose method fails falls through',
      [{ name: 'z-any', listen_path: '/api/{x}/*' }, ...family(100, res, 'f', { methods: ['POST'] })],
      { path: '/api/42/res-5' },
      'z-any',
    ],
    [
      'same bucket: an exact member before a wildcard one',
      [
        { name: 'a', listen_path: '/api/{id}/res-1/*' },
        { name: 'z', listen_path: '/api/{id}/res-1' },
      ],
      { path: '/api/9/res-1' },
      'z',
    ],
    [
      'same bucket: an exact unindexed route before wildcard members',
      [...family(100, res), { name: 'z-exact', listen_path: '/api/{x}/{y}' }],
      { path: '/api/9/res-1' },
      'z-exact',
    ],
    [
      'across two segment indexes: name decides (later index wins)',
      [...family(100, res, 'z'), { name: 'a-deep', listen_path: '/api/{a}/{b}/deep/*' }, ...family(2, (n) => `/api/{a}/{b}/deep-${n}`, 'd')],
      { path: '/api/1/res-1/deep' },
      'a-deep',
    ],
    [
      'across two segment indexes: name decides (earlier index wins)',
      [...family(100, res, 'a'), { name: 'z-deep', listen_path: '/api/{a}/{b}/deep/*' }, ...family(2, (n) => `/api/{a}/{b}/deep-${n}`, 'd')],
      { path: '/api/1/res-1/deep' },
      'a1',
    ],
    [
      'tenants with families: host and segment together',
      Array.from({ length: 10 }, (_, h) => family(50, res, `t${h}-r`, { hosts: [`t${h}.example.com`] })).flat(),
      { path: '/api/1/res-33', host: 't7.example.com' },
      't7-r33',
    ],
    [
      'tenants with families: unknown host',
      Array.from({ length: 10 }, (_, h) => family(50, res, `t${h}-r`, { hosts: [`t${h}.example.com`] })).flat(),
      { path: '/api/1/res-33', host: 'x.example.com' },
      null,
    ],
    [
      'tenants with families: a wildcard-host member with fewer conditions loses',
      [...family(50, res, 'a', { hosts: ['*.example.com'] }), ...family(50, res, 'z', { hosts: ['t.example.com'], methods: ['GET'] })],
      { path: '/api/1/res-3', host: 't.example.com' },
      'z3',
    ],
  ])('%s', (_name, apis, req, expected) => {
    expect(winner(table(apis), req)).toBe(expected);
  });
});

describe('parameter families with regex parameters', () => {
  test.each<Row>([
    ['regex family: matches', family(200, (n) => `/api/{id:\\d+}/res-${n}`), { path: '/api/42/res-17' }, 'f17'],
    ['regex family: the regex still applies', family(200, (n) => `/api/{id:\\d+}/res-${n}`), { path: '/api/abc/res-17' }, null],
    [
      'regex family: a sibling with another regex on the same literal',
      [...family(200, (n) => `/api/{id:\\d+}/res-${n}`), { name: 'slug', listen_path: '/api/{slug:[a-z]+}/res-17' }],
      { path: '/api/abc/res-17' },
      'slug',
    ],
    [
      'regex family: the first matching sibling by name',
      [...family(200, (n) => `/api/{id:\\d+}/res-${n}`), { name: 'a-any', listen_path: '/api/{any:.+}/res-17' }],
      { path: '/api/42/res-17' },
      'a-any',
    ],
    ['regex in the indexed family and a regex after the literal', family(100, (n) => `/api/{id:\\d+}/res-${n}/{v:v\\d}`), { path: '/api/1/res-9/v2' }, 'f9'],
    ['regex after the literal rejects', family(100, (n) => `/api/{id:\\d+}/res-${n}/{v:v\\d}`), { path: '/api/1/res-9/x2' }, null],
    ['param inside the first segment (prefix /api/v)', family(100, (n) => `/api/v{ver:\\d+}/res-${n}`), { path: '/api/v2/res-55' }, 'f55'],
    ['param inside the first segment, regex fails', family(100, (n) => `/api/v{ver:\\d+}/res-${n}`), { path: '/api/vx/res-55' }, null],
    [
      'failed regex in the family falls to a shorter wildcard',
      [{ name: 'wild', listen_path: '/api/*' }, ...family(100, (n) => `/api/{id:\\d+}/res-${n}`)],
      { path: '/api/abc/res-5' },
      'wild',
    ],
  ])('%s', (_name, apis, req, expected) => {
    expect(winner(table(apis), req)).toBe(expected);
  });
});

test('10,000-route parameter family: lookups return the right route (correctness only)', () => {
  const apis: ApiOpts[] = [
    ...family(10_000, res),
    { name: 'wild', listen_path: '/api/*' },
    { name: 'me', listen_path: '/api/me/res-7/*' },
    { name: 'user', listen_path: '/users/{id}' },
    ...family(100, (n) => `/users/{id}/orders-${n}/{oid:\\d+}`, 'o'),
  ];
  const t = table(apis);
  expect(t.size).toBe(10_103);
  expect(winner(t, { path: '/api/1/res-0' })).toBe('f0');
  expect(winner(t, { path: '/api/1/res-4321/deep' })).toBe('f4321');
  expect(winner(t, { path: '/api/x/res-9999/' })).toBe('f9999');
  expect(winner(t, { path: '/api/me/res-7/x' })).toBe('me');
  expect(winner(t, { path: '/api/you/res-7/x' })).toBe('f7');
  expect(winner(t, { path: '/api/1/res-10000' })).toBe('wild');
  expect(winner(t, { path: '/api/res-5' })).toBe('wild');
  expect(winner(t, { path: '/users/3' })).toBe('user');
  expect(winner(t, { path: '/users/3/orders-42/8' })).toBe('o42');
  expect(winner(t, { path: '/users/3/orders-42/x' })).toBeNull();
  expect(t.match({ method: 'GET', host: undefined, path: '/api/77/res-123/a/b' })).toMatchObject({ params: { id: '77' }, matched: '/api/77/res-123' });
});

describe('methods', () => {
  test.each<[string, string[], string, boolean]>([
    ['ALL matches any method', ['ALL'], 'PATCH', true],
    ['listed method', ['GET', 'POST'], 'POST', true],
    ['request method is upper-cased', ['GET'], 'get', true],
    ['configured method is upper-cased', ['get'], 'GET', true],
    ['unlisted method', ['GET'], 'HEAD', false],
    ['custom token', ['PURGE'], 'PURGE', true],
  ])('%s', (_name, methods, method, matches) => {
    expect(winner(table([{ name: 'm', methods, listen_path: '/x' }]), { path: '/x', method })).toBe(matches ? 'm' : null);
  });
});

describe('path normalisation before matching', () => {
  const apis: ApiOpts[] = [
    { name: 'public', listen_path: '/public/*' },
    { name: 'private', listen_path: '/private/*' },
  ];
  test.each<[string, string, string | null]>([
    ['.. out of a public prefix reaches the private route, not the public one', '/public/../private/x', 'private'],
    ['encoded dots likewise', '/public/%2e%2e/private/x', 'private'],
    ['double slash does not dodge a prefix', '//private//x', 'private'],
    ['encoded unreserved letters do not dodge a prefix', '/%70rivate/x', 'private'],
  ])('%s', (_name, path, expected) => {
    expect(winner(table(apis), { path })).toBe(expected);
  });
});

test('inactive API is not routed, the active one is', () => {
  const { routes } = compileDefinitions({
    apis: [api({ name: 'off', active: false, listen_path: '/x/*' }), api({ name: 'on', listen_path: '/y/*' })],
    oauthServers: [],
  });
  const t = buildRoutingTable(routes);
  expect(t.size).toBe(1);
  expect(winner(t, { path: '/x/1' })).toBeNull();
  expect(winner(t, { path: '/y/1' })).toBe('on');
});

test('match returns params and L', () => {
  const t = table([{ name: 'p', listen_path: '/prepath/{service}/*' }]);
  const m = t.match({ method: 'GET', host: undefined, path: '/prepath/svc/a/b' });
  expect(m).toMatchObject({ params: { service: 'svc' }, matched: '/prepath/svc' });
});

test('empty table matches nothing', () => {
  expect(buildRoutingTable([]).match({ method: 'GET', host: 'x', path: '/' })).toBeNull();
});

test('10,000 routes: lookups return the right route (correctness only)', () => {
  const apis: ApiOpts[] = [];
  for (let i = 0; i < 10_000; i++) apis.push({ name: `api-${i}`, listen_path: `/svc-${i}/v${i % 7}/*` });
  apis.push({ name: 'root', listen_path: '/*' });
  apis.push({ name: 'hosted', hosts: ['*.tenant.io'], listen_path: '/svc-5/v5/*' });
  const t = table(apis);
  expect(t.size).toBe(10_002);
  expect(winner(t, { path: '/svc-0/v0/x' })).toBe('api-0');
  expect(winner(t, { path: '/svc-1234/v2/deep/path' })).toBe('api-1234');
  expect(winner(t, { path: '/svc-9999/v3' })).toBe('api-9999');
  expect(winner(t, { path: '/svc-1/v1' })).toBe('api-1');
  expect(winner(t, { path: '/svc-12/v5/x' })).toBe('api-12');
  expect(winner(t, { path: '/svc-5/v5/x', host: 'a.tenant.io' })).toBe('hosted');
  expect(winner(t, { path: '/svc-5/v5/x' })).toBe('api-5');
  expect(winner(t, { path: '/svc-1234/v3' })).toBe('root');
  expect(winner(t, { path: '/svc-10000/v0' })).toBe('root');
});

describe('header conditions (proxy.match_headers)', () => {
  const canary: ApiOpts[] = [
    { name: 'a-stable', listen_path: '/api/*' },
    { name: 'z-canary', listen_path: '/api/*', match_headers: { 'X-Canary': ['true'] } },
  ];
  const versions: ApiOpts[] = [
    { name: 'v1', listen_path: '/api/*' },
    { name: 'v2', listen_path: '/api/*', match_headers: { 'Accept-Version': ['v2', 'v2.1'] } },
  ];
  const both: ApiOpts[] = [
    { name: 'plain', listen_path: '/api/*' },
    { name: 'one', listen_path: '/api/*', match_headers: { 'x-tenant': ['acme'] } },
    { name: 'two', listen_path: '/api/*', match_headers: { 'x-tenant': ['acme'], 'x-canary': ['true'] } },
  ];
  test.each<Row>([
    [
      'the header with the listed value: the route with the condition, though its name sorts last',
      canary,
      { path: '/api/x', headers: { 'x-canary': 'true' } },
      'z-canary',
    ],
    ['another value: the route without', canary, { path: '/api/x', headers: { 'x-canary': 'false' } }, 'a-stable'],
    ['the header absent: the route without', canary, { path: '/api/x', headers: {} }, 'a-stable'],
    ['no headers given at all: the route without', canary, { path: '/api/x' }, 'a-stable'],
    ['values are case-sensitive', canary, { path: '/api/x', headers: { 'x-canary': 'True' } }, 'a-stable'],
    [
      'names are case-insensitive (the definition wrote X-Canary; node names it x-canary)',
      canary,
      { path: '/api/x', headers: { 'x-canary': 'true' } },
      'z-canary',
    ],
    ['an empty value is no listed value', canary, { path: '/api/x', headers: { 'x-canary': '' } }, 'a-stable'],
    ['a value that only starts with the listed one', canary, { path: '/api/x', headers: { 'x-canary': 'truex' } }, 'a-stable'],
    ['alone, the condition is what routes', [canary[1]], { path: '/api/x', headers: { 'x-canary': 'false' } }, null],
    ['any one of several values: the first', versions, { path: '/api', headers: { 'accept-version': 'v2' } }, 'v2'],
    ['any one of several values: the second', versions, { path: '/api', headers: { 'accept-version': 'v2.1' } }, 'v2'],
    ['none of them', versions, { path: '/api', headers: { 'accept-version': 'v3' } }, 'v1'],
    ['sent twice (node joins them): one of the values listed', versions, { path: '/api', headers: { 'accept-version': 'v1, v2' } }, 'v2'],
    ['sent twice, neither listed', versions, { path: '/api', headers: { 'accept-version': 'v1, v3' } }, 'v1'],
    ['a comma list without spaces', versions, { path: '/api', headers: { 'accept-version': 'v3,v2.1' } }, 'v2'],
    ['elements trimmed of spaces and tabs', versions, { path: '/api', headers: { 'accept-version': 'v3 ,\t v2\t, v4' } }, 'v2'],
    ['empty elements are skipped', versions, { path: '/api', headers: { 'accept-version': ', ,v2' } }, 'v2'],
    ['an element is whole: v2 is not in v2.1x', versions, { path: '/api', headers: { 'accept-version': 'v2.1x, v22' } }, 'v1'],
    ['an array value (Set-Cookie-like): any of its fields', versions, { path: '/api', headers: { 'accept-version': ['v3', 'v4, v2'] } }, 'v2'],
    [
      'a listed value holding a comma matches the whole field',
      [{ name: 'dated', listen_path: '/d', match_headers: { 'x-date': ['Tue, 1 Nov'] } }],
      { path: '/d', headers: { 'x-date': 'Tue, 1 Nov' } },
      'dated',
    ],
    [
      'a listed value holding a comma is not one element of it',
      [{ name: 'dated', listen_path: '/d', match_headers: { 'x-date': ['Tue, 1 Nov'] } }],
      { path: '/d', headers: { 'x-date': 'Tue' } },
      null,
    ],
    ['every header must hold: both', both, { path: '/api', headers: { 'x-tenant': 'acme', 'x-canary': 'true' } }, 'two'],
    ['every header must hold: one of two falls to the route with one', both, { path: '/api', headers: { 'x-tenant': 'acme', 'x-canary': 'no' } }, 'one'],
    ['every header must hold: the other one alone', both, { path: '/api', headers: { 'x-canary': 'true' } }, 'plain'],
    [
      'a longer prefix still wins over a header condition',
      [...canary, { name: 'long', listen_path: '/api/v2/*' }],
      { path: '/api/v2/x', headers: { 'x-canary': 'true' } },
      'long',
    ],
    [
      'a header counts as a condition as hosts do: two headers beat hosts alone',
      [
        { name: 'a-host', listen_path: '/api/*', hosts: ['h.com'] },
        { name: 'z-two', listen_path: '/api/*', match_headers: { 'x-a': ['1'], 'x-b': ['1'] } },
      ],
      { path: '/api', host: 'h.com', headers: { 'x-a': '1', 'x-b': '1' } },
      'z-two',
    ],
    [
      'one header ties with hosts: name order',
      [
        { name: 'a-host', listen_path: '/api/*', hosts: ['h.com'] },
        { name: 'z-one', listen_path: '/api/*', match_headers: { 'x-a': ['1'] } },
      ],
      { path: '/api', host: 'h.com', headers: { 'x-a': '1' } },
      'a-host',
    ],
    [
      'a route with no listen_path: headers alone route every path',
      [{ name: 'tenant', match_headers: { 'x-tenant': ['acme'] } }],
      { path: '/any/thing', headers: { 'x-tenant': 'acme' } },
      'tenant',
    ],
    [
      'a route with no listen_path: other tenants miss',
      [{ name: 'tenant', match_headers: { 'x-tenant': ['acme'] } }],
      { path: '/any/thing', headers: { 'x-tenant': 'other' } },
      null,
    ],
    [
      'a header named like an Object member, absent from the request',
      [{ name: 'odd', listen_path: '/o', match_headers: { constructor: ['x'] } }],
      { path: '/o', headers: {} },
      null,
    ],
    [
      'a header named like an Object member, sent',
      [{ name: 'odd', listen_path: '/o', match_headers: { constructor: ['x'] } }],
      { path: '/o', headers: { constructor: 'x' } },
      'odd',
    ],
  ])('%s', (_name, apis, req, expected) => {
    expect(winner(table(apis), req)).toBe(expected);
  });

  const tenantsWithCanary: ApiOpts[] = [
    ...tenants(20, '/api/*'),
    ...Array.from(
      { length: 20 },
      (_, i): ApiOpts => ({ name: `c${i}`, hosts: [`t${i}.example.com`], listen_path: '/api/*', match_headers: { 'x-canary': ['true'] } }),
    ),
    { name: 'default', listen_path: '/api/*' },
    { name: 'default-canary', listen_path: '/api/*', match_headers: { 'x-canary': ['true'] } },
  ];
  test.each<Row>([
    ["hosts and headers: the tenant's canary", tenantsWithCanary, { path: '/api/x', host: 't7.example.com', headers: { 'x-canary': 'true' } }, 'c7'],
    ["hosts and headers: the tenant's stable route", tenantsWithCanary, { path: '/api/x', host: 't7.example.com', headers: { 'x-canary': 'false' } }, 't7'],
    [
      'hosts and headers: an unknown host with the header',
      tenantsWithCanary,
      { path: '/api/x', host: 'nobody.test', headers: { 'x-canary': 'true' } },
      'default-canary',
    ],
    ['hosts and headers: an unknown host without it', tenantsWithCanary, { path: '/api/x', host: 'nobody.test' }, 'default'],
    [
      'hosts and headers: the host condition still applies',
      [{ name: 'c', hosts: ['t.com'], listen_path: '/api/*', match_headers: { 'x-canary': ['true'] } }],
      { path: '/api', host: 'u.com', headers: { 'x-canary': 'true' } },
      null,
    ],
    [
      'in a parameter family: the member with the header',
      [...family(50, res), { name: 'z-canary', listen_path: '/api/{id}/res-7/*', match_headers: { 'x-canary': ['true'] } }],
      { path: '/api/1/res-7', headers: { 'x-canary': 'true' } },
      'z-canary',
    ],
    [
      'in a parameter family: the member without',
      [...family(50, res), { name: 'z-canary', listen_path: '/api/{id}/res-7/*', match_headers: { 'x-canary': ['true'] } }],
      { path: '/api/1/res-7' },
      'f7',
    ],
  ])('%s', (_name, apis, req, expected) => {
    expect(winner(table(apis), req)).toBe(expected);
  });

  test('two APIs on one listen_path differing only by the value of a header both route', () => {
    const t = table([
      { name: 'blue', listen_path: '/app/*', match_headers: { 'x-slot': ['blue'] } },
      { name: 'green', listen_path: '/app/*', match_headers: { 'x-slot': ['green'] } },
    ]);
    expect(winner(t, { path: '/app/1', headers: { 'x-slot': 'blue' } })).toBe('blue');
    expect(winner(t, { path: '/app/1', headers: { 'x-slot': 'green' } })).toBe('green');
    expect(winner(t, { path: '/app/1', headers: { 'x-slot': 'blue, green' } })).toBe('blue');
    expect(winner(t, { path: '/app/1' })).toBeNull();
  });

  test('explain names the headers a route fails and lists the others', () => {
    const t = table(canary);
    const considered = t.explain({ method: 'GET', host: undefined, path: '/api/x', headers: { 'x-canary': 'false' } });
    expect(considered.map((c) => [c.route.name, c.failed])).toEqual([
      ['z-canary', ['headers']],
      ['a-stable', []],
    ]);
  });
});

describe('a throwing route matcher is a bug, not "no route"', () => {
  /** A compiled route whose listen_path matcher fails as a bug in it would. */
  function broken(): RoutingTable {
    const route = compileApi(api({ name: 'broken', listen_path: '/b/{id}' }));
    const listenPath = Object.assign(Object.create(Object.getPrototypeOf(route.listenPath)), route.listenPath, {
      match: () => {
        throw new TypeError('listen path matcher bug');
      },
    });
    return buildRoutingTable([{ ...route, listenPath }]);
  }

  test('match throws the error instead of answering null', () => {
    expect(() => broken().match({ method: 'GET', host: undefined, path: '/b/1' })).toThrow('listen path matcher bug');
  });

  test('explain throws it too, instead of answering no candidates', () => {
    expect(() => broken().explain({ method: 'GET', host: undefined, path: '/b/1' })).toThrow('listen path matcher bug');
  });
});
