import { GatehouseError } from './errors.js';
import { parseDuration, tryParseDuration } from './duration.js';

test.each([
  ['milliseconds', '250ms', 250],
  ['seconds', '5s', 5000],
  ['minutes', '1m', 60_000],
  ['hours', '1h', 3_600_000],
  ['fraction', '1.5s', 1500],
  ['leading dot', '.5s', 500],
  ['compound (Go syntax)', '1m30s', 90_000],
  ['smallest', '1ms', 1],
])('parses %s', (_name, input, ms) => {
  expect(parseDuration(input)).toBe(ms);
});

test.each([
  ['empty', ''],
  ['no unit', '5'],
  ['unknown unit', '5d'],
  ['negative', '-5s'],
  ['zero', '0s'],
  ['rounds to zero', '0.1ms'],
  ['over one hour', '61m'],
  ['spaces', ' 5s'],
  ['junk after', '5sx'],
  ['number only words', 'five seconds'],
  ['not a string', 5 as unknown as string],
])('rejects %s', (_name, input) => {
  expect(tryParseDuration(input)).toBeNull();
  expect(() => parseDuration(input)).toThrow(GatehouseError);
});

test('answers asked again (from the cache) and past the cache bound are the same as the first', () => {
  const inputs = ['250ms', '5s', '1m30s', '61m', '5sx', ''];
  const first = inputs.map(tryParseDuration);
  expect(first).toEqual([250, 5000, 90_000, null, null, null]);
  // Fills the cache past its bound with distinct valid strings, each still parsed right.
  for (let i = 1; i <= 1500; i++) expect(tryParseDuration(`${i}ms`)).toBe(i);
  expect(inputs.map(tryParseDuration)).toEqual(first);
  expect(tryParseDuration('1499ms')).toBe(1499);
});
