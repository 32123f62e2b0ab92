import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { SignJWT, type JWTPayload } from 'jose';
import { compileJwtKeys } from '#proto/compile/jwt-keys';
import type { JwtAlg, JwtKeySetting } from '#proto/definition/types';
import { createJwtVerifier, MAX_TOKEN_LENGTH } from './jwt-verifier.js';

const T = 1_700_000_000; // frozen "now", seconds
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const rsa2 = generateKeyPairSync('rsa', { modulusLength: 2048 });
const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const p384 = generateKeyPairSync('ec', { namedCurve: 'P-384' });
const pem = (k: KeyObject) => k.export({ type: 'spki', format: 'pem' }) as string;
const RSA_PEM = pem(rsa.publicKey);

type SigningKey = KeyObject | Uint8Array;
const secret = (s: string) => new TextEncoder().encode(s);

/** Signing material and the server setting that verifies it, per alg. */
const PAIRS: Record<JwtAlg, { sign: SigningKey; setting: JwtKeySetting }> = {
  HS256: { sign: secret('s256'), setting: { alg: 'HS256', key: 's256' } },
  HS384: { sign: secret('s384'), setting: { alg: 'HS384', key: 's384' } },
  HS512: { sign: secret('s512'), setting: { alg: 'HS512', key: 's512' } },
  RS256: { sign: rsa.privateKey, setting: { alg: 'RS256', key: RSA_PEM } },
  RS384: { sign: rsa.privateKey, setting: { alg: 'RS384', key: RSA_PEM } },
  RS512: { sign: rsa.privateKey, setting: { alg: 'RS512', key: RSA_PEM } },
  ES256: { sign: p256.privateKey, setting: { alg: 'ES256', key: pem(p256.publicKey) } },
  ES384: { sign: p384.privateKey, setting: { alg: 'ES384', key: pem(p384.publicKey) } },
};

function sign(alg: string, key: SigningKey, claims: JWTPayload = {}): Promise<string> {
  return new SignJWT({ sub: 'client-1', iat: T, exp: T + 300, ...claims }).setProtectedHeader({ alg, typ: 'JWT' }).sign(key);
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

function verifier(settings: JwtKeySetting[], leeway = 0, now = () => T, cacheSize?: number) {
  return createJwtVerifier({ keys: compileJwtKeys(settings, 'token_strategy.settings'), leeway, now, cacheSize });
}

/** A refusal may be thrown (known at once) or a rejection: both count. */
async function outcome(verify: () => unknown): Promise<string> {
  try {
    await verify();
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? 'thrown';
  }
}

describe('each supported alg verifies its own tokens', () => {
  test.each(Object.keys(PAIRS) as JwtAlg[])('%s', async (alg) => {
    const { sign: key, setting } = PAIRS[alg];
    const token = await sign(alg, key);
    expect(await outcome(() => verifier([setting]).verify(token))).toBe('ok');
  });
});

describe('rotation: several settings, valid under any one', () => {
  const settings: JwtKeySetting[] = [{ alg: 'HS256', key: 'old-secret' }, { alg: 'HS256', key: 'new-secret' }, PAIRS.RS256.setting, PAIRS.ES256.setting];
  test.each<[string, () => Promise<string>, string]>([
    ['first HS key', () => sign('HS256', secret('old-secret')), 'ok'],
    ['second HS key', () => sign('HS256', secret('new-secret')), 'ok'],
    ['RS256 entry', () => sign('RS256', rsa.privateKey), 'ok'],
    ['ES256 entry', () => sign('ES256', p256.privateKey), 'ok'],
    ['retired HS key', () => sign('HS256', secret('retired-secret')), 'TOKEN_REJECTED'],
    ['other RSA key', () => sign('RS256', rsa2.privateKey), 'TOKEN_REJECTED'],
  ])('%s', async (_name, make, expected) => {
    const token = await make();
    expect(await outcome(() => verifier(settings).verify(token))).toBe(expected);
  });
});

describe('exp and nbf with leeway (frozen clock)', () => {
  test.each<[string, JWTPayload, number, string]>([
    ['exp in the future', { exp: T + 1 }, 0, 'ok'],
    ['exp reached, no leeway', { exp: T }, 0, 'TOKEN_REJECTED'],
    ['expired 5 s ago, leeway 10', { exp: T - 5 }, 10, 'ok'],
    ['expired 11 s ago, leeway 10', { exp: T - 11 }, 10, 'TOKEN_REJECTED'],
    ['nbf now', { nbf: T }, 0, 'ok'],
    ['nbf in 5 s, no leeway', { nbf: T + 5 }, 0, 'TOKEN_REJECTED'],
    ['nbf in 5 s, leeway 10', { nbf: T + 5 }, 10, 'ok'],
    ['nbf in 11 s, leeway 10', { nbf: T + 11 }, 10, 'TOKEN_REJECTED'],
    ['no exp at all (issuer chose so)', { exp: undefined }, 0, 'ok'],
  ])('%s', async (_name, claims, leeway, expected) => {
    const token = await sign('HS256', PAIRS.HS256.sign, claims);
    expect(await outcome(() => verifier([PAIRS.HS256.setting], leeway).verify(token))).toBe(expected);
  });
});

describe('attacks are rejected with TOKEN_REJECTED', () => {
  const rsServer = [PAIRS.RS256.setting];
  const hsServer = [PAIRS.HS256.setting];
  test.each<[string, JwtKeySetting[], () => Promise<string> | string]>([
    ['alg none, empty signature', hsServer, () => `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'x', exp: T + 60 })}.`],
    ['alg none against an RS server', rsServer, () => `${b64({ alg: 'none' })}.${b64({ sub: 'x' })}.`],
    ['HS256 signed with the RSA public key PEM against an RS256 server', rsServer, () => sign('HS256', secret(RSA_PEM))],
    [
      'HS256 signed with the RSA public key PEM against a server with both HS256 and RS256',
      [PAIRS.HS256.setting, PAIRS.RS256.setting],
      () => sign('HS256', secret(RSA_PEM)),
    ],
    ['alg not listed (RS512 token, RS256 server, same key)', rsServer, () => sign('RS512', rsa.privateKey)],
    ['alg not listed (HS512 token, HS256 server, same secret)', hsServer, () => sign('HS512', PAIRS.HS256.sign)],
    ['expired', hsServer, () => sign('HS256', PAIRS.HS256.sign, { exp: T - 1 })],
    ['nbf in the future', hsServer, () => sign('HS256', PAIRS.HS256.sign, { nbf: T + 60 })],
    ['wrong secret', hsServer, () => sign('HS256', secret('wrong'))],
    ['wrong RSA key', rsServer, () => sign('RS256', rsa2.privateKey)],
    ['ES256 token against an RS256 server', rsServer, () => sign('ES256', p256.privateKey)],
    ['truncated signature', hsServer, async () => (await sign('HS256', PAIRS.HS256.sign)).slice(0, -4)],
    ['signature removed', hsServer, async () => (await sign('HS256', PAIRS.HS256.sign)).replace(/\.[^.]+$/, '.')],
    [
      'payload swapped (exp extended)',
      hsServer,
      async () => {
        const [h, , s] = (await sign('HS256', PAIRS.HS256.sign, { exp: T - 1 })).split('.');
        return `${h}.${b64({ sub: 'client-1', iat: T, exp: T + 3600 })}.${s}`;
      },
    ],
    ['garbage', hsServer, () => 'not-a-jwt'],
    ['three empty segments', hsServer, () => '..'],
    ['empty token', hsServer, () => ''],
    ['header not JSON', hsServer, () => `${Buffer.from('{oops').toString('base64url')}.${b64({})}.abc`],
    ['oversized token', hsServer, () => 'a'.repeat(MAX_TOKEN_LENGTH + 1)],
  ])('%s', async (_name, settings, make) => {
    const token = await make();
    expect(await outcome(() => verifier(settings).verify(token))).toBe('TOKEN_REJECTED');
  });
});

describe('verification cache', () => {
  test('a cached success is not trusted past exp', async () => {
    let now = T;
    const v = verifier([PAIRS.HS256.setting], 0, () => now);
    const token = await sign('HS256', PAIRS.HS256.sign, { exp: T + 10 });
    expect(await outcome(() => v.verify(token))).toBe('ok');
    expect(v.cachedCount()).toBe(1);
    now = T + 9;
    expect(await outcome(() => v.verify(token))).toBe('ok');
    now = T + 10;
    expect(await outcome(() => v.verify(token))).toBe('TOKEN_REJECTED');
    expect(v.cachedCount()).toBe(0);
  });

  test('a cached success is answered synchronously (no promise); a fresh token and a refusal known at once are not', async () => {
    const v = verifier([PAIRS.HS256.setting]);
    const token = await sign('HS256', PAIRS.HS256.sign);
    const fresh = v.verify(token);
    expect(fresh).toBeInstanceOf(Promise);
    const grant = await fresh;
    expect(v.verify(token)).toBe(grant);
    expect(() => v.verify('')).toThrow(expect.objectContaining({ code: 'TOKEN_REJECTED' }));
  });

  test('failures are not cached', async () => {
    const v = verifier([PAIRS.HS256.setting]);
    const wrong = await sign('HS256', secret('wrong'));
    await outcome(() => v.verify(wrong));
    expect(v.cachedCount()).toBe(0);
  });

  test('bounded in size', async () => {
    const v = verifier([PAIRS.HS256.setting], 0, () => T, 2);
    const tokens = await Promise.all([1, 2, 3].map((n) => sign('HS256', PAIRS.HS256.sign, { jti: `t${n}` })));
    for (const t of tokens) await v.verify(t);
    expect(v.cachedCount()).toBe(2);
  });

  test('when full, the least recently used success goes first', async () => {
    let now = T;
    const v = verifier([PAIRS.HS256.setting], 0, () => now, 2);
    const [t1, t2, t3] = await Promise.all([1, 2, 3].map((n) => sign('HS256', PAIRS.HS256.sign, { jti: `t${n}`, nbf: T })));
    for (const t of [t1, t2, t1, t3]) expect(await outcome(() => v.verify(t))).toBe('ok');
    // Before nbf a fresh verification fails while a cached success still stands: that tells which are cached.
    now = T - 1;
    expect([await outcome(() => v.verify(t1)), await outcome(() => v.verify(t2)), await outcome(() => v.verify(t3))]).toEqual(['ok', 'TOKEN_REJECTED', 'ok']);
  });

  test('a new verifier (next snapshot) starts empty', async () => {
    const token = await sign('HS256', PAIRS.HS256.sign);
    const first = verifier([PAIRS.HS256.setting]);
    await first.verify(token);
    const next = verifier([{ alg: 'HS256', key: 'rotated-away' }]);
    expect(next.cachedCount()).toBe(0);
    expect(await outcome(() => next.verify(token))).toBe('TOKEN_REJECTED');
  });
});

describe('issuer and audiences (RFC 8725 §3.8-3.9), by jose', () => {
  const checked = (options: { issuer?: string; audiences?: string[] }) =>
    createJwtVerifier({ keys: compileJwtKeys([PAIRS.HS256.setting], 'token_strategy.settings'), leeway: 0, now: () => T, ...options });
  const ISSUER = 'https://idp.test/';

  test.each([
    ['the issuer, an audience (string aud)', { iss: ISSUER, aud: 'orders' }, 'ok'],
    ['the issuer, an audience among others (array aud)', { iss: ISSUER, aud: ['billing', 'orders'] }, 'ok'],
    ['another audience', { iss: ISSUER, aud: 'billing' }, 'TOKEN_REJECTED'],
    ['no aud', { iss: ISSUER }, 'TOKEN_REJECTED'],
    ['another issuer', { iss: 'https://evil.test/', aud: 'orders' }, 'TOKEN_REJECTED'],
    ['the issuer without its trailing slash (exact match)', { iss: 'https://idp.test', aud: 'orders' }, 'TOKEN_REJECTED'],
    ['no iss', { aud: 'orders' }, 'TOKEN_REJECTED'],
  ])('%s: %s', async (_row, claims, expected) => {
    const token = await sign('HS256', PAIRS.HS256.sign, claims);
    expect(await outcome(() => checked({ issuer: ISSUER, audiences: ['orders', 'shop'] }).verify(token))).toBe(expected);
  });

  test('the refusal names the claim for the logs', async () => {
    const token = await sign('HS256', PAIRS.HS256.sign, { aud: 'billing' });
    await expect((async () => checked({ audiences: ['orders'] }).verify(token))()).rejects.toThrow(
      'access token not authorized: ERR_JWT_CLAIM_VALIDATION_FAILED (aud)',
    );
  });

  test('unset, neither is checked', async () => {
    const token = await sign('HS256', PAIRS.HS256.sign, { iss: 'anyone', aud: 'anything' });
    expect(await outcome(() => checked({}).verify(token))).toBe('ok');
  });

  test("the cached grant is the token's: its scopes and header-safe claims", async () => {
    const v = checked({});
    const token = await sign('HS256', PAIRS.HS256.sign, { scope: 'a b', email: 'u@x.test' });
    const grant = await v.verify(token);
    expect([...grant.scopes]).toEqual(['a', 'b']);
    expect(grant.claims.get('email')).toBe('u@x.test');
    expect(grant.claims.get('sub')).toBe('client-1');
    expect(v.verify(token)).toBe(grant);
  });
});
