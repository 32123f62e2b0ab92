import { readFileSync } from 'node:fs';
import { exitCodeOf } from './import-command.js';
import { classify, parseMongoExport } from './sources.js';
import {
  DIFFERING_DEFAULTS,
  gatehouseUpstreamPath,
  janusUpstreamPath,
  translateAll,
  translateApi,
  translateBasicAuthUser,
  translateOAuthServer,
} from './translate.js';

const api = (proxy: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  name: 'a',
  proxy: {
    listen_path: '/a/*',
    methods: ['GET'],
    upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://u/t' }] },
    forwarding_timeouts: { response_header_timeout: '30s' },
    ...proxy,
  },
  ...extra,
});

describe("Janus's upstream path (its director in pkg/proxy/reverse_proxy.go)", () => {
  const rewrite = (listen_path: string, strip_path = false, append_path = false) => ({ listen_path, strip_path, append_path });
  test.each([
    // listen_path, strip, append, target path, request, Janus's path
    ['/example/*', false, false, '/hello-world', '/example/a', '/hello-world'],
    ['/example/*', false, false, '', '/example/a', '/'],
    ['/example/*', false, false, '/', '/example/a', '/'],
    ['/service/*', false, true, '/example', '/service/a', '/example/service/a'],
    ['/service/*', true, false, '', '/service/a/b', '/a/b'],
    ['/service/*', true, false, '', '/service/a/', '/a'],
    ['/service/*', true, false, '/base/', '/service/a/', '/base/a/'],
    ['/auth/token', true, false, '/token', '/auth/token', '/token'],
    // The first occurrence anywhere, the target's path included.
    ['/api/*', true, false, '/v1/apis', '/api/x', '/v1s/api/x'],
  ] as const)('%s strip=%s append=%s target %s: %s → %s', (listenPath, strip, append, target, request, expected) => {
    expect(janusUpstreamPath(rewrite(listenPath, strip, append), target, request)).toBe(expected);
  });

  test("Gatehouse's rule gives the client's path for a target without one", () => {
    expect(gatehouseUpstreamPath(rewrite('/example/*'), '', '/example/a')).toBe('/example/a');
    expect(gatehouseUpstreamPath(rewrite('/service/*', true), '', '/service/a/')).toBe('/a/');
  });
});

describe('API definitions', () => {
  test('a definition meaning the same on both gateways is unchanged', () => {
    expect(translateApi(api({}))).toMatchObject({ status: 'unchanged', changes: [], differences: [] });
  });

  test('no methods → ["GET"]; empty methods → inactive', () => {
    const { methods, ...proxy } = api({}).proxy;
    void methods;
    const none = translateApi({ name: 'a', proxy });
    expect(none.status).toBe('changed');
    expect(none.definition!.proxy).toMatchObject({ methods: ['GET'] });
    const empty = translateApi(api({ methods: [] }));
    expect(empty.definition).toMatchObject({ active: false, proxy: { methods: ['GET'] } });
  });

  test.each([undefined, '', 'RoundRobin', 'least_conn'])('balancing %p is not served by Janus: imported inactive', (balancing) => {
    const report = translateApi(api({ upstreams: { balancing, targets: [{ target: 'http://u/t' }] } }));
    expect(report.definition).toMatchObject({ active: false, proxy: { upstreams: { balancing: 'roundrobin' } } });
    expect(report.changes.join()).toContain('unsupported balancing algorithm');
  });

  test("weights: Go's zero weight dropped under round robin; weight-0 targets left out under weight; all zero refused", () => {
    const rr = translateApi(api({ upstreams: { balancing: 'rr', targets: [{ target: 'http://u/t', weight: 0 }] } }));
    expect(JSON.parse(JSON.stringify(rr.definition!.proxy)).upstreams.targets).toEqual([{ target: 'http://u/t' }]);
    expect(rr.status).toBe('unchanged');
    const some = translateApi(
      api({
        upstreams: {
          balancing: 'weight',
          targets: [
            { target: 'http://u/t', weight: 2 },
            { target: 'http://v/t', weight: 0 },
          ],
        },
      }),
    );
    expect((some.definition!.proxy as any).upstreams.targets).toEqual([{ target: 'http://u/t', weight: 2 }]);
    const none = translateApi(api({ upstreams: { balancing: 'weight', targets: [{ target: 'http://u/t' }] } }));
    expect(none).toMatchObject({ status: 'refused', definition: undefined });
  });

  test('response_header_timeout 0 (no limit in Janus) is written as 60s and reported; dial 0 is the same 30s', () => {
    const report = translateApi(api({ forwarding_timeouts: { dial_timeout: '0s', response_header_timeout: '0s' } }));
    expect((report.definition!.proxy as any).forwarding_timeouts).toEqual({ response_header_timeout: '60s' });
    expect(report.differences.join()).toContain('without limit');
    // What Go's time.ParseDuration refuses is 0 in Janus too; a valid one is kept.
    for (const dial_timeout of [30, '30', '0.0s', '0m0s']) {
      expect(
        (translateApi(api({ forwarding_timeouts: { dial_timeout, response_header_timeout: '1m0s' } })).definition!.proxy as any).forwarding_timeouts,
      ).toEqual({ response_header_timeout: '1m0s' });
    }
  });

  test('rewrite: an exact listen_path with a pathless target gets strip_path; a /* one is refused; an overlapping target path is refused', () => {
    const exact = translateApi(api({ listen_path: '/x', upstreams: { balancing: 'rr', targets: [{ target: 'http://u' }] } }));
    expect(exact.definition!.proxy).toMatchObject({ strip_path: true });
    const prefix = translateApi(api({ upstreams: { balancing: 'rr', targets: [{ target: 'http://u' }] } }));
    expect(prefix.status).toBe('refused');
    expect(prefix.reason).toContain('Set append_path');
    const overlap = translateApi(api({ listen_path: '/api/*', strip_path: true, upstreams: { balancing: 'rr', targets: [{ target: 'http://u/v1/apis' }] } }));
    expect(overlap.reason).toContain('Janus forwards /api to /v1s');
    const params = translateApi(
      api({ listen_path: '/prepath/{service}/*', strip_path: true, upstreams: { balancing: 'rr', targets: [{ target: 'http://{service}:9000' }] } }),
    );
    expect(params.status).toBe('unchanged');
  });

  test('hosts: a top-level one (ignored by Janus) is left out; a port is reported, since Gatehouse ignores it', () => {
    const report = translateApi(api({ hosts: ['api.example.com:8080', '*.example.com'] }, { hosts: ['other.example.com'] }));
    expect(report.definition!.hosts).toBeUndefined();
    expect(report.definition!.proxy).toMatchObject({ hosts: ['api.example.com', '*.example.com'] });
    expect(report.differences.join()).toContain('hosts api.example.com:8080: Gatehouse matches the host without its port');
  });

  test('plugins: enabled absent is off; cors credentials; cb hystrix defaults; retry methods; response_transformer off; unknown dropped; organization_auth refused', () => {
    const report = translateApi(
      api(
        { methods: ['GET', 'POST'] },
        {
          plugins: [
            { name: 'compression' },
            { name: 'cors', enabled: true, config: { domains: ['https://a.example'] } },
            { name: 'cb', enabled: true, config: { name: 'x', timeout: 500 } },
            { name: 'retry', enabled: true, config: { attempts: 2 } },
            { name: 'response_transformer', enabled: true, config: {} },
            { name: 'not-a-janus-plugin', enabled: true },
          ],
        },
      ),
    );
    expect(report.definition!.plugins).toEqual([
      { name: 'compression', enabled: false, config: {} },
      { name: 'cors', enabled: true, config: { domains: ['https://a.example'], allow_credentials: true } },
      { name: 'cb', enabled: true, config: { name: 'x', timeout: 500, max_concurrent_requests: 10 } },
      { name: 'retry', enabled: true, config: { attempts: 2, methods: ['GET', 'POST'] } },
      { name: 'response_transformer', enabled: false, config: {} },
    ]);
    const anyOrigin = translateApi(api({}, { plugins: [{ name: 'cors', enabled: true, config: { domains: ['*'] } }] }));
    expect((anyOrigin.definition!.plugins as any)[0].config.allow_credentials).toBeUndefined();
    expect(anyOrigin.differences.join()).toContain('credentials not allowed');
    const badPolicy = translateApi(api({}, { plugins: [{ name: 'rate_limit', enabled: true, config: { limit: '1-S' } }] }));
    expect((badPolicy.definition!.plugins as any)[0].enabled).toBe(false);
    const org = translateApi(api({}, { plugins: [{ name: 'organization_auth', enabled: true }] }));
    expect(org).toMatchObject({ status: 'refused', definition: undefined });
  });
});

describe('OAuth servers', () => {
  const server = (settings: unknown) => ({
    name: 's',
    oauth_endpoints: {
      token: {
        listen_path: '/auth/token',
        methods: ['POST'],
        strip_path: true,
        upstreams: { balancing: 'rr', targets: [{ target: 'http://u/token' }] },
        forwarding_timeouts: { response_header_timeout: '5s' },
      },
      authorize: { listen_path: '', upstreams: { targets: [] } },
    },
    token_strategy: { name: 'jwt', settings },
  });

  test.each([
    [[{ alg: 'HS256', key: 'secret' }], 6],
    [{ secret: 'short-legacy-secret' }, 19],
  ])('a short HS key (%j) is refused, and submitted with --apply', (settings, bytes) => {
    expect(translateOAuthServer(server(settings))).toMatchObject({
      status: 'refused',
      submitted: true,
      reason: `HS256 key is ${bytes} bytes: rotate it, or set ALLOW_SHORT_HMAC_KEYS=true on the control plane during the migration`,
      definition: { name: 's' },
    });
  });

  test("introspection without use_auth_header: Janus's GET is reported", () => {
    const custom = { ...server([]), token_strategy: { name: 'introspection', settings: { use_custom_header: true, header_name: 'X-Token' } } };
    expect(translateOAuthServer(custom).differences.join()).toContain('Janus sends a GET with the token in header X-Token');
    const auth = { ...server([]), token_strategy: { name: 'introspection', settings: { use_auth_header: true, auth_header_type: 'Bearer' } } };
    expect(translateOAuthServer(auth).differences.join()).not.toContain('introspection');
  });

  test("a 32-byte key is kept; an endpoint without listen_path (Janus serves none) is left out; Janus's CORS on the endpoints is reported", () => {
    const report = translateOAuthServer(server([{ alg: 'HS256', key: 'k'.repeat(32) }]));
    expect(report.status).toBe('changed');
    expect(report.reason).toBeUndefined();
    expect(Object.keys(report.definition!.oauth_endpoints as object)).toEqual(['token']);
    expect(report.differences).toEqual([
      "CORS: Janus answers CORS on every OAuth endpoint (any origin, with credentials); Gatehouse's OAuth endpoints answer none",
    ]);
  });

  test('access_rules are refused (dropping them would let tokens through); secrets and client endpoints are reported', () => {
    const key = [{ alg: 'HS256', key: 'k'.repeat(32) }];
    const rules = translateOAuthServer({ ...server(key), access_rules: [{ predicate: "country == 'de'", action: 'deny' }] });
    expect(rules.status).toBe('refused');
    expect(rules.definition).toBeUndefined();
    const extras = translateOAuthServer({ ...server(key), secrets: { client: 'secret' }, oauth_client_endpoints: { create: { listen_path: '/clients' } } });
    expect(extras.differences.join('\n')).toMatch(/secrets: Janus adds[\s\S]*oauth_client_endpoints \(create\)/);
    expect(extras.definition!.secrets).toBeUndefined();
  });
});

test('basic_auth users: an scrypt hash is carried over, a bcrypt one listed for reset', () => {
  expect(translateBasicAuthUser({ username: 'u', password: 'scrypt$16384$8$1$salt$key' })).toMatchObject({
    status: 'unchanged',
    definition: { username: 'u', password_hash: 'scrypt$16384$8$1$salt$key' },
  });
  const bcrypt = translateBasicAuthUser({ username: 'b', password: '$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy' });
  expect(bcrypt.status).toBe('reset');
  expect(bcrypt.definition).toBeUndefined();
  expect(bcrypt.reason).toContain('gatehouse basic-auth create b');
});

test('a name defined twice: the last one read is imported, as Janus keeps it', () => {
  const items = translateAll({ apis: [api({ listen_path: '/first/*' }), api({ listen_path: '/second/*' })], oauthServers: [], basicAuthUsers: [] });
  expect(items[0].status).toBe('changed');
  expect(items[0].definition).toBeUndefined();
  expect(items[1].definition!.proxy).toMatchObject({ listen_path: '/second/*' });
});

test('exit codes: 0 nothing to do, 3 changes to review, 4 refused items or users to reset', () => {
  expect(exitCodeOf([translateApi(api({}))])).toBe(0);
  expect(exitCodeOf([translateApi({ name: 'a', proxy: { listen_path: '/a/*', upstreams: { balancing: 'rr', targets: [{ target: 'http://u/t' }] } } })])).toBe(
    3,
  );
  expect(exitCodeOf([translateBasicAuthUser({ username: 'b', password: '$2a$10$x' })])).toBe(4);
});

describe('mongoexport', () => {
  const doc = {
    _id: { $oid: '5a1d6b8c2c4f8a0001a1b2c3' },
    name: 'm',
    proxy: { upstreams: { targets: [{ target: 'http://u', weight: { $numberInt: '2' } }] } },
    token: { $numberLong: '30' },
  };
  const plain = { name: 'm', proxy: { upstreams: { targets: [{ target: 'http://u', weight: 2 }] } }, token: 30 };

  test('a JSON array and one document per line, extended JSON decoded, _id ignored', () => {
    expect(parseMongoExport(JSON.stringify([doc, doc]), 'f')).toEqual([plain, plain]);
    expect(parseMongoExport(`${JSON.stringify(doc)}\n\n${JSON.stringify(doc)}\n`, 'f')).toEqual([plain, plain]);
  });

  test('documents are sorted by shape; anything else is an error naming the file', () => {
    const into = { apis: [], oauthServers: [], basicAuthUsers: [] };
    classify([{ proxy: {} }, { token_strategy: {} }, { username: 'u', password: 'p' }], 'f', into);
    expect([into.apis.length, into.oauthServers.length, into.basicAuthUsers.length]).toEqual([1, 1, 1]);
    expect(() => classify([{ what: 1 }], 'f.json', into)).toThrow(/^f\.json: a document that is neither/);
    expect(() => parseMongoExport('{"a":\n', 'f.json')).toThrow(/f\.json line 1 is not JSON/);
  });
});

test('the guide lists every default the import writes out', () => {
  const guide = readFileSync('docs/migrating-from-janus.md', 'utf8');
  for (const row of DIFFERING_DEFAULTS) expect(guide).toContain(`| ${row.field} |`);
});
