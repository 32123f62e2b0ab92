import { mergePatch, parseOAuthServer } from './index.js';
import { proxyDefaults } from '../../../test/helpers/proxy-defaults.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';

const ENDPOINT = { listen_path: '/auth/token', upstreams: { targets: [{ target: 'http://auth:9000/token' }] } };
const VALID = {
  name: 'local',
  oauth_endpoints: { token: ENDPOINT },
  token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'secret' }] },
};
const withPatch = (patch: object) => mergePatch(VALID, patch);
const ALGS = 'HS256, HS384, HS512, RS256, RS384, RS512, ES256, ES384';

const errorOf = (raw: unknown) => gatehouseErrorOf(() => parseOAuthServer(raw));

test.each([
  ['not an object', [1], 'definition must be a JSON object'],
  ['name missing', { oauth_endpoints: VALID.oauth_endpoints }, 'name is required'],
  ['name invalid', withPatch({ name: 'a:b' }), 'name must be 1-128 characters of A-Z a-z 0-9 . _ -'],
  ['name a dot segment', withPatch({ name: '..' }), 'name must not be "." or ".."'],
  ['oauth_endpoints missing', withPatch({ oauth_endpoints: null }), 'oauth_endpoints.token is required'],
  ['token missing', withPatch({ oauth_endpoints: { token: null, authorize: ENDPOINT } }), 'oauth_endpoints.token is required'],
  ['token listen_path missing', withPatch({ oauth_endpoints: { token: { listen_path: null } } }), 'oauth_endpoints.token.listen_path is required'],
  ['token listen_path empty', withPatch({ oauth_endpoints: { token: { listen_path: '' } } }), 'oauth_endpoints.token.listen_path is required'],
  [
    'token listen_path without slash',
    withPatch({ oauth_endpoints: { token: { listen_path: 'token' } } }),
    'oauth_endpoints.token.listen_path must start with "/"',
  ],
  ['token targets missing', withPatch({ oauth_endpoints: { token: { upstreams: null } } }), 'oauth_endpoints.token.upstreams.targets is required'],
  ['token method invalid', withPatch({ oauth_endpoints: { token: { methods: ['PO ST'] } } }), 'oauth_endpoints.token.methods[0] is not a valid HTTP method'],
  [
    'token timeout invalid',
    withPatch({ oauth_endpoints: { token: { forwarding_timeouts: { dial_timeout: '-1s' } } } }),
    'oauth_endpoints.token.forwarding_timeouts.dial_timeout is not a valid duration',
  ],
  [
    'authorize listen_path missing',
    withPatch({ oauth_endpoints: { authorize: { upstreams: ENDPOINT.upstreams } } }),
    'oauth_endpoints.authorize.listen_path is required',
  ],
  [
    'revoke balancing invalid',
    withPatch({ oauth_endpoints: { revoke: { ...ENDPOINT, upstreams: { balancing: 'x', targets: [{ target: 'http://a' }] } } } }),
    'oauth_endpoints.revoke.upstreams.balancing must be "roundrobin" (alias "rr"), "weight", "least_conn" or "hash"',
  ],
  ['token_strategy missing', withPatch({ token_strategy: null }), 'token_strategy is required'],
  ['strategy name missing', withPatch({ token_strategy: { name: null } }), 'token_strategy.name is required'],
  ['strategy name unknown', withPatch({ token_strategy: { name: 'opaque' } }), 'token_strategy.name must be "jwt", "storage" or "introspection"'],
  ['leeway negative', withPatch({ token_strategy: { leeway: -1 } }), 'token_strategy.leeway must be an integer from 0 to 3600'],
  ['leeway too big', withPatch({ token_strategy: { leeway: 3601 } }), 'token_strategy.leeway must be an integer from 0 to 3600'],
  ['leeway fractional', withPatch({ token_strategy: { leeway: 1.5 } }), 'token_strategy.leeway must be an integer from 0 to 3600'],
  ['jwt settings missing', withPatch({ token_strategy: { settings: null } }), 'token_strategy.settings is required'],
  ['jwt settings empty', withPatch({ token_strategy: { settings: [] } }), 'token_strategy.settings must not be empty'],
  ['jwt settings a string', withPatch({ token_strategy: { settings: 'secret' } }), 'token_strategy.settings must be an array'],
  ['jwt alg unsupported', withPatch({ token_strategy: { settings: [{ alg: 'none', key: 'k' }] } }), `token_strategy.settings[0].alg must be one of ${ALGS}`],
  ['jwt alg missing', withPatch({ token_strategy: { settings: [{ alg: 'HS256', key: 'k' }, { key: 'k' }] } }), 'token_strategy.settings[1].alg is required'],
  ['jwt key missing', withPatch({ token_strategy: { settings: [{ alg: 'HS256' }] } }), 'token_strategy.settings[0].key is required'],
  ['jwt key empty', withPatch({ token_strategy: { settings: [{ alg: 'HS256', key: '' }] } }), 'token_strategy.settings[0].key is required'],
  ['jwt legacy secret empty', withPatch({ token_strategy: { settings: { secret: '' } } }), 'token_strategy.settings[0].key is required'],
  ['jwks_uri empty', withPatch({ token_strategy: { settings: { jwks_uri: '' } } }), 'token_strategy.settings.jwks_uri is required'],
  ['jwks_uri a number', withPatch({ token_strategy: { settings: { jwks_uri: 5 } } }), 'token_strategy.settings.jwks_uri must be a string'],
  [
    'jwks_uri not a URL',
    withPatch({ token_strategy: { settings: { jwks_uri: 'idp/jwks' } } }),
    'token_strategy.settings.jwks_uri must be an absolute http(s) URL',
  ],
  [
    'jwks_uri ftp',
    withPatch({ token_strategy: { settings: { jwks_uri: 'ftp://idp/jwks' } } }),
    'token_strategy.settings.jwks_uri must be an absolute http(s) URL',
  ],
  [
    'jwks_uri http to a remote host',
    withPatch({ token_strategy: { settings: { jwks_uri: 'http://idp.example/jwks' } } }),
    'token_strategy.settings.jwks_uri must be https (http only for a loopback host, or with allow_http: true)',
  ],
  [
    'jwks_uri with credentials',
    withPatch({ token_strategy: { settings: { jwks_uri: 'https://u:p@idp.example/jwks' } } }),
    'token_strategy.settings.jwks_uri must not contain credentials',
  ],
  [
    'jwks_uri with a fragment',
    withPatch({ token_strategy: { settings: { jwks_uri: 'https://idp.example/jwks#x' } } }),
    'token_strategy.settings.jwks_uri must not contain a fragment',
  ],
  [
    'jwks_uri too long',
    withPatch({ token_strategy: { settings: { jwks_uri: `https://idp.example/${'a'.repeat(2048)}` } } }),
    'token_strategy.settings.jwks_uri must be at most 2048 characters',
  ],
  [
    'jwks algs with HS256',
    withPatch({ token_strategy: { settings: { jwks_uri: 'https://i/j', algs: ['RS256', 'HS256'] } } }),
    'token_strategy.settings.algs[1] must be one of RS256, RS384, RS512, ES256, ES384 (a JWKS holds public keys only)',
  ],
  [
    'jwks algs with none',
    withPatch({ token_strategy: { settings: { jwks_uri: 'https://i/j', algs: ['none'] } } }),
    'token_strategy.settings.algs[0] must be one of RS256, RS384, RS512, ES256, ES384 (a JWKS holds public keys only)',
  ],
  ['jwks algs empty', withPatch({ token_strategy: { settings: { jwks_uri: 'https://i/j', algs: [] } } }), 'token_strategy.settings.algs must not be empty'],
  [
    'jwks cache_ttl too long',
    withPatch({ token_strategy: { settings: { jwks_uri: 'https://i/j', cache_ttl: '25h' } } }),
    'token_strategy.settings.cache_ttl must be a duration from "1s" to "24h"',
  ],
  [
    'jwks cooldown under a second',
    withPatch({ token_strategy: { settings: { jwks_uri: 'https://i/j', cooldown: '500ms' } } }),
    'token_strategy.settings.cooldown must be a duration from "1s" to "1h"',
  ],
  [
    'jwks timeout a number',
    withPatch({ token_strategy: { settings: { jwks_uri: 'https://i/j', timeout: 2 } } }),
    'token_strategy.settings.timeout must be a duration from "1ms" to "60s"',
  ],
  [
    'jwks max_stale under cache_ttl',
    withPatch({ token_strategy: { settings: { jwks_uri: 'https://i/j', cache_ttl: '10m', max_stale: '5m' } } }),
    'token_strategy.settings.max_stale must not be shorter than cache_ttl',
  ],
  [
    'jwks allow_http a string',
    withPatch({ token_strategy: { settings: { jwks_uri: 'https://i/j', allow_http: 'yes' } } }),
    'token_strategy.settings.allow_http must be a boolean',
  ],
  [
    'storage default_ttl zero',
    withPatch({ token_strategy: { name: 'storage', settings: { default_ttl: 0 } } }),
    'token_strategy.settings.default_ttl must be a positive integer (seconds)',
  ],
  [
    'storage default_ttl a string',
    withPatch({ token_strategy: { name: 'storage', settings: { default_ttl: '60' } } }),
    'token_strategy.settings.default_ttl must be a positive integer (seconds)',
  ],
  ['storage settings a string', withPatch({ token_strategy: { name: 'storage', settings: 'x' } }), 'token_strategy.settings must be an object'],
  ['issuer empty', withPatch({ token_strategy: { issuer: '' } }), 'token_strategy.issuer must not be empty'],
  ['issuer with a newline', withPatch({ token_strategy: { issuer: 'https://a\n' } }), 'token_strategy.issuer must not contain control characters'],
  ['issuer not a string', withPatch({ token_strategy: { issuer: 7 } }), 'token_strategy.issuer must be a string'],
  ['issuer too long', withPatch({ token_strategy: { issuer: 'i'.repeat(1025) } }), 'token_strategy.issuer must be at most 1024 characters'],
  ['audiences a string', withPatch({ token_strategy: { audiences: 'orders' } }), 'token_strategy.audiences must be an array'],
  ['an empty audience', withPatch({ token_strategy: { audiences: ['orders', ''] } }), 'token_strategy.audiences[1] must not be empty'],
  [
    '17 audiences',
    withPatch({ token_strategy: { audiences: Array.from({ length: 17 }, (_, i) => `a${i}`) } }),
    'token_strategy.audiences must have at most 16 entries',
  ],
  [
    'issuer with storage',
    withPatch({ token_strategy: { name: 'storage', settings: {}, issuer: 'https://idp' } }),
    'token_strategy.issuer is only checked by the jwt and introspection strategies',
  ],
  [
    'audiences with storage',
    withPatch({ token_strategy: { name: 'storage', settings: {}, audiences: ['a'] } }),
    'token_strategy.audiences is only checked by the jwt and introspection strategies',
  ],
])('rejects %s', (_name, raw, message) => {
  const err = errorOf(raw);
  expect(err.code).toBe('VALIDATION_FAILED');
  expect(err.message).toBe(message);
  expect(err.field).toBe(message.startsWith('definition ') ? undefined : message.split(' ')[0]);
});

const DEFAULTED_ENDPOINT = {
  listen_path: '/auth/token',
  upstreams: { balancing: 'roundrobin', targets: [{ target: 'http://auth:9000/token', weight: 1 }] },
  ...proxyDefaults(),
};

test('issuer and audiences are stored only when given ([] is none), audiences deduplicated', () => {
  expect(parseOAuthServer(VALID).token_strategy).toEqual({ name: 'jwt', settings: [{ alg: 'HS256', key: 'secret' }], leeway: 0 });
  expect(parseOAuthServer(withPatch({ token_strategy: { audiences: [] } })).token_strategy).not.toHaveProperty('audiences');
  expect(parseOAuthServer(withPatch({ token_strategy: { issuer: 'https://idp.test/', audiences: ['orders', 'billing', 'orders'] } })).token_strategy).toEqual({
    name: 'jwt',
    settings: [{ alg: 'HS256', key: 'secret' }],
    leeway: 0,
    issuer: 'https://idp.test/',
    audiences: ['orders', 'billing'],
  });
});

test('fills endpoint defaults exactly like an API proxy, and leeway 0', () => {
  expect(parseOAuthServer(VALID)).toEqual({
    name: 'local',
    oauth_endpoints: { token: DEFAULTED_ENDPOINT },
    token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'secret' }], leeway: 0 },
  });
});

test.each([
  ['legacy object form', { secret: 'k1' }, [{ alg: 'HS256', key: 'k1' }]],
  ['legacy array element', [{ secret: 'k1' }], [{ alg: 'HS256', key: 'k1' }]],
  ['legacy element with alg', [{ alg: 'HS512', secret: 'k1' }], [{ alg: 'HS512', key: 'k1' }]],
  [
    'rotation: several keys kept in order',
    [{ alg: 'HS256', key: 'new' }, { secret: 'old' }],
    [
      { alg: 'HS256', key: 'new' },
      { alg: 'HS256', key: 'old' },
    ],
  ],
  ['extra members stripped', [{ alg: 'RS256', key: 'PEM', kid: 'x' }], [{ alg: 'RS256', key: 'PEM' }]],
])('jwt settings: %s', (_name, settings, expected) => {
  const server = parseOAuthServer({ ...VALID, token_strategy: { name: 'jwt', settings, leeway: 30 } });
  expect(server.token_strategy).toEqual({ name: 'jwt', settings: expected, leeway: 30 });
});

const JWKS_DEFAULTS = {
  algs: ['RS256', 'RS384', 'RS512', 'ES256', 'ES384'],
  cache_ttl: '5m',
  timeout: '2s',
  cooldown: '30s',
  max_stale: '24h',
  allow_http: false,
};

test.each([
  [
    'https, defaults filled',
    { jwks_uri: 'https://idp.example/.well-known/jwks.json' },
    { jwks_uri: 'https://idp.example/.well-known/jwks.json', ...JWKS_DEFAULTS },
  ],
  ['http to loopback', { jwks_uri: 'http://127.0.0.1:8080/jwks' }, { jwks_uri: 'http://127.0.0.1:8080/jwks', ...JWKS_DEFAULTS }],
  ['http to [::1] and localhost', { jwks_uri: 'http://localhost/jwks' }, { jwks_uri: 'http://localhost/jwks', ...JWKS_DEFAULTS }],
  [
    'http elsewhere with allow_http',
    { jwks_uri: 'http://idp:80/jwks', allow_http: true },
    { jwks_uri: 'http://idp:80/jwks', ...JWKS_DEFAULTS, allow_http: true },
  ],
  [
    'every setting, algs deduplicated, unknown members stripped',
    { jwks_uri: 'https://i/j', algs: ['ES256', 'ES256'], cache_ttl: '1m', timeout: '500ms', cooldown: '5s', max_stale: '1h', key: 'ignored' },
    { jwks_uri: 'https://i/j', algs: ['ES256'], cache_ttl: '1m', timeout: '500ms', cooldown: '5s', max_stale: '1h', allow_http: false },
  ],
])('jwt JWKS settings: %s', (_name, settings, expected) => {
  const server = parseOAuthServer({ ...VALID, token_strategy: { name: 'jwt', settings } });
  expect(server.token_strategy).toEqual({ name: 'jwt', settings: expected, leeway: 0 });
  expect(parseOAuthServer(server)).toEqual(server);
});

test.each([
  ['absent', undefined, {}],
  ['empty array (seed form)', [], {}],
  ['object with default_ttl', { default_ttl: 3600 }, { default_ttl: 3600 }],
  ['array with one object', [{ default_ttl: 60 }], { default_ttl: 60 }],
  ['empty object', {}, {}],
])('storage settings: %s', (_name, settings, expected) => {
  const server = parseOAuthServer({ ...VALID, token_strategy: { name: 'storage', settings } });
  expect(server.token_strategy).toEqual({ name: 'storage', settings: expected, leeway: 0 });
});

test('optional endpoints are normalised and proxy.hosts on an endpoint is ignored', () => {
  const server = parseOAuthServer(withPatch({ oauth_endpoints: { revoke: { ...ENDPOINT, hosts: ['a.com'], methods: ['post'] }, introspect: null } }));
  expect(server.oauth_endpoints.revoke).toEqual({ ...DEFAULTED_ENDPOINT, methods: ['POST'] });
  expect(server.oauth_endpoints).not.toHaveProperty('introspect');
  expect(server.oauth_endpoints).not.toHaveProperty('authorize');
});

test('strips unknown members (Janus-style server)', () => {
  const server = parseOAuthServer({ ...VALID, cors_meta: { enabled: true }, rate_limit: {}, client_endpoints: {} });
  expect(Object.keys(server).sort()).toEqual(['name', 'oauth_endpoints', 'token_strategy']);
});

test('is idempotent', () => {
  const once = parseOAuthServer(withPatch({ token_strategy: { settings: { secret: 's' }, leeway: 5 } }));
  expect(parseOAuthServer(once)).toEqual(once);
  const storage = parseOAuthServer(withPatch({ token_strategy: { name: 'storage', settings: [{ default_ttl: 9 }] } }));
  expect(parseOAuthServer(storage)).toEqual(storage);
});
