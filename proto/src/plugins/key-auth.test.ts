import { gatehouseErrorOf } from '../../../test/helpers/gatehouse-error-of.js';
import { generateApiKey, hashApiKey, importHashKey, legacyHashApiKey, API_KEY_HASH_PATTERN } from '../api-key.js';
import { compileDefinitions } from '../compile/index.js';
import { applyChanges, indexConfig, indexRoutes } from '../compile/incremental.js';
import { parseApiDefinition, parseKeyAuthCredential } from '../definition/index.js';
import type { Definitions } from '../definition/types.js';
import { compilePlugins } from './index.js';

/** What openssl computes for the same key and installation key (the recipe in docs/kubernetes.md). */
const HMAC_VECTOR = 'hmac-sha256$0bhXkLNOa6g0QFgLbTYmIXiPKqwIbQSX_2994nhegO0';

const api = (config: unknown) =>
  parseApiDefinition({ name: 'k', proxy: { listen_path: '/k/*', upstreams: { targets: [{ target: 'http://u' }] } }, plugins: [{ name: 'key_auth', config }] });

describe('key_auth config', () => {
  test('defaults are filled and shown', () => {
    expect(api(undefined).plugins[0].config).toEqual({
      key_names: ['apikey'],
      key_in_header: true,
      key_in_query: true,
      hide_credentials: false,
      realm: 'Restricted',
    });
  });

  test('compiles to lower-cased header names, query names as written, and the Key challenge', () => {
    const [plugin] = compilePlugins(api({ key_names: ['X-Api-Key', 'token', 'x-api-key'], hide_credentials: true, realm: 'Payments' }).plugins);
    expect(plugin).toEqual({
      name: 'key_auth',
      config: {
        headerNames: ['x-api-key', 'token'],
        queryNames: ['X-Api-Key', 'token', 'x-api-key'],
        hideCredentials: true,
        challenge: 'Key realm="Payments"',
      },
    });
    expect(Object.isFrozen(plugin.config)).toBe(true);
  });

  test('key_in_header / key_in_query false leave that source out', () => {
    expect(compilePlugins(api({ key_in_header: false }).plugins)[0].config).toMatchObject({ headerNames: [], queryNames: ['apikey'] });
    expect(compilePlugins(api({ key_in_query: false }).plugins)[0].config).toMatchObject({ headerNames: ['apikey'], queryNames: [] });
  });

  test.each([
    [{ key_names: [] }, 'plugins[0].config.key_names must not be empty'],
    [{ key_names: ['api key'] }, 'plugins[0].config.key_names[0] is not a valid header name'],
    [{ key_names: [''] }, 'plugins[0].config.key_names[0] must not be empty'],
    [{ key_in_header: false, key_in_query: false }, 'plugins[0].config.key_in_header must not be false when key_in_query is false too'],
    [{ hide_credentials: 'yes' }, 'plugins[0].config.hide_credentials'],
    [{ realm: 'a\\b' }, 'plugins[0].config.realm must be printable ASCII'],
  ])('%j is refused naming the field', (config, message) => {
    expect(gatehouseErrorOf(() => api(config)).message).toContain(message);
  });
});

describe('API keys', () => {
  test('a generated key is 32 random bytes in base64url, and each is new', () => {
    const key = generateApiKey();
    expect(key).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(key, 'base64url')).toHaveLength(32);
    expect(generateApiKey()).not.toBe(key);
  });

  test('the stored form is HMAC-SHA256 under the installation key, deterministic, never the key', () => {
    const installation = importHashKey('i'.repeat(32));
    const digest = hashApiKey('my-key-0123456789', installation);
    // printf %s my-key-0123456789 | openssl dgst -sha256 -mac HMAC -macopt key:iii…(32) -binary | basenc --base64url | tr -d =
    expect(digest).toBe(HMAC_VECTOR);
    expect(digest).toMatch(API_KEY_HASH_PATTERN);
    expect(hashApiKey('my-key-0123456789', installation)).toBe(digest);
    expect(hashApiKey('my-key-0123456789', importHashKey('j'.repeat(32)))).not.toBe(digest);
    expect(hashApiKey('my-key-0123456780', installation)).not.toBe(digest);
    expect(parseKeyAuthCredential({ username: 'ann', key_hash: digest }).key_hash).toBe(digest);
  });

  test('an installation key shorter than 32 bytes is refused', () => {
    expect(() => importHashKey('i'.repeat(31))).toThrow('must be 32 to 1024 bytes, got 31');
  });

  test('the earlier unkeyed form is the SHA-256 digest, deterministic, never the key', () => {
    const digest = legacyHashApiKey('my-key-0123456789');
    // sha256("my-key-0123456789") = 2d71bac2…adbb28, in base64url.
    expect(digest).toBe('sha256$LXG6wkeFhZwVEoCT78j9RnwHqXYfRbeKH9QbOeituyg');
    expect(digest).toMatch(API_KEY_HASH_PATTERN);
    expect(legacyHashApiKey('my-key-0123456789')).toBe(digest);
    expect(legacyHashApiKey('my-key-0123456780')).not.toBe(digest);
    expect(digest).not.toContain('my-key');
  });

  test('a stored credential must hold a digest, not a key', () => {
    expect(parseKeyAuthCredential({ username: 'ann', key_hash: legacyHashApiKey('k'.repeat(20)) })).toEqual({
      username: 'ann',
      key_hash: legacyHashApiKey('k'.repeat(20)),
    });
    expect(gatehouseErrorOf(() => parseKeyAuthCredential({ username: 'ann', key_hash: 'k'.repeat(20) })).message).toBe(
      'key_hash must be a keyed digest "hmac-sha256$<43 base64url characters>" (or the earlier unkeyed "sha256$<43 base64url characters>")',
    );
    expect(gatehouseErrorOf(() => parseKeyAuthCredential({ username: 'a:b', key_hash: legacyHashApiKey('x') })).message).toContain(
      'username must be 1-128 characters',
    );
  });
});

describe('key_auth credentials compiled', () => {
  const defs = (credentials: Array<[string, string]>): Definitions => ({
    apis: [],
    oauthServers: [],
    keyAuthCredentials: credentials.map(([username, key]) => ({ username, key_hash: legacyHashApiKey(key) })),
  });

  test('the data plane looks keys up by digest', () => {
    const compiled = compileDefinitions(
      defs([
        ['ann', 'ann-key-0123456789'],
        ['bob', 'bob-key-0123456789'],
      ]),
    );
    expect(compiled.rejected).toEqual([]);
    expect([...compiled.apiKeys]).toEqual([
      [legacyHashApiKey('ann-key-0123456789'), 'ann'],
      [legacyHashApiKey('bob-key-0123456789'), 'bob'],
    ]);
    expect([...indexRoutes(indexConfig(defs([['ann', 'ann-key-0123456789']]))).apiKeys]).toEqual([[legacyHashApiKey('ann-key-0123456789'), 'ann']]);
  });

  test('two credentials with the same key: the later one is refused with API_KEY_TAKEN, by the whole compile and the index alike', () => {
    const both = defs([
      ['ann', 'shared-key-0123456789'],
      ['bob', 'shared-key-0123456789'],
    ]);
    const compiled = compileDefinitions(both);
    expect(compiled.rejected.map((r) => [r.kind, r.name, r.error.code, r.error.message])).toEqual([
      ['key-auth-credential', 'bob', 'API_KEY_TAKEN', 'api key is already registered (by another key_auth credential)'],
    ]);
    expect([...compiled.apiKeys.values()]).toEqual(['ann']);
    const index = indexConfig(defs([['ann', 'shared-key-0123456789']]));
    const change = { kind: 'key-auth-credential' as const, name: 'bob', def: both.keyAuthCredentials![1] };
    expect(gatehouseErrorOf(() => applyChanges(index, [change])).code).toBe('API_KEY_TAKEN');
  });

  test('two credentials may swap keys in one change; a removed credential frees its key', () => {
    const index = indexConfig(
      defs([
        ['ann', 'key-one-0123456789'],
        ['bob', 'key-two-0123456789'],
      ]),
    );
    const swapped = applyChanges(index, [
      { kind: 'key-auth-credential', name: 'ann', def: { username: 'ann', key_hash: legacyHashApiKey('key-two-0123456789') } },
      { kind: 'key-auth-credential', name: 'bob', def: { username: 'bob', key_hash: legacyHashApiKey('key-one-0123456789') } },
    ]);
    expect(indexRoutes(swapped).apiKeys.get(legacyHashApiKey('key-one-0123456789'))).toBe('bob');
    const removed = applyChanges(index, [{ kind: 'key-auth-credential', name: 'ann' }]);
    const reused = applyChanges(removed, [
      { kind: 'key-auth-credential', name: 'cy', def: { username: 'cy', key_hash: legacyHashApiKey('key-one-0123456789') } },
    ]);
    expect(indexRoutes(reused).apiKeys.get(legacyHashApiKey('key-one-0123456789'))).toBe('cy');
  });
});
