import { hashApiKey, importHashKey, legacyHashApiKey } from '#proto/api-key';
import type { GatehouseError } from '#proto/errors';
import { compilePlugins, type CompiledKeyAuth } from '#proto/plugins/index';
import { parseApiDefinition } from '#proto/definition/index';
import { apiKeyLookup } from '../auth/api-keys.js';
import { keyAuthRuntime } from './key-auth.js';
import { PluginExchange } from './pipeline.js';
import type { StageDeps } from './runtime.js';

const INSTALLATION_KEY = 'installation-key-of-32-bytes-or-more';
const KEYS = new Map([
  [hashApiKey('ann-key+/=0123456789', importHashKey(INSTALLATION_KEY)), 'ann'],
  [legacyHashApiKey('bob-key-0123456789'), 'bob'],
]);

function stage(config: unknown) {
  const def = parseApiDefinition({
    name: 'k',
    proxy: { listen_path: '/k/*', upstreams: { targets: [{ target: 'http://u' }] } },
    plugins: [{ name: 'key_auth', config }],
  });
  const compiled = compilePlugins(def.plugins)[0].config as CompiledKeyAuth;
  return keyAuthRuntime.stage(compiled, { apiKeyOwner: apiKeyLookup(KEYS, INSTALLATION_KEY), keyAuthGroups: new Map() } as unknown as StageDeps);
}

/** Runs the stage's request hook on a request with these raw headers and query: what goes upstream, or the refusal. */
function run(config: unknown, headers: string[], query = '') {
  const clientHeaders: Record<string, string> = {};
  const ex = {
    headers,
    query,
    consumer: null,
    addClientHeader: (name: string, value: string) => (clientHeaders[name] = value),
    authenticate: PluginExchange.prototype.authenticate,
  } as unknown as PluginExchange;
  try {
    stage(config).request!(ex);
  } catch (err) {
    return { refused: (err as GatehouseError).code, clientHeaders };
  }
  return { consumer: ex.consumer, headers: ex.headers, query: ex.query };
}

test('a percent-encoded key in the query is decoded before the lookup', () => {
  expect(run({}, [], `x=1&apikey=${encodeURIComponent('ann-key+/=0123456789')}`)).toEqual({
    consumer: 'ann',
    headers: [],
    query: `x=1&apikey=${encodeURIComponent('ann-key+/=0123456789')}`,
  });
});

test('a header wins over the query; among headers the key_names order decides; surrounding spaces are trimmed', () => {
  expect(run({}, ['apikey', 'bob-key-0123456789'], 'apikey=nobody-0123456789').consumer).toBe('bob');
  expect(run({ key_names: ['first', 'second'] }, ['Second', 'ann-key+/=0123456789', 'FIRST', ' bob-key-0123456789 ']).consumer).toBe('bob');
});

test('hide_credentials drops every header and query parameter named by key_names, and only those', () => {
  const res = run(
    { key_names: ['apikey', 'token'], hide_credentials: true },
    ['ApiKey', 'bob-key-0123456789', 'Token', 'other', 'Accept', '*/*'],
    'token=x&a=1&apikey=y',
  );
  expect(res).toEqual({ consumer: 'bob', headers: ['Accept', '*/*'], query: 'a=1' });
});

test('without hide_credentials the key is forwarded as sent', () => {
  expect(run({}, ['apikey', 'bob-key-0123456789'], 'a=1')).toEqual({ consumer: 'bob', headers: ['apikey', 'bob-key-0123456789'], query: 'a=1' });
});

test.each<[string, unknown, string[], string, string]>([
  ['no key at all', {}, [], '', 'KEY_MISSING'],
  ['an empty parameter', {}, [], 'apikey=', 'KEY_MISSING'],
  ['a parameter name in another case (query names are compared as written)', {}, [], 'APIKEY=bob-key-0123456789', 'KEY_MISSING'],
  ['a key in a header when key_in_header is false', { key_in_header: false }, ['apikey', 'bob-key-0123456789'], '', 'KEY_MISSING'],
  ['an unknown key', {}, ['apikey', 'bob-key-0123456788'], '', 'KEY_REJECTED'],
])('%s is refused (%s) with the challenge', (_row, config, headers, query, code) => {
  expect(run(config, headers, query)).toEqual({ refused: code, clientHeaders: { 'www-authenticate': 'Key realm="Restricted"' } });
});

describe('apiKeyLookup', () => {
  test('finds keyed and unkeyed hashes, and only under the installation key they were made with', () => {
    expect(apiKeyLookup(KEYS, INSTALLATION_KEY)('ann-key+/=0123456789')).toBe('ann');
    expect(apiKeyLookup(KEYS, INSTALLATION_KEY)('bob-key-0123456789')).toBe('bob');
    expect(apiKeyLookup(KEYS, 'another-installation-key-of-32-bytes')('ann-key+/=0123456789')).toBeUndefined();
    // The keyed digest presented as the key is no key.
    expect(apiKeyLookup(KEYS, INSTALLATION_KEY)([...KEYS.keys()][0]!)).toBeUndefined();
  });

  test('keyed hashes without the installation key are refused, not served unmatched', () => {
    expect(() => apiKeyLookup(KEYS, undefined)).toThrow('no key_auth_hash_key');
    expect(apiKeyLookup(new Map([[legacyHashApiKey('bob-key-0123456789'), 'bob']]), undefined)('bob-key-0123456789')).toBe('bob');
  });
});
