import { matchesAnySecret, sameSecret, secretDigest } from './secret-compare.js';

const expected = secretDigest('s3cret-value');

test.each<[string, unknown, boolean]>([
  ['the secret', 's3cret-value', true],
  ['another value', 's3cret-valuf', false],
  ['a prefix', 's3cret-valu', false],
  ['longer', 's3cret-value!', false],
  ['empty', '', false],
  ['not a string', 12345, false],
  ['undefined', undefined, false],
])('sameSecret: %s → %s', (_name, given, result) => {
  expect(sameSecret(given, expected)).toBe(result);
});

test('matchesAnySecret accepts any of several (rotation) and none when the list is empty', () => {
  const both = [secretDigest('old-token'), secretDigest('new-token')];
  expect(matchesAnySecret('old-token', both)).toBe(true);
  expect(matchesAnySecret('new-token', both)).toBe(true);
  expect(matchesAnySecret('other', both)).toBe(false);
  expect(matchesAnySecret('old-token', [])).toBe(false);
});
