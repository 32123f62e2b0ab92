import { audienceMatches, claimText, grantOf, MAX_CLAIM_VALUE } from './token-grant.js';

describe('scopes: every form an issuer writes them in', () => {
  test.each([
    ['scope, space-separated (RFC 8693, RFC 9068, RFC 7662)', { scope: 'orders:read  orders:write' }, ['orders:read', 'orders:write']],
    ['scp as an array (Okta)', { scp: ['orders:read', 'profile'] }, ['orders:read', 'profile']],
    ['scp as a space-separated string (Entra ID)', { scp: 'User.Read orders:read' }, ['User.Read', 'orders:read']],
    ['scope as an array', { scope: ['a', 'b'] }, ['a', 'b']],
    ['both members: the union', { scope: 'a', scp: ['b'] }, ['a', 'b']],
    ['non-string items ignored', { scp: ['a', 7, null, { b: 1 }] }, ['a']],
    ['neither member', { sub: 'x' }, []],
    ['scope of another type', { scope: 42 }, []],
  ])('%s', (_row, claims, scopes) => {
    expect([...grantOf(claims).scopes]).toEqual(scopes);
  });
});

describe('claims kept for headers', () => {
  test('strings, numbers and booleans (as JSON writes them); objects, arrays and null are not kept', () => {
    const grant = grantOf({ sub: 'u-1', email: 'a@b.test', level: 3, ratio: 1.5, admin: false, groups: ['a'], address: { c: 1 }, none: null });
    expect(Object.fromEntries(grant.claims)).toEqual({ sub: 'u-1', email: 'a@b.test', level: '3', ratio: '1.5', admin: 'false' });
  });

  test.each([
    ['CR LF (header injection)', 'u\r\nX-Admin: true'],
    ['a NUL', 'u\u0000'],
    ['a tab', 'u\tv'],
    ['DEL', 'u\u007f'],
    ['non-ASCII (would not reach the upstream as written)', 'José'],
    [`over ${MAX_CLAIM_VALUE} characters`, 'x'.repeat(MAX_CLAIM_VALUE + 1)],
  ])('a value with %s is not kept (its header is omitted)', (_row, value) => {
    expect(claimText(value)).toBeUndefined();
    expect(grantOf({ sub: value }).claims.has('sub')).toBe(false);
  });

  test(`exactly ${MAX_CLAIM_VALUE} printable characters, and the empty string, are kept`, () => {
    expect(claimText('x'.repeat(MAX_CLAIM_VALUE))).toHaveLength(MAX_CLAIM_VALUE);
    expect(claimText('')).toBe('');
  });
});

test('size counts what a cached grant holds: scopes, kept claim names and values', () => {
  expect(grantOf({ scope: 'ab c', sub: 'xyz', nested: { big: 'x'.repeat(100) } }).size).toBe(3 + 'scope'.length + 4 + 'sub'.length + 3);
});

test.each([
  ['a string aud equal to one audience', 'orders', true],
  ['an array aud holding one', ['billing', 'orders'], true],
  ['another audience', 'billing', false],
  ['an array without one', ['billing'], false],
  ['no aud', undefined, false],
  ['a non-string item only', [7], false],
])('audienceMatches: %s', (_row, aud, expected) => {
  expect(audienceMatches(aud, ['orders', 'shop'])).toBe(expected);
});
