import { mergePatch, parseApiDefinition } from './index.js';
import { proxyDefaults } from '../../../test/helpers/proxy-defaults.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';

const VALID = {
  name: 'example',
  proxy: { listen_path: '/example/*', upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://localhost:9000' }] } },
};
const TARGETS = VALID.proxy.upstreams;
const withPatch = (patch: object) => mergePatch(VALID, patch);

const errorOf = (raw: unknown) => gatehouseErrorOf(() => parseApiDefinition(raw));

test.each([
  ['not an object: array', [], 'definition must be a JSON object', undefined],
  ['not an object: string', 'x', 'definition must be a JSON object', undefined],
  ['not an object: null', null, 'definition must be a JSON object', undefined],
  ['name missing', { proxy: VALID.proxy }, 'name is required', 'name'],
  ['name missing (empty body)', {}, 'name is required', 'name'],
  ['name empty', withPatch({ name: '' }), 'name is required', 'name'],
  ['name null', withPatch({ name: null }), 'name is required', 'name'],
  ['name not a string', withPatch({ name: 5 }), 'name must be a string', 'name'],
  ['name with space', withPatch({ name: 'a b' }), 'name must be 1-128 characters of A-Z a-z 0-9 . _ -', 'name'],
  ['name with slash', withPatch({ name: 'a/b' }), 'name must be 1-128 characters of A-Z a-z 0-9 . _ -', 'name'],
  ['name too long', withPatch({ name: 'a'.repeat(129) }), 'name must be 1-128 characters of A-Z a-z 0-9 . _ -', 'name'],
  ['name a dot segment', withPatch({ name: '..' }), 'name must not be "." or ".."', 'name'],
  ['name a single dot', withPatch({ name: '.' }), 'name must not be "." or ".."', 'name'],
  ['name beats routing condition', { proxy: {} }, 'name is required', 'name'],
  ['no routing condition', { name: 'x', proxy: { upstreams: TARGETS } }, 'proxy.listen_path is required', 'proxy.listen_path'],
  ['no proxy at all', { name: 'x' }, 'proxy.listen_path is required', 'proxy.listen_path'],
  ['empty listen_path is absent', withPatch({ proxy: { listen_path: '' } }), 'proxy.listen_path is required', 'proxy.listen_path'],
  ['empty hosts is no condition', withPatch({ hosts: [], proxy: { listen_path: null } }), 'proxy.listen_path is required', 'proxy.listen_path'],
  ['routing condition beats targets', { name: 'x', proxy: {} }, 'proxy.listen_path is required', 'proxy.listen_path'],
  ['proxy missing with hosts', { name: 'x', hosts: ['a.com'] }, 'proxy is required', 'proxy'],
  ['proxy not an object', { name: 'x', hosts: ['a.com'], proxy: 'p' }, 'proxy must be an object', 'proxy'],
  ['listen_path without slash', withPatch({ proxy: { listen_path: 'x/*' } }), 'proxy.listen_path must start with "/"', 'proxy.listen_path'],
  ['listen_path not a string', withPatch({ proxy: { listen_path: 3 } }), 'proxy.listen_path must be a string', 'proxy.listen_path'],
  ['upstreams missing', withPatch({ proxy: { upstreams: null } }), 'proxy.upstreams.targets is required', 'proxy.upstreams.targets'],
  ['targets missing', withPatch({ proxy: { upstreams: { targets: null } } }), 'proxy.upstreams.targets is required', 'proxy.upstreams.targets'],
  ['targets empty', withPatch({ proxy: { upstreams: { targets: [] } } }), 'proxy.upstreams.targets must not be empty', 'proxy.upstreams.targets'],
  [
    'target missing',
    withPatch({ proxy: { upstreams: { targets: [{}] } } }),
    'proxy.upstreams.targets[0].target is required',
    'proxy.upstreams.targets[0].target',
  ],
  [
    'target empty',
    withPatch({ proxy: { upstreams: { targets: [{ target: 'http://a' }, { target: '' }] } } }),
    'proxy.upstreams.targets[1].target is required',
    'proxy.upstreams.targets[1].target',
  ],
  [
    'target not an object',
    withPatch({ proxy: { upstreams: { targets: ['http://a'] } } }),
    'proxy.upstreams.targets[0] must be an object',
    'proxy.upstreams.targets[0]',
  ],
  [
    'weight zero',
    withPatch({ proxy: { upstreams: { targets: [{ target: 'http://a', weight: 0 }] } } }),
    'proxy.upstreams.targets[0].weight must be an integer from 1 to 1000',
    'proxy.upstreams.targets[0].weight',
  ],
  [
    'weight too big',
    withPatch({ proxy: { upstreams: { targets: [{ target: 'http://a', weight: 1001 }] } } }),
    'proxy.upstreams.targets[0].weight must be an integer from 1 to 1000',
    'proxy.upstreams.targets[0].weight',
  ],
  [
    'weight fractional',
    withPatch({ proxy: { upstreams: { targets: [{ target: 'http://a', weight: 1.5 }] } } }),
    'proxy.upstreams.targets[0].weight must be an integer from 1 to 1000',
    'proxy.upstreams.targets[0].weight',
  ],
  [
    'weight a string',
    withPatch({ proxy: { upstreams: { targets: [{ target: 'http://a', weight: '2' }] } } }),
    'proxy.upstreams.targets[0].weight must be an integer from 1 to 1000',
    'proxy.upstreams.targets[0].weight',
  ],
  [
    'unknown balancing',
    withPatch({ proxy: { upstreams: { balancing: 'random' } } }),
    'proxy.upstreams.balancing must be "roundrobin" (alias "rr"), "weight", "least_conn" or "hash"',
    'proxy.upstreams.balancing',
  ],
  [
    'unknown protocol',
    withPatch({ proxy: { upstreams: { protocol: 'h2' } } }),
    'proxy.upstreams.protocol must be "http1" or "http2"',
    'proxy.upstreams.protocol',
  ],
  ['methods empty', withPatch({ proxy: { methods: [] } }), 'proxy.methods must not be empty', 'proxy.methods'],
  ['methods not an array', withPatch({ proxy: { methods: 'GET' } }), 'proxy.methods must be an array', 'proxy.methods'],
  ['method with space', withPatch({ proxy: { methods: ['GET', 'P OST'] } }), 'proxy.methods[1] is not a valid HTTP method', 'proxy.methods[1]'],
  ['method empty', withPatch({ proxy: { methods: [''] } }), 'proxy.methods[0] is not a valid HTTP method', 'proxy.methods[0]'],
  ['method with CRLF', withPatch({ proxy: { methods: ['GET\r\nX: y'] } }), 'proxy.methods[0] is not a valid HTTP method', 'proxy.methods[0]'],
  ['method not a string', withPatch({ proxy: { methods: [7] } }), 'proxy.methods[0] must be a string', 'proxy.methods[0]'],
  ['hosts not an array', withPatch({ hosts: 'a.com' }), 'hosts must be an array', 'hosts'],
  ['host empty', withPatch({ hosts: ['a.com', ''] }), 'hosts[1] must not be empty', 'hosts[1]'],
  ['host with whitespace', withPatch({ hosts: ['a .com'] }), 'hosts[0] must not contain whitespace', 'hosts[0]'],
  ['proxy.hosts entry empty', withPatch({ proxy: { hosts: [''] } }), 'proxy.hosts[0] must not be empty', 'proxy.hosts[0]'],
  ['active not a boolean', withPatch({ active: 'yes' }), 'active must be a boolean', 'active'],
  ['strip_path not a boolean', withPatch({ proxy: { strip_path: 1 } }), 'proxy.strip_path must be a boolean', 'proxy.strip_path'],
  ['append_path not a boolean', withPatch({ proxy: { append_path: 'true' } }), 'proxy.append_path must be a boolean', 'proxy.append_path'],
  ['preserve_host not a boolean', withPatch({ proxy: { preserve_host: 0 } }), 'proxy.preserve_host must be a boolean', 'proxy.preserve_host'],
  [
    'insecure_skip_verify not a boolean',
    withPatch({ proxy: { insecure_skip_verify: 'no' } }),
    'proxy.insecure_skip_verify must be a boolean',
    'proxy.insecure_skip_verify',
  ],
  [
    'dial_timeout junk',
    withPatch({ proxy: { forwarding_timeouts: { dial_timeout: 'soon' } } }),
    'proxy.forwarding_timeouts.dial_timeout is not a valid duration',
    'proxy.forwarding_timeouts.dial_timeout',
  ],
  [
    'dial_timeout zero',
    withPatch({ proxy: { forwarding_timeouts: { dial_timeout: '0s' } } }),
    'proxy.forwarding_timeouts.dial_timeout is not a valid duration',
    'proxy.forwarding_timeouts.dial_timeout',
  ],
  [
    'dial_timeout a number',
    withPatch({ proxy: { forwarding_timeouts: { dial_timeout: 5 } } }),
    'proxy.forwarding_timeouts.dial_timeout must be a string',
    'proxy.forwarding_timeouts.dial_timeout',
  ],
  [
    'response_header_timeout over 1h',
    withPatch({ proxy: { forwarding_timeouts: { response_header_timeout: '2h' } } }),
    'proxy.forwarding_timeouts.response_header_timeout is not a valid duration',
    'proxy.forwarding_timeouts.response_header_timeout',
  ],
  ['plugins not an array', withPatch({ plugins: {} }), 'plugins must be an array', 'plugins'],
  ['plugin unknown', withPatch({ plugins: [{ name: 'foo' }] }), 'plugins[0].name: unknown plugin "foo"', 'plugins[0].name'],
  ['plugin name missing', withPatch({ plugins: [{ enabled: true }] }), 'plugins[0].name is required', 'plugins[0].name'],
  ['oauth2 without config', withPatch({ plugins: [{ name: 'oauth2' }] }), 'plugins[0].config.server_name is required', 'plugins[0].config.server_name'],
  [
    'oauth2 with empty server_name',
    withPatch({ plugins: [{ name: 'oauth2', config: { server_name: '' } }] }),
    'plugins[0].config.server_name is required',
    'plugins[0].config.server_name',
  ],
  [
    'plugin enabled not a boolean',
    withPatch({ plugins: [{ name: 'oauth2', enabled: 'y', config: { server_name: 's' } }] }),
    'plugins[0].enabled must be a boolean',
    'plugins[0].enabled',
  ],
  [
    'duplicate plugin',
    withPatch({
      plugins: [
        { name: 'oauth2', config: { server_name: 's' } },
        { name: 'oauth2', config: { server_name: 't' } },
      ],
    }),
    'plugins[1].name: duplicate plugin "oauth2"',
    'plugins[1].name',
  ],
])('rejects %s', (_name, raw, message, field) => {
  const err = errorOf(raw);
  expect(err.code).toBe('VALIDATION_FAILED');
  expect(err.status).toBe(400);
  expect(err.message).toBe(message);
  expect(err.field).toBe(field);
});

test('fills every default', () => {
  expect(parseApiDefinition(VALID)).toEqual({
    name: 'example',
    active: true,
    hosts: [],
    proxy: {
      listen_path: '/example/*',
      upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://localhost:9000', weight: 1 }] },
      ...proxyDefaults(),
    },
    plugins: [],
  });
});

const proxyOf = (patch: object) => parseApiDefinition(withPatch(patch)).proxy;

test.each([
  ['balancing absent → roundrobin', { proxy: { upstreams: { balancing: null } } }, (p: any) => p.upstreams.balancing, 'roundrobin'],
  ['balancing "" → roundrobin', { proxy: { upstreams: { balancing: '' } } }, (p: any) => p.upstreams.balancing, 'roundrobin'],
  ['balancing rr alias', { proxy: { upstreams: { balancing: 'rr' } } }, (p: any) => p.upstreams.balancing, 'roundrobin'],
  ['balancing weight', { proxy: { upstreams: { balancing: 'weight' } } }, (p: any) => p.upstreams.balancing, 'weight'],
  ['protocol absent → absent (HTTP/1.1)', {}, (p: any) => Object.hasOwn(p.upstreams, 'protocol'), false],
  ['protocol http2 kept', { proxy: { upstreams: { protocol: 'http2' } } }, (p: any) => p.upstreams.protocol, 'http2'],
  ['protocol http1 kept as written', { proxy: { upstreams: { protocol: 'http1' } } }, (p: any) => p.upstreams.protocol, 'http1'],
  [
    'weight kept',
    { proxy: { upstreams: { balancing: 'weight', targets: [{ target: 'http://a', weight: 7 }] } } },
    (p: any) => p.upstreams.targets,
    [{ target: 'http://a', weight: 7 }],
  ],
  ['methods upper-cased and deduped', { proxy: { methods: ['get', 'POST', 'GET'] } }, (p: any) => p.methods, ['GET', 'POST']],
  ['ALL absorbs the others', { proxy: { methods: ['get', 'all'] } }, (p: any) => p.methods, ['ALL']],
  ['custom method token kept', { proxy: { methods: ['PURGE'] } }, (p: any) => p.methods, ['PURGE']],
  [
    'timeouts partially given',
    { proxy: { forwarding_timeouts: { dial_timeout: '250ms' } } },
    (p: any) => p.forwarding_timeouts,
    { dial_timeout: '250ms', response_header_timeout: '60s' },
  ],
  [
    'booleans kept',
    { proxy: { strip_path: true, append_path: true, preserve_host: true, insecure_skip_verify: true } },
    (p: any) => [p.strip_path, p.append_path, p.preserve_host, p.insecure_skip_verify],
    [true, true, true, true],
  ],
  ['empty listen_path dropped when hosts route', { hosts: ['a.com'], proxy: { listen_path: '' } }, (p: any) => 'listen_path' in p, false],
])('normalises %s', (_name, patch, pick, expected) => {
  expect(pick(proxyOf(patch))).toEqual(expected);
});

test.each([
  ['hosts only', { hosts: ['A.example.com'] }, ['a.example.com']],
  ['proxy.hosts alias only', { proxy: { hosts: ['B.com'] } }, ['b.com']],
  ['union, deduped, order kept', { hosts: ['a.com', 'B.com'], proxy: { hosts: ['b.com', 'c.com', 'A.COM'] } }, ['a.com', 'b.com', 'c.com']],
  ['wildcards kept', { hosts: ['*.Example.com'] }, ['*.example.com']],
])('folds hosts: %s', (_name, patch, hosts) => {
  const api = parseApiDefinition(withPatch(patch));
  expect(api.hosts).toEqual(hosts);
  expect(api.proxy).not.toHaveProperty('hosts');
});

test.each([
  ['hosts only', { name: 'h', hosts: ['a.com'], proxy: { upstreams: TARGETS } }],
  ['methods only', { name: 'm', proxy: { methods: ['GET'], upstreams: TARGETS } }],
  ['proxy.hosts only', { name: 'p', proxy: { hosts: ['a.com'], upstreams: TARGETS } }],
  ['listen_path only', VALID],
])('accepts a single routing condition: %s', (_name, raw) => {
  expect(() => parseApiDefinition(raw)).not.toThrow();
});

test('strips unknown members and treats null as absent (Janus-style clients)', () => {
  const janus = {
    name: 'janus',
    active: true,
    hosts: null,
    health_check: { url: '', timeout: 0 },
    proxy: {
      preserve_host: false,
      listen_path: '/j/*',
      upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://a', extra: 1 }], options: {} },
      methods: null,
      hosts: null,
    },
    plugins: [{ name: 'oauth2', enabled: false, config: { server_name: 's', other: true } }],
  };
  const api = parseApiDefinition(janus);
  expect(api).not.toHaveProperty('health_check');
  expect(api.proxy.upstreams).not.toHaveProperty('options');
  expect(api.proxy.upstreams.targets).toEqual([{ target: 'http://a', weight: 1 }]);
  expect(api.proxy.methods).toEqual(['ALL']);
  expect(api.hosts).toEqual([]);
  expect(api.plugins).toEqual([{ name: 'oauth2', enabled: false, config: { server_name: 's' } }]);
});

test('is idempotent: a normalised definition parses to itself', () => {
  const once = parseApiDefinition(withPatch({ hosts: ['X.com'], proxy: { methods: ['get'], upstreams: { balancing: 'rr' } } }));
  expect(parseApiDefinition(once)).toEqual(once);
});

test('does not mutate its input', () => {
  const raw = withPatch({ hosts: ['X.com'], proxy: { hosts: ['y.com'], methods: ['get'] } });
  const copy = structuredClone(raw);
  parseApiDefinition(raw);
  expect(raw).toEqual(copy);
});

test('a __proto__ member cannot supply fields', () => {
  const raw = JSON.parse('{"__proto__": {"name": "sneaky"}, "proxy": {"listen_path": "/x", "upstreams": {"targets": [{"target": "http://a"}]}}}');
  expect(errorOf(raw).message).toBe('name is required');
});

test('definitions share one frozen object for each common default, and keep their own values', () => {
  const [a, b] = [parseApiDefinition(VALID), parseApiDefinition(withPatch({ name: 'other' }))];
  expect(a.proxy.forwarding_timeouts).toBe(b.proxy.forwarding_timeouts);
  expect(a.proxy.forwarding_timeouts).toEqual({ dial_timeout: '30s', response_header_timeout: '60s' });
  expect(a.proxy.methods).toBe(b.proxy.methods);
  expect(a.hosts).toBe(b.hosts);
  expect(a.plugins).toBe(b.plugins);
  for (const shared of [a.proxy.forwarding_timeouts, a.proxy.methods, a.hosts, a.plugins]) expect(Object.isFrozen(shared)).toBe(true);
  const own = parseApiDefinition(withPatch({ hosts: ['a.com'], proxy: { methods: ['GET'], forwarding_timeouts: { dial_timeout: '1s' } } }));
  expect(own.proxy.forwarding_timeouts).toEqual({ dial_timeout: '1s', response_header_timeout: '60s' });
  expect(own.proxy.forwarding_timeouts).not.toBe(a.proxy.forwarding_timeouts);
  expect(own.proxy.methods).toEqual(['GET']);
  expect(own.hosts).toEqual(['a.com']);
});

describe('proxy.match_headers', () => {
  const withHeaders = (match_headers: unknown) => withPatch({ proxy: { match_headers } });
  const FIELD = 'proxy.match_headers';

  test('is stored in one form: names lower-cased and sorted, values deduplicated and sorted', () => {
    const proxy = proxyOf({ proxy: { match_headers: { 'X-Canary': ['true'], 'Accept-Version': ['v2.1', 'v2', 'v2.1'] } } });
    expect(proxy.match_headers).toEqual({ 'accept-version': ['v2', 'v2.1'], 'x-canary': ['true'] });
    expect(Object.keys(proxy.match_headers!)).toEqual(['accept-version', 'x-canary']);
    const same = proxyOf({ proxy: { match_headers: { 'accept-version': ['v2', 'v2.1'], 'X-CANARY': ['true'] } } });
    expect(JSON.stringify(same)).toBe(JSON.stringify(proxy));
  });

  test.each([
    ['absent', {}],
    ['null', { proxy: { match_headers: null } }],
    ['empty', { proxy: { match_headers: {} } }],
  ])('%s: no member at all, so the definition keeps the form it had before the field existed', (_name, patch) => {
    expect(proxyOf(patch)).not.toHaveProperty('match_headers');
    expect(parseApiDefinition(withPatch(patch))).toEqual(parseApiDefinition(VALID));
  });

  test('values may hold inner spaces, commas and any visible ASCII; 16 headers of 16 values each are accepted', () => {
    expect(proxyOf({ proxy: { match_headers: { 'X-Date': ['Tue, 1 Nov', '~^v2$'] } } }).match_headers).toEqual({ 'x-date': ['Tue, 1 Nov', '~^v2$'] });
    const many = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`X-H${i}`, Array.from({ length: 16 }, (_, j) => `v${j}`)]));
    expect(Object.keys(proxyOf({ proxy: { match_headers: many } }).match_headers!)).toHaveLength(16);
  });

  test('is a routing condition on its own (routes every path of requests carrying the header)', () => {
    const api = parseApiDefinition({ name: 't', proxy: { match_headers: { 'X-Tenant': ['a'] }, upstreams: TARGETS } });
    expect(api.proxy).not.toHaveProperty('listen_path');
    expect(api.proxy.match_headers).toEqual({ 'x-tenant': ['a'] });
  });

  test('is idempotent', () => {
    const once = parseApiDefinition(withHeaders({ 'X-B': ['2', '1'], 'x-a': ['z'] }));
    expect(parseApiDefinition(once)).toEqual(once);
  });

  test.each([
    ['not an object', ['X-Canary'], FIELD, 'must be an object'],
    ['values not a list', { 'X-Canary': 'true' }, `${FIELD}.X-Canary`, 'must be an array'],
    ['no value', { 'X-Canary': [] }, `${FIELD}.X-Canary`, 'must not be empty'],
    ['an empty value', { 'X-Canary': ['true', ''] }, `${FIELD}.X-Canary[1]`, 'must not be empty'],
    ['a value not a string', { 'X-Canary': [true] }, `${FIELD}.X-Canary[0]`, 'must be a string'],
    ['a value with a leading space', { 'X-Canary': [' true'] }, `${FIELD}.X-Canary[0]`, 'must be visible ASCII characters, with spaces only between them'],
    ['a value with a trailing tab', { 'X-Canary': ['true\t'] }, `${FIELD}.X-Canary[0]`, 'must be visible ASCII characters, with spaces only between them'],
    ['a value with CRLF', { 'X-Canary': ['true\r\nX-Injected: 1'] }, `${FIELD}.X-Canary[0]`, 'must be visible ASCII characters, with spaces only between them'],
    ['a value beyond ASCII', { 'X-Canary': ['vrai\u00e9'] }, `${FIELD}.X-Canary[0]`, 'must be visible ASCII characters, with spaces only between them'],
    ['a value too long', { 'X-Canary': ['v'.repeat(1025)] }, `${FIELD}.X-Canary[0]`, 'must be at most 1024 characters'],
    ['17 values', { 'X-Canary': Array.from({ length: 17 }, (_, i) => `v${i}`) }, `${FIELD}.X-Canary`, 'must have at most 16 values'],
    ['17 headers', Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`X-H${i}`, ['1']])), FIELD, 'must have at most 16 headers'],
    ['a name with a space', { 'X Canary': ['true'] }, `${FIELD}.X Canary`, 'is not a valid header name'],
    ['an empty name', { '': ['true'] }, FIELD, 'must not have an empty header name'],
    ['Host', { Host: ['a.example.com'] }, `${FIELD}.Host`, 'cannot be matched here: use hosts'],
    ['host in lower case', { host: ['a.example.com'] }, `${FIELD}.host`, 'cannot be matched here: use hosts'],
    ['a pseudo-header', { ':authority': ['a.example.com'] }, `${FIELD}.:authority`, 'is a pseudo-header: use proxy.methods, proxy.listen_path or hosts'],
    ['a hop-by-hop header', { Connection: ['upgrade'] }, `${FIELD}.Connection`, 'is a hop-by-hop header: it describes the connection, not the request'],
    ['Upgrade', { upgrade: ['websocket'] }, `${FIELD}.upgrade`, 'is a hop-by-hop header: it describes the connection, not the request'],
    ['one name in two cases', { 'X-Canary': ['true'], 'x-canary': ['yes'] }, `${FIELD}.x-canary`, 'is listed twice (header names are case-insensitive)'],
  ])('rejects %s', (_name, matchHeaders, field, message) => {
    const err = errorOf(withHeaders(matchHeaders));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toBe(`${field} ${message}`);
    expect(err.field).toBe(field);
  });
});

describe('proxy.upstreams balancing least_conn and hash (hash_on)', () => {
  const FIELD = 'proxy.upstreams.hash_on';
  const upstreamsOf = (upstreams: object) => proxyOf({ proxy: { upstreams } }).upstreams;

  test.each([
    ['least_conn', { balancing: 'least_conn' }, { balancing: 'least_conn' }],
    ['least_conn in any case', { balancing: 'Least_Conn' }, { balancing: 'least_conn' }],
    [
      'hash on the client address: trust_forward_headers filled (false)',
      { balancing: 'hash', hash_on: { source: 'ip' } },
      { balancing: 'hash', hash_on: { source: 'ip', trust_forward_headers: false } },
    ],
    [
      'hash on the forwarded client address',
      { balancing: 'hash', hash_on: { source: 'ip', trust_forward_headers: true } },
      { balancing: 'hash', hash_on: { source: 'ip', trust_forward_headers: true } },
    ],
    [
      'hash on a header: its name lower-cased',
      { balancing: 'HASH', hash_on: { source: 'header', name: 'X-User' } },
      { balancing: 'hash', hash_on: { source: 'header', name: 'x-user' } },
    ],
    [
      'hash on a cookie: its name as written',
      { balancing: 'hash', hash_on: { source: 'cookie', name: 'Session' } },
      { balancing: 'hash', hash_on: { source: 'cookie', name: 'Session' } },
    ],
  ])('stores %s', (_name, upstreams, expected) => {
    expect(upstreamsOf(upstreams)).toEqual({ ...expected, targets: [{ target: 'http://localhost:9000', weight: 1 }] });
  });

  test('without hash_on an upstreams has no such member, so definitions keep the form they had before it existed', () => {
    expect(upstreamsOf({ balancing: 'weight' })).not.toHaveProperty('hash_on');
    expect(Object.keys(upstreamsOf({ balancing: 'least_conn' }))).toEqual(['balancing', 'targets']);
  });

  test('is idempotent', () => {
    const once = parseApiDefinition(withPatch({ proxy: { upstreams: { balancing: 'hash', hash_on: { source: 'header', name: 'X-User' } } } }));
    expect(parseApiDefinition(once)).toEqual(once);
  });

  test.each([
    ['hash without hash_on', { balancing: 'hash' }, FIELD, 'is required with balancing "hash"'],
    ['hash with a null hash_on', { balancing: 'hash', hash_on: null }, FIELD, 'is required with balancing "hash"'],
    ['hash_on with round robin', { balancing: 'roundrobin', hash_on: { source: 'ip' } }, FIELD, 'can be given only with balancing "hash"'],
    ['hash_on with least_conn', { balancing: 'least_conn', hash_on: { source: 'ip' } }, FIELD, 'can be given only with balancing "hash"'],
    ['hash_on not an object', { balancing: 'hash', hash_on: 'ip' }, FIELD, 'must be an object'],
    ['no source', { balancing: 'hash', hash_on: { name: 'x' } }, `${FIELD}.source`, 'must be "ip", "header" or "cookie"'],
    ['an unknown source', { balancing: 'hash', hash_on: { source: 'uri' } }, `${FIELD}.source`, 'must be "ip", "header" or "cookie"'],
    ['a header without its name', { balancing: 'hash', hash_on: { source: 'header' } }, `${FIELD}.name`, 'is required with source "header"'],
    ['a cookie without its name', { balancing: 'hash', hash_on: { source: 'cookie' } }, `${FIELD}.name`, 'is required with source "cookie"'],
    ['a header name with a space', { balancing: 'hash', hash_on: { source: 'header', name: 'X User' } }, `${FIELD}.name`, 'is not a valid header name'],
    ['a header name with CRLF', { balancing: 'hash', hash_on: { source: 'header', name: 'X\r\nY' } }, `${FIELD}.name`, 'is not a valid header name'],
    ['an empty cookie name', { balancing: 'hash', hash_on: { source: 'cookie', name: '' } }, `${FIELD}.name`, 'is not a valid cookie name'],
    ['a cookie name with "="', { balancing: 'hash', hash_on: { source: 'cookie', name: 'a=b' } }, `${FIELD}.name`, 'is not a valid cookie name'],
    ['a name too long', { balancing: 'hash', hash_on: { source: 'header', name: 'x'.repeat(257) } }, `${FIELD}.name`, 'must be at most 256 characters'],
    ['a name with source ip', { balancing: 'hash', hash_on: { source: 'ip', name: 'x' } }, `${FIELD}.name`, 'cannot be given with source "ip"'],
    [
      'trust_forward_headers with a header',
      { balancing: 'hash', hash_on: { source: 'header', name: 'x', trust_forward_headers: false } },
      `${FIELD}.trust_forward_headers`,
      'can be given only with source "ip"',
    ],
    [
      'trust_forward_headers not a boolean',
      { balancing: 'hash', hash_on: { source: 'ip', trust_forward_headers: 'yes' } },
      `${FIELD}.trust_forward_headers`,
      'must be a boolean',
    ],
  ])('rejects %s', (_name, upstreams, field, message) => {
    const err = errorOf(withPatch({ proxy: { upstreams } }));
    expect(err.code).toBe('VALIDATION_FAILED');
    expect(err.message).toBe(`${field} ${message}`);
    expect(err.field).toBe(field);
  });
});
