/**
 * explainRequest: the winner is `match`'s, every other route the lookup considers is listed with
 * the reasons it lost, inactive APIs are explained from their own table, and upstream URLs come
 * from `rewrite`.
 */
import { compileDefinitions } from '../compile/index.js';
import { parseApiDefinition } from '../definition/index.js';
import { buildRoutingTable, explainRequest, type ExplainedCandidate, type LossReason, type RequestExplanation, type RequestHeaders } from './index.js';

interface ApiOpts {
  name: string;
  active?: boolean;
  hosts?: string[];
  listen_path?: string;
  methods?: string[];
  match_headers?: Record<string, string[]>;
  targets?: string[];
  strip_path?: boolean;
  allow_encoded_slashes?: boolean;
  plugins?: unknown[];
}

type Req = { method?: string; host?: string; path: string; headers?: RequestHeaders };

function explain(apis: ApiOpts[], req: Req): RequestExplanation {
  const defs = apis.map((o) =>
    parseApiDefinition({
      name: o.name,
      active: o.active,
      hosts: o.hosts,
      plugins: o.plugins,
      proxy: {
        listen_path: o.listen_path,
        methods: o.methods,
        match_headers: o.match_headers,
        strip_path: o.strip_path,
        allow_encoded_slashes: o.allow_encoded_slashes,
        upstreams: { targets: (o.targets ?? ['http://u']).map((target) => ({ target })) },
      },
    }),
  );
  const compiled = compileDefinitions({ apis: defs, oauthServers: [] });
  expect(compiled.rejected).toEqual([]);
  const tables = { active: buildRoutingTable(compiled.routes), inactive: buildRoutingTable(compiled.inactiveRoutes) };
  return explainRequest(tables, { method: req.method ?? 'GET', host: req.host, path: req.path, headers: req.headers });
}

/** name → reasons of each losing candidate. */
function reasons(e: RequestExplanation): Record<string, LossReason[]> {
  return Object.fromEntries(e.candidates.map((c) => [c.name, c.reasons]));
}

function candidate(e: RequestExplanation, name: string): ExplainedCandidate {
  const found = e.candidates.find((c) => c.name === name);
  if (!found) throw new Error(`no candidate ${name}`);
  return found;
}

type Row = [name: string, apis: ApiOpts[], req: Req, winner: string | null, losers: Record<string, LossReason[]>];

describe('explain: candidate reasons', () => {
  test.each<Row>([
    ['method mismatch', [{ name: 'posts', listen_path: '/x/*', methods: ['POST'] }], { path: '/x/1' }, null, { posts: ['method_mismatch'] }],
    [
      'host mismatch',
      [{ name: 'tenant', listen_path: '/x/*', hosts: ['a.example.com'] }],
      { path: '/x/1', host: 'b.example.com' },
      null,
      { tenant: ['host_mismatch'] },
    ],
    ['host required but absent', [{ name: 'tenant', hosts: ['a.example.com'] }], { path: '/' }, null, { tenant: ['host_mismatch'] }],
    ['path mismatch (parameter regex)', [{ name: 'ids', listen_path: '/item/{id:[0-9]+}' }], { path: '/item/abc' }, null, { ids: ['path_mismatch'] }],
    [
      'several conditions fail at once',
      [{ name: 'strict', listen_path: '/x/*', methods: ['PUT'], hosts: ['a.com'] }],
      { path: '/x', host: 'b.com' },
      null,
      { strict: ['method_mismatch', 'host_mismatch'] },
    ],
    ['inactive API', [{ name: 'off', listen_path: '/x/*', active: false }], { path: '/x/1' }, null, { off: ['inactive'] }],
    [
      'inactive API that would fail its method too',
      [{ name: 'off', listen_path: '/x/*', methods: ['POST'], active: false }],
      { path: '/x/1' },
      null,
      { off: ['inactive', 'method_mismatch'] },
    ],
    [
      'lower priority: shorter prefix',
      [
        { name: 'short', listen_path: '/x/*' },
        { name: 'long', listen_path: '/x/y/*' },
      ],
      { path: '/x/y/z' },
      'long',
      { short: ['lower_priority'] },
    ],
    [
      'winner plus a mismatch in the same bucket',
      [
        { name: 'get', listen_path: '/x/*', methods: ['GET'] },
        { name: 'post', listen_path: '/x/*', methods: ['POST'] },
      ],
      { path: '/x/1' },
      'get',
      { post: ['method_mismatch'] },
    ],
    [
      'header mismatch',
      [{ name: 'canary', listen_path: '/x/*', match_headers: { 'X-Canary': ['true'] } }],
      { path: '/x', headers: { 'x-canary': 'no' } },
      null,
      { canary: ['header_mismatch'] },
    ],
    [
      'header mismatch beside a method mismatch, in condition order',
      [{ name: 'canary', listen_path: '/x/*', methods: ['PUT'], match_headers: { 'X-Canary': ['true'] } }],
      { path: '/x' },
      null,
      { canary: ['method_mismatch', 'header_mismatch'] },
    ],
    [
      'the canary missed, the stable route served',
      [
        { name: 'stable', listen_path: '/x/*' },
        { name: 'canary', listen_path: '/x/*', match_headers: { 'X-Canary': ['true'] } },
      ],
      { path: '/x' },
      'stable',
      { canary: ['header_mismatch'] },
    ],
    [
      'a route whose prefix the path does not start with is not a candidate',
      [
        { name: 'other', listen_path: '/other/*' },
        { name: 'x', listen_path: '/x/*' },
      ],
      { path: '/x' },
      'x',
      {},
    ],
  ])('%s', (_name, apis, req, winner, losers) => {
    const e = explain(apis, req);
    expect(e.route?.name ?? null).toBe(winner);
    expect(reasons(e)).toEqual(losers);
  });

  test.each<[name: string, apis: ApiOpts[], path: string, winner: string, rule: string]>([
    [
      'longer literal prefix',
      [
        { name: 'a', listen_path: '/x/*' },
        { name: 'b', listen_path: '/x/y/*' },
      ],
      '/x/y/z',
      'b',
      'longer_prefix',
    ],
    [
      'more conditions',
      [
        { name: 'a', listen_path: '/x/*' },
        { name: 'b', listen_path: '/x/*', methods: ['GET'] },
      ],
      '/x/1',
      'b',
      'more_conditions',
    ],
    [
      'more conditions: a header',
      [
        { name: 'a', listen_path: '/x/*' },
        { name: 'b', listen_path: '/x/*', match_headers: { 'x-c': ['1'] } },
      ],
      '/x/1',
      'b',
      'more_conditions',
    ],
    [
      'exact listen_path before /* at equal prefix',
      [
        { name: 'a', listen_path: '/x/*' },
        { name: 'b', listen_path: '/x' },
      ],
      '/x',
      'b',
      'exact_listen_path',
    ],
    [
      'name order',
      [
        { name: 'b', listen_path: '/x/{id}' },
        { name: 'a', listen_path: '/x/{key}' },
      ],
      '/x/1',
      'a',
      'name_order',
    ],
  ])('lower priority names its rule: %s', (_name, apis, path, winner, rule) => {
    const e = explain(apis, { path, headers: { 'x-c': '1' } });
    expect(e.route?.name).toBe(winner);
    const loser = e.candidates.find((c) => c.reasons.includes('lower_priority'));
    expect(loser?.outranked_by).toEqual({ kind: 'api', name: winner, rule });
    expect(loser?.details).toEqual([expect.stringContaining(`api "${winner}" comes first`)]);
  });

  test('the winner is the one match() elects, and is never listed as a candidate', () => {
    const e = explain(
      [
        { name: 'a', listen_path: '/x/*' },
        { name: 'b', listen_path: '/x/*', hosts: ['h.com'] },
      ],
      { path: '/x', host: 'h.com' },
    );
    expect(e.route?.name).toBe('b');
    expect(e.candidates.map((c) => c.name)).toEqual(['a']);
    expect(candidate(e, 'a').outranked_by?.rule).toBe('more_conditions');
  });

  test('details say what failed, in the order of the reasons', () => {
    const e = explain([{ name: 'p', listen_path: '/x/*', methods: ['POST', 'PUT'], hosts: ['a.com'] }], { path: '/x', host: 'b.com:8080', method: 'get' });
    expect(candidate(e, 'p').details).toEqual(['method GET is not one of POST, PUT', 'host b.com:8080 matches none of a.com']);
  });

  test('a header mismatch says which header failed, what the request carried and what the route accepts', () => {
    const apis: ApiOpts[] = [
      { name: 'v2', listen_path: '/x/*', match_headers: { 'X-Canary': ['true'], 'Accept-Version': ['v2', 'v2.1'], 'X-Tenant': ['acme'] } },
    ];
    const e = explain(apis, { path: '/x', headers: { 'x-canary': 'false, no', 'x-tenant': 'acme' } });
    expect(candidate(e, 'v2').details).toEqual([
      'header accept-version is absent; the route requires one of "v2", "v2.1"; header x-canary is "false, no"; the route requires "true"',
    ]);
    expect(candidate(e, 'v2').match_headers).toEqual({ 'accept-version': ['v2', 'v2.1'], 'x-canary': ['true'], 'x-tenant': ['acme'] });
    const empty = explain(apis, { path: '/x', headers: { 'x-canary': 'true', 'x-tenant': 'acme', 'accept-version': '' } });
    expect(candidate(empty, 'v2').details).toEqual(['header accept-version is ""; the route requires one of "v2", "v2.1"']);
  });

  test('a route without header conditions shows no match_headers member', () => {
    const e = explain([{ name: 'a', listen_path: '/x/*' }], { path: '/x' });
    expect(e.route).not.toHaveProperty('match_headers');
  });

  test('matched route: params, matched part, every target rewritten, plugins in pipeline order', () => {
    const e = explain(
      [
        {
          name: 'svc',
          listen_path: '/svc/{tenant}/*',
          strip_path: true,
          targets: ['http://{tenant}.internal:9000/base?k=v', 'http://backup/base'],
          plugins: [
            { name: 'compression', config: {} },
            { name: 'cors', config: { domains: ['*'] } },
            { name: 'body_limit', enabled: false, config: { limit: '1MB' } },
          ],
        },
      ],
      { path: '/svc/acme/a/../b?q=1', host: 'gw.example.com' },
    );
    expect(e.request).toEqual({ method: 'GET', host: 'gw.example.com', path: '/svc/acme/b', query: 'q=1' });
    expect(e.route).toMatchObject({ name: 'svc', params: { tenant: 'acme' }, matched_path: '/svc/acme' });
    expect(e.upstreams).toEqual([
      { target: 'http://{tenant}.internal:9000/base?k=v', weight: 1, url: 'http://acme.internal:9000/base/b?k=v&q=1', host_header: 'acme.internal:9000' },
      { target: 'http://backup/base', weight: 1, url: 'http://backup/base/b?q=1', host_header: 'backup' },
    ]);
    expect(e.plugins).toEqual(['cors', 'compression']);
  });

  test('a target whose placeholder does not form a host is reported, not thrown', () => {
    const e = explain([{ name: 'svc', listen_path: '/svc/{h}/*', targets: ['http://{h}:9000'] }], { path: '/svc/a%40b/x' });
    expect(e.upstreams).toEqual([{ target: 'http://{h}:9000', weight: 1, url: null, host_header: null, error: expect.any(String) }]);
  });

  test('no route: empty upstreams and plugins', () => {
    const e = explain([], { path: '/nothing' });
    expect(e).toMatchObject({ route: null, upstreams: [], plugins: [], candidates: [] });
    expect(e).not.toHaveProperty('refused');
  });

  test('a path the proxy refuses as ambiguous says so, with the route it would otherwise match', () => {
    const apis = [
      { name: 'plain', listen_path: '/plain/*' },
      { name: 'files', listen_path: '/files/*', allow_encoded_slashes: true },
    ];
    expect(explain(apis, { path: '/plain/..;/jwt/x' })).toMatchObject({
      route: { name: 'plain' },
      refused: { code: 'AMBIGUOUS_PATH', message: 'request path holds a dot segment with parameters' },
    });
    expect(explain(apis, { path: '/plain/a%2Fb' }).refused).toEqual({
      code: 'AMBIGUOUS_PATH',
      message: 'request path holds an encoded slash (%2F, %5C) and its API does not allow them',
    });
    expect(explain(apis, { path: '/files/a%2Fb' })).not.toHaveProperty('refused');
    expect(explain(apis, { path: '/nowhere/a\\b' })).toMatchObject({ route: null, refused: { message: 'request path holds a backslash' } });
  });
});
