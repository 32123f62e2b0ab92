import { formatGrpcTimeout, parseGrpcTimeout } from './deadline.js';

test.each([
  ['1H', 3_600_000],
  ['2M', 120_000],
  ['30S', 30_000],
  ['200m', 200],
  ['1500u', 1.5],
  ['2000000n', 2],
  ['0m', 0],
  ['99999999S', 99_999_999_000],
])('grpc-timeout %s is %d ms', (value, ms) => {
  expect(parseGrpcTimeout(value)).toBe(ms);
});

test.each([
  ['no unit', '200'],
  ['an unknown unit', '200s'],
  ['nine digits', '123456789m'],
  ['a space', '200 m'],
  ['a sign', '-1S'],
  ['a fraction', '1.5S'],
  ['nothing', ''],
  ['two values joined', '1S, 2S'],
])('grpc-timeout with %s (%j) is malformed', (_what, value) => {
  expect(parseGrpcTimeout(value)).toBeNull();
});

test('repeated grpc-timeout fields are malformed', () => {
  expect(parseGrpcTimeout(['1S', '2S'])).toBeNull();
  expect(parseGrpcTimeout(undefined)).toBeNull();
});

test.each([
  [199.7, '199m'],
  [0.4, '0m'],
  [-5, '0m'],
  [99_999_999, '99999999m'],
  [100_000_000, '100000S'],
  [1e14, '27777777H'],
  [1e18, '99999999H'],
])('the time left %d ms goes upstream as %s', (ms, value) => {
  expect(formatGrpcTimeout(ms)).toBe(value);
  expect(value).toMatch(/^\d{1,8}[HSm]$/);
});
