import type { V1Secret } from '@kubernetes/client-node';
import type { GatehouseError } from '#proto/errors';
import { extractSecrets, resolveSecretRefs, type SecretLookup } from './secret-refs.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');
const secrets =
  (all: Record<string, Record<string, string>>): SecretLookup =>
  (name) =>
    all[name]
      ? ({ metadata: { name, resourceVersion: '7' }, data: Object.fromEntries(Object.entries(all[name]).map(([k, v]) => [k, b64(v)])) } as V1Secret)
      : undefined;

const oidcApi = (config: Record<string, unknown>) => ({
  name: 'app',
  plugins: [
    { name: 'cors', config: {} },
    { name: 'openid_connect', config: { client_id: 'gw', ...config } },
  ],
});

describe('resolveSecretRefs', () => {
  test('each _secret_ref becomes its value; what was read is recorded by resourceVersion', () => {
    const refs: string[] = [];
    const spec = oidcApi({ client_secret_secret_ref: { name: 'oidc', key: 'client' }, cookie_secret: 'inline' });
    const resolved = resolveSecretRefs('api', spec, secrets({ oidc: { client: 'from-secret' } }), refs);
    expect((resolved.plugins as any)[1].config).toEqual({ client_id: 'gw', client_secret: 'from-secret', cookie_secret: 'inline' });
    expect(refs).toEqual(['oidc@7']);
    expect((spec.plugins as any)[1].config.client_secret_secret_ref).toBeDefined();
  });

  test('a missing Secret or key is SECRET_REF_NOT_FOUND naming the ref; a malformed ref or both forms are refused', () => {
    const fails = (spec: Record<string, unknown>, lookup: SecretLookup) => {
      try {
        resolveSecretRefs('key-auth-credential', spec, lookup, []);
      } catch (err) {
        return { code: (err as GatehouseError).code, message: (err as GatehouseError).message };
      }
      throw new Error('resolved');
    };
    const ref = { username: 'u', key_hash_secret_ref: { name: 'k', key: 'hash' } };
    expect(fails(ref, secrets({}))).toEqual({ code: 'SECRET_REF_NOT_FOUND', message: 'key_hash_secret_ref: Secret "k" does not exist in this namespace' });
    expect(fails(ref, secrets({ k: { other: 'x' } }))).toEqual({ code: 'SECRET_REF_NOT_FOUND', message: 'key_hash_secret_ref: Secret "k" has no key "hash"' });
    expect(fails({ username: 'u', key_hash_secret_ref: { name: 'k' } }, secrets({}))).toMatchObject({ code: 'VALIDATION_FAILED' });
    expect(fails({ ...ref, key_hash: 'sha256$x' }, secrets({ k: { hash: 'y' } }))).toMatchObject({
      code: 'VALIDATION_FAILED',
      message: 'key_hash_secret_ref: give key_hash or key_hash_secret_ref, not both',
    });
  });
});

describe('extractSecrets', () => {
  test('every secret goes to the managed Secret under its place and the spec references it; nothing secret stays in the spec', () => {
    const def = {
      name: 'idp',
      token_strategy: {
        name: 'jwt',
        settings: [
          { alg: 'HS256', key: 'hs' },
          { alg: 'RS256', key: 'PEM' },
        ],
      },
    };
    const { spec, data } = extractSecrets('oauth-server', def, undefined, secrets({}), 'gatehouse-oauthserver-idp');
    expect(spec.token_strategy).toEqual({
      name: 'jwt',
      settings: [
        { alg: 'HS256', key_secret_ref: { name: 'gatehouse-oauthserver-idp', key: 'token_strategy.settings.0.key' } },
        { alg: 'RS256', key: 'PEM' },
      ],
    });
    expect(data).toEqual({ 'token_strategy.settings.0.key': b64('hs') });
    expect(def.token_strategy.settings[0]).toEqual({ alg: 'HS256', key: 'hs' });
  });

  test("a reference to the user's own Secret is kept while the value is the same; a changed value moves to the managed Secret", () => {
    const current = { username: 'u', key_hash_secret_ref: { name: 'mine', key: 'digest' } };
    const lookup = secrets({ mine: { digest: 'sha256$a' } });
    expect(extractSecrets('key-auth-credential', { username: 'u', key_hash: 'sha256$a', groups: ['x'] }, current, lookup, 'managed')).toEqual({
      spec: { username: 'u', groups: ['x'], key_hash_secret_ref: { name: 'mine', key: 'digest' } },
      data: {},
    });
    expect(extractSecrets('key-auth-credential', { username: 'u', key_hash: 'sha256$b' }, current, lookup, 'managed')).toEqual({
      spec: { username: 'u', key_hash_secret_ref: { name: 'managed', key: 'key_hash' } },
      data: { key_hash: b64('sha256$b') },
    });
  });
});
