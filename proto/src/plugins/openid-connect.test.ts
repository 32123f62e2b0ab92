import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { compilePlugins, parsePluginConfig } from './index.js';
import type { CompiledOpenidConnect } from './openid-connect.js';

const REQUIRED = { issuer: 'https://idp.example.com/realms/main', client_id: 'app', client_secret: 'client secret 1', cookie_secret: 'c'.repeat(32) };
const parse = (config: unknown) => parsePluginConfig('openid_connect', config, ['plugins', 0, 'config']);
const refusal = (config: Record<string, unknown>) => gatehouseErrorOf(() => parse({ ...REQUIRED, ...config })).message;
const compiled = (config: Record<string, unknown> = {}) =>
  compilePlugins([{ name: 'openid_connect', enabled: true, config: parse({ ...REQUIRED, ...config }) }])[0]!.config as CompiledOpenidConnect;

test('defaults are filled and shown; claims_to_headers stored only when given; openid always asked first', () => {
  expect(parse(REQUIRED)).toEqual({
    ...REQUIRED,
    allow_http: false,
    redirect_path: '/callback',
    logout_path: '/logout',
    post_logout_redirect: '/',
    scopes: ['openid'],
    cookie_name: 'gatehouse_oidc',
    session_ttl: '1h',
    timeout: '5s',
    user_header: 'X-Authenticated-User',
  });
  expect(JSON.stringify(parse({ ...REQUIRED, claims_to_headers: {} }))).not.toContain('claims_to_headers');
  expect(parse({ ...REQUIRED, scopes: ['email', 'openid', 'email'] }).scopes).toEqual(['openid', 'email']);
});

test('compile: discovery under the issuer, client_secret_basic form-encoded, one key for one cookie_secret, frozen', () => {
  const c = compiled({ issuer: 'https://idp.example.com/realms/main/', client_id: 'my:app', client_secret: 'a:b c', session_ttl: '2h' });
  expect(`${c.discoveryOrigin}${c.discoveryPath}`).toBe('https://idp.example.com/realms/main/.well-known/openid-configuration');
  expect(c.clientAuthorization).toBe(`Basic ${Buffer.from('my%3Aapp:a%3Ab+c').toString('base64')}`);
  expect(c.sessionTtlS).toBe(7200);
  expect(c.cookieKey.symmetricKeySize).toBe(32);
  expect(c.cookieKey.equals(compiled().cookieKey)).toBe(true);
  expect(c.cookieKey.equals(compiled({ cookie_secret: 'd'.repeat(32) }).cookieKey)).toBe(false);
  expect(Object.isFrozen(c)).toBe(true);
});

test.each<[string, Record<string, unknown>, string]>([
  ['no issuer', { issuer: undefined }, 'plugins[0].config.issuer is required'],
  [
    'an http issuer off loopback',
    { issuer: 'http://idp.example.com' },
    'plugins[0].config.issuer must be https (http only for a loopback host, or with allow_http: true)',
  ],
  ['an issuer with a query', { issuer: 'https://idp.example.com/?a=1' }, 'plugins[0].config.issuer must not contain a query or fragment'],
  ['no client_secret', { client_secret: undefined }, 'plugins[0].config.client_secret is required'],
  ['a cookie_secret under 32 characters', { cookie_secret: 'x'.repeat(31) }, 'plugins[0].config.cookie_secret must be at least 32 characters'],
  ['a redirect_path of another host', { redirect_path: '//evil.example' }, 'plugins[0].config.redirect_path must be a path starting with a single /'],
  [
    'a post_logout_redirect URL',
    { post_logout_redirect: 'https://evil.example/' },
    'plugins[0].config.post_logout_redirect must be a path starting with a single /',
  ],
  ['a post_logout_redirect with a backslash', { post_logout_redirect: '/\\evil.example' }, 'plugins[0].config.post_logout_redirect must be a path'],
  ['the same redirect and logout paths', { logout_path: '/callback' }, 'plugins[0].config.logout_path must differ from redirect_path'],
  ['a cookie name with a space', { cookie_name: 'my cookie' }, 'plugins[0].config.cookie_name must be a cookie name'],
  ['a session_ttl over 24h', { session_ttl: '25h' }, 'plugins[0].config.session_ttl must be a duration from "1m" to "24h"'],
  ['Cookie as user_header', { user_header: 'Cookie' }, 'plugins[0].config.user_header is a credential header and cannot carry the user'],
  [
    'a claim header that is user_header',
    { claims_to_headers: { email: 'x-authenticated-user' } },
    'plugins[0].config.claims_to_headers must not name user_header',
  ],
])('%s is refused, naming the field', (_row, config, message) => {
  expect(refusal(config)).toContain(message);
});
