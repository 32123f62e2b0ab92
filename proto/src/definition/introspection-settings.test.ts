import { parseOAuthServer } from './index.js';
import { compileOAuthServer } from '../compile/index.js';
import { fromSnapshotMessage, toSnapshotMessage } from '../snapshot/codec.js';
import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';

const endpoint = (target: string) => ({ listen_path: '/auth/x', upstreams: { targets: [{ target }] } });
const server = (settings: unknown, endpoints: object = { introspect: endpoint('http://auth:9000/introspect?realm=a') }) => ({
  name: 'intro',
  oauth_endpoints: { token: endpoint('http://auth:9000/token'), ...endpoints },
  token_strategy: { name: 'introspection', ...(settings === undefined ? {} : { settings }) },
});

test('defaults are filled and stored; optional settings are left out', () => {
  expect(parseOAuthServer(server(undefined)).token_strategy).toEqual({
    name: 'introspection',
    settings: { use_auth_header: false, auth_header_type: 'Bearer', client_auth: 'basic', timeout: '2s', cache_ttl: 300 },
    leeway: 0,
  });
});

test('the snapshot codec carries every setting and gives back the stored definition', () => {
  const def = parseOAuthServer(
    server({ token_type_hint: 'access_token', client_id: 'gw', client_secret: 's e&cret', client_auth: 'post', timeout: '500ms', cache_ttl: 0 }),
  );
  const message = toSnapshotMessage(1, { apis: [], oauthServers: [def] });
  expect(fromSnapshotMessage(message).defs.oauthServers[0]).toEqual(def);
  const jwt = parseOAuthServer({ ...server(undefined), token_strategy: { name: 'jwt', settings: [{ alg: 'HS256', key: 'k' }] } });
  expect(JSON.stringify(toSnapshotMessage(1, { apis: [], oauthServers: [jwt] }))).not.toContain('introspection');
});

test('compiled: targets, timeouts, client_secret_basic encoded once, form tail, a cache key that follows the settings', () => {
  const basic = compileOAuthServer(parseOAuthServer(server({ client_id: 'g w', client_secret: 'p:ss', token_type_hint: 'access_token' }))).introspection!;
  expect(basic).toMatchObject({
    targets: [{ origin: 'http://auth:9000', path: '/introspect?realm=a' }],
    timeoutMs: 2000,
    cacheTtl: 300,
    authScheme: null,
    formTail: '&token_type_hint=access_token',
  });
  expect(Buffer.from(basic.headers.authorization!.slice('Basic '.length), 'base64').toString()).toBe('g+w:p%3Ass');
  const post = compileOAuthServer(parseOAuthServer(server({ client_id: 'gw', client_secret: 's', client_auth: 'post', use_auth_header: true }))).introspection!;
  expect(post).toMatchObject({ authScheme: 'Bearer', formTail: '&client_id=gw&client_secret=s' });
  expect(post.headers.authorization).toBeUndefined();
  expect(post.cacheKey).not.toBe(basic.cacheKey);
  expect(
    compileOAuthServer(parseOAuthServer(server({ client_id: 'g w', client_secret: 'p:ss', token_type_hint: 'access_token' }))).introspection!.cacheKey,
  ).toBe(basic.cacheKey);
});

test.each([
  ['introspect endpoint missing', server({}, {}), 'oauth_endpoints.introspect is required when token_strategy.name is "introspection"'],
  [
    'placeholder in an introspect target',
    server({}, { introspect: { listen_path: '/i/{x}', upstreams: { targets: [{ target: 'http://{x}:9000/i' }] } } }),
    'oauth_endpoints.introspect.upstreams.targets[0].target must not contain placeholders when token_strategy.name is "introspection"',
  ],
  ['cache_ttl negative', server({ cache_ttl: -1 }), 'token_strategy.settings.cache_ttl must be an integer from 0 to 86400 (seconds)'],
  ['timeout junk', server({ timeout: 'soon' }), 'token_strategy.settings.timeout must be a duration from "1ms" to "60s"'],
  ['timeout too long', server({ timeout: '2m' }), 'token_strategy.settings.timeout must be a duration from "1ms" to "60s"'],
  ['client_auth unknown', server({ client_id: 'a', client_auth: 'jwt' }), 'token_strategy.settings.client_auth must be "basic" or "post"'],
  ['secret without id', server({ client_secret: 's' }), 'token_strategy.settings.client_id is required with client_secret'],
  [
    'Basic client auth with use_auth_header',
    server({ client_id: 'a', use_auth_header: true }),
    'token_strategy.settings.client_auth must be "post" when use_auth_header is true (the token takes the Authorization header)',
  ],
  [
    'auth_header_type with a space',
    server({ auth_header_type: 'Bear er' }),
    'token_strategy.settings.auth_header_type must be an authentication scheme such as "Bearer"',
  ],
  ['use_auth_header not a boolean', server({ use_auth_header: 'yes' }), 'token_strategy.settings.use_auth_header must be a boolean'],
])('refuses %s', (_row, raw, message) => {
  expect(gatehouseErrorOf(() => parseOAuthServer(raw)).message).toBe(message);
});
