import { z } from 'zod';
import { PLUGINS } from '../plugins/index.js';
import { parseApiDefinition } from './api-schema.js';
import { credentialSchema } from './basic-auth-credential-schema.js';
import { keyAuthCredentialSchema } from './key-auth-credential-schema.js';
import { introspectionSettingsSchema, jwtSettingsSchema, parseOAuthServer, serverSchema } from './oauth-server-schema.js';
import { keepRedactedSecrets, REDACTED, redactSecrets, refuseRedacted, SECRET_FIELDS, secretLocations } from './secret-fields.js';

const target = { targets: [{ target: 'http://127.0.0.1:9000' }] };
const RSA_PUBLIC = '-----BEGIN PUBLIC KEY-----\nMFwwDQYJKoZIhvcNAQEBBQADSwAwSAJBAK\n-----END PUBLIC KEY-----';

const oidc = (client_secret: string, cookie_secret: string) => ({
  name: 'openid_connect',
  config: { issuer: 'https://idp.example', client_id: 'gw', client_secret, cookie_secret },
});
const api = (plugins: unknown[]) => parseApiDefinition({ name: 'app', proxy: { listen_path: '/app/*', upstreams: target }, plugins });
const endpoint = (path: string) => ({ listen_path: path, upstreams: target });
const jwtServer = (settings: unknown) =>
  parseOAuthServer({ name: 'idp', oauth_endpoints: { token: endpoint('/idp/token') }, token_strategy: { name: 'jwt', settings } });
const introspectionServer = (client_secret: string) =>
  parseOAuthServer({
    name: 'intro',
    oauth_endpoints: { token: endpoint('/intro/token'), introspect: endpoint('/intro/introspect') },
    token_strategy: { name: 'introspection', settings: { client_id: 'gw', client_secret } },
  });

describe('redactSecrets', () => {
  test('every secret of every kind is the marker; public keys and the rest stay; the stored definition is untouched', () => {
    const withOidc = api([{ name: 'cors', config: {} }, oidc('client-secret-1', 'c'.repeat(40))]);
    const shown = redactSecrets('api', withOidc);
    expect(shown.plugins[1]!.config).toMatchObject({ client_id: 'gw', client_secret: REDACTED, cookie_secret: REDACTED });
    expect(shown.plugins[0]).toEqual(withOidc.plugins[0]);
    expect(withOidc.plugins[1]!.config).toMatchObject({ client_secret: 'client-secret-1' });

    const jwt = jwtServer([
      { alg: 'HS256', key: 'hs-key' },
      { alg: 'RS256', key: RSA_PUBLIC },
    ]);
    expect(redactSecrets('oauth-server', jwt).token_strategy.settings).toEqual([
      { alg: 'HS256', key: REDACTED },
      { alg: 'RS256', key: RSA_PUBLIC },
    ]);
    expect(JSON.stringify(redactSecrets('oauth-server', introspectionServer('intro-secret')))).not.toContain('intro-secret');
    expect(redactSecrets('basic-auth-credential', { username: 'u', password_hash: 'scrypt$x' })).toEqual({ username: 'u', password_hash: REDACTED });
    expect(redactSecrets('key-auth-credential', { username: 'u', key_hash: 'sha256$x', groups: ['a'] })).toEqual({
      username: 'u',
      key_hash: REDACTED,
      groups: ['a'],
    });
  });

  test('a definition without secrets is returned as it is (no copy)', () => {
    const plain = api([{ name: 'cors', config: {} }]);
    expect(redactSecrets('api', plain)).toBe(plain);
  });
});

describe('keepRedactedSecrets + refuseRedacted', () => {
  test('the marker takes the stored secret of the same place: a plugin by its name, wherever it moved; a key by its index', () => {
    const stored = api([oidc('stored-client', 's'.repeat(40))]);
    const body = { ...redactSecrets('api', stored), plugins: [{ name: 'cors', config: {} }, redactSecrets('api', stored).plugins[0]] };
    const kept = keepRedactedSecrets('api', body, stored);
    expect(kept.plugins[1]!.config).toMatchObject({ client_secret: 'stored-client', cookie_secret: 's'.repeat(40) });
    expect(body.plugins[1]!.config).toMatchObject({ client_secret: REDACTED });

    const server = jwtServer([{ alg: 'HS256', key: 'old-key' }]);
    const rotated = keepRedactedSecrets(
      'oauth-server',
      {
        ...server,
        token_strategy: {
          ...server.token_strategy,
          settings: [
            { alg: 'HS256', key: REDACTED },
            { alg: 'HS512', key: 'new-key' },
          ],
        },
      },
      server,
    );
    expect(rotated.token_strategy.settings).toEqual([
      { alg: 'HS256', key: 'old-key' },
      { alg: 'HS512', key: 'new-key' },
    ]);
  });

  test('a new secret replaces the stored one; a marker with nothing stored at its place is refused naming the field', () => {
    const stored = api([oidc('stored-client', 's'.repeat(40))]);
    // As a PUT's body before parsing: the marker is shorter than a cookie secret may be.
    const changed = keepRedactedSecrets('api', { ...stored, plugins: [oidc('new-client', REDACTED)] }, stored);
    expect(changed.plugins[0]!.config).toMatchObject({ client_secret: 'new-client', cookie_secret: 's'.repeat(40) });

    const server = jwtServer([{ alg: 'HS256', key: 'only-key' }]);
    const extra = keepRedactedSecrets(
      'oauth-server',
      jwtServer([
        { alg: 'HS256', key: 'only-key' },
        { alg: 'HS256', key: REDACTED },
      ]),
      server,
    );
    expect(() => refuseRedacted('oauth-server', extra)).toThrow(
      'token_strategy.settings[1].key is <redacted>, but there is no stored secret at that place to keep: give the secret',
    );
    expect(() => refuseRedacted('basic-auth-credential', { username: 'u', password_hash: REDACTED })).toThrow(/^password_hash is <redacted>/);
    expect(() => refuseRedacted('oauth-server', server)).not.toThrow();
  });
});

describe('the table', () => {
  /** Every member name a definition schema declares, with where it is (plugin configs, OAuth settings, credentials). */
  function memberNames(): Array<[where: string, name: string]> {
    const out: Array<[string, string]> = [];
    const walk = (schema: unknown, where: string): void => {
      if (!schema || typeof schema !== 'object') return;
      const s = schema as Record<string, unknown>;
      for (const [name, sub] of Object.entries((s.properties ?? {}) as Record<string, unknown>)) {
        out.push([where, name]);
        walk(sub, where);
      }
      for (const key of ['items', 'anyOf', 'oneOf', 'allOf', 'additionalProperties']) for (const sub of [s[key]].flat()) walk(sub, where);
    };
    const schemas: Record<string, z.ZodType> = {
      jwt: jwtSettingsSchema,
      introspection: introspectionSettingsSchema,
      server: serverSchema,
      basic: credentialSchema,
      key: keyAuthCredentialSchema,
    };
    for (const [name, plugin] of Object.entries(PLUGINS)) schemas[`plugin ${name}`] = (plugin as { schema: z.ZodType }).schema;
    for (const [where, schema] of Object.entries(schemas)) walk(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }), where);
    return out;
  }

  test('every member whose name says it holds a secret has its row (a new secret field must be added to SECRET_FIELDS)', () => {
    const fields = new Set(SECRET_FIELDS.map((f) => f.field));
    const secretLooking = memberNames().filter(([, name]) => /secret|password|passphrase|_hash$|private_key|api_key$/.test(name));
    expect(secretLooking.length).toBeGreaterThan(0);
    expect(secretLooking.filter(([, name]) => !fields.has(name))).toEqual([]);
  });

  test('every row finds its place in a definition of its kind', () => {
    const found = [
      ...secretLocations('api', api([oidc('a', 'b'.repeat(40))])),
      ...secretLocations('oauth-server', jwtServer([{ alg: 'HS384', key: 'k' }])),
      ...secretLocations('oauth-server', introspectionServer('s')),
      ...secretLocations('basic-auth-credential', { username: 'u', password_hash: 'h' }),
      ...secretLocations('key-auth-credential', { username: 'u', key_hash: 'h' }),
    ].filter((l) => typeof l.holder[l.row.field] === 'string');
    expect(new Set(found.map((l) => l.row))).toEqual(new Set(SECRET_FIELDS));
    expect(found.map((l) => l.id).sort()).toEqual(
      [
        'key_hash',
        'password_hash',
        'plugins.openid_connect.config.client_secret',
        'plugins.openid_connect.config.cookie_secret',
        'token_strategy.settings.0.key',
        'token_strategy.settings.client_secret',
      ].sort(),
    );
  });
});
