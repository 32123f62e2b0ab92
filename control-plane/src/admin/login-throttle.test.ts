import { createLoginThrottle } from './login-throttle.js';

const BASE = 1_000;
const MAX = 8_000;

function throttle(options: { maxKeys?: number; forgetAfterMs?: number } = {}) {
  let now = 0;
  const t = createLoginThrottle({ freeFailures: 2, baseDelayMs: BASE, maxDelayMs: MAX, now: () => now, ...options });
  return { t, advance: (ms: number) => (now += ms) };
}

test.each<[string, number, number]>([
  ['within the free failures: no wait', 1, 0],
  ['the last free failure starts the backoff: the base delay', 2, BASE],
  ['one more: doubled', 3, 2 * BASE],
  ['two more: doubled again', 4, 4 * BASE],
  ['capped at the max', 9, MAX],
  ['far past the cap (2^n overflows): still the max', 2_000, MAX],
])('%s', (_name, failures, wait) => {
  const { t } = throttle();
  for (let i = 0; i < failures; i++) t.failed(['user:a']);
  expect(t.waitMs(['user:a'])).toBe(wait);
});

test('the wait counts down with the clock', () => {
  const { t, advance } = throttle();
  for (let i = 0; i < 3; i++) t.failed(['ip:1']);
  advance(500);
  expect(t.waitMs(['ip:1'])).toBe(2 * BASE - 500);
  advance(2 * BASE);
  expect(t.waitMs(['ip:1'])).toBe(0);
});

test('the longest wait of the keys counts', () => {
  const { t } = throttle();
  for (let i = 0; i < 3; i++) t.failed(['ip:1']);
  t.failed(['user:a']);
  expect(t.waitMs(['ip:1', 'user:a'])).toBe(2 * BASE);
  expect(t.waitMs(['ip:2', 'user:a'])).toBe(0);
});

test('success clears the keys it names', () => {
  const { t } = throttle();
  for (let i = 0; i < 3; i++) t.failed(['ip:1', 'user:a']);
  t.succeeded(['ip:1', 'user:a']);
  expect(t.waitMs(['ip:1', 'user:a'])).toBe(0);
  t.failed(['user:a']);
  expect(t.waitMs(['user:a'])).toBe(0);
});

test('a key with no failure for forgetAfterMs starts over', () => {
  const { t, advance } = throttle({ forgetAfterMs: 60_000 });
  for (let i = 0; i < 3; i++) t.failed(['user:a']);
  advance(60_001);
  t.failed(['user:a']);
  expect(t.waitMs(['user:a'])).toBe(0);
});

test('memory is bounded: past maxKeys the least recently used key is dropped', () => {
  const { t } = throttle({ maxKeys: 3 });
  for (let i = 0; i < 3; i++) t.failed(['user:victim']);
  for (const key of ['a', 'b', 'c']) t.failed([`user:${key}`]);
  expect(t.waitMs(['user:victim'])).toBe(0);
});
