import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { parseApiDefinition, parseOAuthServer } from '../definition/index.js';
import { compileDefinitions } from '../compile/index.js';
import { applyChanges, indexConfig } from '../compile/incremental.js';
import { compilePlugins, parsePluginConfig } from './index.js';

const parse = (config: unknown) => parsePluginConfig('oauth2', config, ['plugins', 0, 'config']);
const refusal = (config: unknown) => gatehouseErrorOf(() => parse(config)).message;

test('scopes and claims_to_headers are stored only when given: an empty list or map is the same as none', () => {
  expect(parse({ server_name: 's' })).toEqual({ server_name: 's' });
  expect(parse({ server_name: 's', scopes: [], claims_to_headers: {} })).toEqual({ server_name: 's' });
  expect(
    parse({ server_name: 's', scopes: ['orders:read', 'orders:read', 'a/b'], claims_to_headers: { sub: 'X-User-Id', 'https://x.test/tenant': 'X-Tenant' } }),
  ).toEqual({
    server_name: 's',
    scopes: ['orders:read', 'a/b'],
    claims_to_headers: { sub: 'X-User-Id', 'https://x.test/tenant': 'X-Tenant' },
  });
});

test.each([
  ['a scope with a space', { scopes: ['a b'] }, 'plugins[0].config.scopes[0] must be a scope token (printable ASCII without space, " or \\)'],
  ['a scope with a quote (it would break the challenge)', { scopes: ['a"b'] }, 'plugins[0].config.scopes[0] must be a scope token'],
  ['an empty scope', { scopes: [''] }, 'plugins[0].config.scopes[0] must be a scope token'],
  ['33 scopes', { scopes: Array.from({ length: 33 }, (_, i) => `s${i}`) }, 'plugins[0].config.scopes must have at most 32 scopes'],
  ['a header name with a space', { claims_to_headers: { sub: 'X User' } }, 'plugins[0].config.claims_to_headers.sub is not a valid header name'],
  ['a header with CR LF', { claims_to_headers: { sub: 'X-A\r\nX-B' } }, 'plugins[0].config.claims_to_headers.sub is not a valid header name'],
  [
    'X-Forwarded-For',
    { claims_to_headers: { sub: 'X-Forwarded-For' } },
    'plugins[0].config.claims_to_headers.sub is set by the gateway and cannot carry a claim',
  ],
  [
    'X-Consumer-Username',
    { claims_to_headers: { sub: 'x-consumer-username' } },
    'plugins[0].config.claims_to_headers.sub is set by the gateway and cannot carry a claim',
  ],
  ['X-Request-Id', { claims_to_headers: { jti: 'X-Request-Id' } }, 'plugins[0].config.claims_to_headers.jti is set by the gateway'],
  ['Host', { claims_to_headers: { aud: 'Host' } }, 'plugins[0].config.claims_to_headers.aud is set by the gateway'],
  [
    'a hop-by-hop header',
    { claims_to_headers: { sub: 'Connection' } },
    'plugins[0].config.claims_to_headers.sub is a hop-by-hop header and cannot carry a claim',
  ],
  [
    'Authorization',
    { claims_to_headers: { sub: 'Authorization' } },
    "plugins[0].config.claims_to_headers.sub is the bearer token's own header and cannot carry a claim",
  ],
  [
    'one header for two claims',
    { claims_to_headers: { sub: 'X-User', email: 'x-user' } },
    'plugins[0].config.claims_to_headers.email names header x-user, which claim "sub" already sets',
  ],
  ['a claim name with a space', { claims_to_headers: { 'a b': 'X-A' } }, 'plugins[0].config.claims_to_headers.a b is not a claim name'],
  [
    '17 headers',
    { claims_to_headers: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`c${i}`, `X-C${i}`])) },
    'plugins[0].config.claims_to_headers must have at most 16 entries',
  ],
])('%s is refused, naming the field', (_row, config, message) => {
  expect(refusal({ server_name: 's', ...config })).toContain(message);
});

test('compile: scopes as listed, claim headers lower-cased in config order', () => {
  const [plugin] = compilePlugins([
    { name: 'oauth2', enabled: true, config: parse({ server_name: 's', scopes: ['a'], claims_to_headers: { sub: 'X-User-Id', email: 'X-Email' } }) },
  ]);
  expect(plugin.config).toEqual({
    serverName: 's',
    scopes: ['a'],
    claimHeaders: [
      ['sub', 'x-user-id'],
      ['email', 'x-email'],
    ],
  });
});

describe('scopes and claims_to_headers need a server that sees the token (not storage)', () => {
  const server = (strategy: object) =>
    parseOAuthServer({
      name: 'idp',
      oauth_endpoints: { token: { listen_path: '/idp/token', upstreams: { targets: [{ target: 'http://idp' }] } } },
      token_strategy: strategy,
    });
  const STORAGE = { name: 'storage' };
  const JWT = { name: 'jwt', settings: [{ alg: 'HS256', key: 'k' }] };
  const api = (config: object) =>
    parseApiDefinition({
      name: 'orders',
      proxy: { listen_path: '/orders/*', upstreams: { targets: [{ target: 'http://o' }] } },
      plugins: [{ name: 'oauth2', config: { server_name: 'idp', ...config } }],
    });

  test.each([
    ['scopes', { scopes: ['orders:read'] }],
    ['claims_to_headers', { claims_to_headers: { sub: 'X-User-Id' } }],
  ])('%s with a storage server: the API is refused naming the field', (field, config) => {
    const compiled = compileDefinitions({ apis: [api(config)], oauthServers: [server(STORAGE)] });
    expect(compiled.rejected.map((r) => [r.name, r.error.message])).toEqual([
      [
        'orders',
        `plugins[0].config.${field} needs an oauth server with the jwt or introspection strategy ("idp" is storage): a stored token carries no scopes or claims`,
      ],
    ]);
    expect(compileDefinitions({ apis: [api(config)], oauthServers: [server(JWT)] }).rejected).toEqual([]);
  });

  test('a jwt server turned storage under such an API is refused as the server’s change; without them it is accepted', () => {
    const index = indexConfig({ apis: [api({ scopes: ['orders:read'] })], oauthServers: [server(JWT)] });
    const err = gatehouseErrorOf(() => applyChanges(index, [{ kind: 'oauth-server', name: 'idp', def: server(STORAGE) }]));
    expect(err.message).toBe(
      'oauth-server "idp": token_strategy.name cannot be "storage" while the oauth2 plugin of api "orders" sets scopes: a stored token carries no scopes or claims',
    );
    const plain = indexConfig({ apis: [api({})], oauthServers: [server(JWT)] });
    expect(() => applyChanges(plain, [{ kind: 'oauth-server', name: 'idp', def: server(STORAGE) }])).not.toThrow();
  });
});
