/**
 * The JWT parser and verifier on generated input: whatever the bearer token holds,
 * verify() settles with TOKEN_REJECTED (never another error, never a crash) unless the token was
 * signed with the server's key; a signed token altered in any one character is refused.
 */
import fc from 'fast-check';
import { SignJWT } from 'jose';
import { compileJwtKeys } from '#proto/compile/jwt-keys';
import { createJwtVerifier } from './jwt-verifier.js';

const PARAMS = { seed: 20261123, numRuns: 2_000 };
const NOW = 1_700_000_000;
const SECRET = 'property-secret';

const verifier = () =>
  createJwtVerifier({ keys: compileJwtKeys([{ alg: 'HS256', key: SECRET }], 'token_strategy.settings'), leeway: 0, now: () => NOW, cacheSize: 0 });

async function outcome(token: string): Promise<string> {
  try {
    await verifier().verify(token);
    return 'accepted';
  } catch (err) {
    return (err as { code?: string }).code ?? `untyped: ${String(err)}`;
  }
}

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

/** Header/payload/signature parts that are almost tokens: known and unknown algs, crit, wrong types. */
const header = fc.oneof(
  fc.record(
    { alg: fc.constantFrom('HS256', 'none', 'RS256', 'HS512', 'ES256', 'PS256', '', 'hs256'), typ: fc.constantFrom('JWT', 'at+jwt', undefined) },
    { requiredKeys: ['alg'] },
  ),
  fc.record({ alg: fc.constant('HS256'), crit: fc.array(fc.string({ maxLength: 5 }), { maxLength: 2 }), b64: fc.boolean() }),
  fc.jsonValue({ maxDepth: 2 }),
);
const payload = fc.oneof(
  fc.record(
    { sub: fc.string({ maxLength: 8 }), exp: fc.oneof(fc.integer(), fc.constant(NOW + 60), fc.string()), nbf: fc.oneof(fc.integer(), fc.double()) },
    { requiredKeys: [] },
  ),
  fc.jsonValue({ maxDepth: 2 }),
);
const part = fc.oneof(
  fc.base64String({ maxLength: 40 }).map((s) => s.replace(/=+$/, '')),
  fc.string({ maxLength: 20 }),
  fc.constant(''),
);

const almostTokens = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.tuple(header, payload, part).map(([h, p, s]) => `${b64(h)}.${b64(p)}.${s}`),
  fc.tuple(part, part, part, fc.array(part, { maxLength: 2 })).map(([a, b, c, rest]) => [a, b, c, ...rest].join('.')),
  fc.constantFrom('a.b.c', '..', '...', 'e30.e30.', `${b64({ alg: 'none' })}.${b64({ sub: 'x' })}.`, 'x'.repeat(9000)),
);

test('unsigned or malformed tokens are refused with TOKEN_REJECTED, nothing else', async () => {
  await fc.assert(
    fc.asyncProperty(almostTokens, async (token) => {
      expect(await outcome(token)).toBe('TOKEN_REJECTED');
    }),
    PARAMS,
  );
});

test('a signed token altered in one character is refused; unaltered it is accepted', async () => {
  const token = await new SignJWT({ sub: 'client-1', exp: NOW + 300 }).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(new TextEncoder().encode(SECRET));
  expect(await outcome(token)).toBe('accepted');
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.';
  await fc.assert(
    fc.asyncProperty(fc.nat(token.length - 1), fc.constantFrom(...alphabet), async (at, ch) => {
      const altered = token.slice(0, at) + ch + token.slice(at + 1);
      fc.pre(altered !== token);
      // Base64url's last character can carry unused bits: a change there may decode to the same bytes.
      const sameBytes = altered.split('.').every((p, i) => Buffer.from(p, 'base64url').equals(Buffer.from(token.split('.')[i] ?? '', 'base64url')));
      fc.pre(!sameBytes);
      expect(await outcome(altered)).toBe('TOKEN_REJECTED');
    }),
    PARAMS,
  );
});
