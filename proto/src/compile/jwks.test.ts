import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { MAX_JWKS_KEYS, compileJwks, parseJwks } from './jwks.js';
import { parseOAuthServer } from '../definition/index.js';
import type { JwksSettings, JwtAlg } from '../definition/types.js';

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
const rsaSmall = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey;
const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
const ed = generateKeyPairSync('ed25519').publicKey;
const jwk = (k: KeyObject, extra: Record<string, unknown> = {}) => ({ ...k.export({ format: 'jwk' }), ...extra });
const ALL: JwtAlg[] = ['RS256', 'RS384', 'RS512', 'ES256', 'ES384'];
const summary = (body: unknown, algs = ALL) => {
  const { keys, ignored } = parseJwks(body, algs);
  return { keys: keys.map((k) => `${k.alg}:${k.kid ?? '-'}`), ignored: ignored.length };
};

test('an RSA key without alg serves every RS alg allowed; an EC key its curve alg; kid kept', () => {
  expect(summary({ keys: [jwk(rsa, { kid: 'r' }), jwk(p256, { kid: 'e' }), jwk(p384.publicKey)] })).toEqual({
    keys: ['RS256:r', 'RS384:r', 'RS512:r', 'ES256:e', 'ES384:-'],
    ignored: 0,
  });
  expect(summary({ keys: [jwk(rsa, { kid: 'r' })] }, ['RS256'])).toEqual({ keys: ['RS256:r'], ignored: 0 });
});

test.each([
  ['its alg outside the allowed algs', jwk(rsa, { alg: 'RS512' }), ['RS256'], 'alg "RS512" is not allowed for this key', false],
  ['an alg its kty cannot have (HS256 on an RSA key)', jwk(rsa, { alg: 'HS256' }), ALL, 'alg "HS256" is not allowed for this key', false],
  ['alg none', jwk(rsa, { alg: 'none' }), ALL, 'alg "none" is not allowed for this key', false],
  ['use enc', jwk(rsa, { use: 'enc' }), ALL, 'use is "enc", not "sig"', false],
  ['key_ops without verify', jwk(rsa, { key_ops: ['encrypt'] }), ALL, 'key_ops lacks "verify"', false],
  ['an OKP (Ed25519) key', jwk(ed), ALL, 'kty "OKP" is not RSA or EC', false],
  ['an EC key of another curve', { ...jwk(p256), crv: 'P-521' }, ALL, 'EC curve "P-521" is not P-256 or P-384', false],
  ['an RSA key shorter than 2048 bits', jwk(rsaSmall), ALL, 'is an RSA key shorter than 2048 bits', true],
  ['an EC key of an algs-excluded curve', jwk(p384.publicKey), ['ES256'], 'none of its algs (ES384) is allowed', false],
  ['RSA material of a few bits', { kty: 'RSA', n: 'AQAB', e: 'AQAB' }, ALL, 'is an RSA key shorter than 2048 bits', true],
  ['EC material off its curve', { kty: 'EC', crv: 'P-256', x: 'AAAA', y: 'AAAA' }, ALL, /^key material not importable: .+/, true],
])('a JWK is ignored with its reason, never widening what is accepted: %s', (_name, key, algs, reason, broken) => {
  const parsed = parseJwks({ keys: [{ ...key, kid: 'x' }, jwk(p256, { kid: 'ok' })] }, algs as JwtAlg[]);
  const accepts = (algs as JwtAlg[]).includes('ES256');
  expect(parsed.keys.map((k) => k.kid)).toEqual(accepts ? ['ok'] : []);
  expect(parsed.ignored[0]).toEqual({ key: 'keys[0]', kid: 'x', reason: typeof reason === 'string' ? reason : expect.stringMatching(reason), broken });
  expect(parsed.ignored).toHaveLength(accepts ? 1 : 2);
});

test.each([
  ['not an object', [], 'JWKS is not a JSON object with a "keys" array'],
  ['keys missing', { jwks: [] }, 'JWKS is not a JSON object with a "keys" array'],
  ['keys not an array', { keys: {} }, 'JWKS is not a JSON object with a "keys" array'],
  ['a key not an object', { keys: ['x'] }, 'JWKS keys[0] is not a JSON object'],
  [
    'an HMAC (oct) key',
    { keys: [jwk(rsa), { kty: 'oct', k: 'c2VjcmV0', alg: 'HS256' }] },
    'JWKS keys[1] is a symmetric (oct) key: a JWKS carries public keys only',
  ],
  [
    'a private RSA key',
    { keys: [jwk(generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey)] },
    'JWKS keys[0] holds private key material ("d"): a JWKS carries public keys only',
  ],
  ['a private EC key', { keys: [jwk(p384.privateKey)] }, 'JWKS keys[0] holds private key material ("d"): a JWKS carries public keys only'],
  ['too many keys', { keys: Array.from({ length: MAX_JWKS_KEYS + 1 }, () => jwk(p256)) }, `JWKS holds more than ${MAX_JWKS_KEYS} keys`],
])('the whole set is refused: %s', (_name, body, message) => {
  expect(() => parseJwks(body, ALL)).toThrow(message);
});

test('an empty key set is a set (tokens then find no key)', () => {
  expect(summary({ keys: [] })).toEqual({ keys: [], ignored: 0 });
});

test('compileJwks: times in ms, one cache key for one JWKS whatever the server, another for other settings', () => {
  const settings = parseOAuthServer({
    name: 'a',
    oauth_endpoints: { token: { listen_path: '/t', upstreams: { targets: [{ target: 'http://t' }] } } },
    token_strategy: { name: 'jwt', settings: { jwks_uri: 'https://idp.example/keys?x=1' } },
  }).token_strategy.settings as JwksSettings;
  const a = compileJwks('a', settings);
  expect(a).toMatchObject({
    origin: 'https://idp.example',
    path: '/keys?x=1',
    cacheTtlMs: 300_000,
    timeoutMs: 2000,
    cooldownMs: 30_000,
    maxStaleMs: 86_400_000,
  });
  expect(compileJwks('b', settings).cacheKey).toBe(a.cacheKey);
  expect(compileJwks('a', { ...settings, algs: ['RS256'] }).cacheKey).not.toBe(a.cacheKey);
});
