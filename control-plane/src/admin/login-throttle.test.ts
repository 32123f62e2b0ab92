import { addressKey, createLoginThrottle } from './login-throttle.js';

const BASE = 1_000;
const MAX = 8_000;
const REFILL = 60_000;

function throttle(options: { maxKeys?: number; forgetAfterMs?: number } = {}) {
  let now = 0;
  const t = createLoginThrottle({ freeFailures: 2, baseDelayMs: BASE, maxDelayMs: MAX, userBurst: 2, userRefillMs: REFILL, now: () => now, ...options });
  return { t, advance: (ms: number) => (now += ms) };
}

describe('per address: exponential backoff', () => {
  test.each<[string, number, number]>([
    ['within the free failures: no wait', 1, 0],
    ['the last free failure starts the backoff: the base delay', 2, BASE],
    ['one more: doubled', 3, 2 * BASE],
    ['two more: doubled again', 4, 4 * BASE],
    ['capped at the max', 9, MAX],
    ['far past the cap (2^n overflows): still the max', 2_000, MAX],
  ])('%s', (_name, failures, wait) => {
    const { t } = throttle();
    // A different user name each time: the address alone is throttled.
    for (let i = 0; i < failures; i++) t.failed('10.0.0.1', `user-${i}`);
    expect(t.waitMs('10.0.0.1', 'someone-else')).toBe(wait);
  });

  test('the wait counts down with the clock', () => {
    const { t, advance } = throttle();
    for (let i = 0; i < 3; i++) t.failed('10.0.0.1', `u${i}`);
    advance(500);
    expect(t.waitMs('10.0.0.1', 'x')).toBe(2 * BASE - 500);
    advance(2 * BASE);
    expect(t.waitMs('10.0.0.1', 'x')).toBe(0);
  });

  test('success clears the address', () => {
    const { t } = throttle();
    for (let i = 0; i < 3; i++) t.failed('10.0.0.1', `u${i}`);
    t.succeeded('10.0.0.1', 'admin');
    expect(t.waitMs('10.0.0.1', 'x')).toBe(0);
    t.failed('10.0.0.1', 'x');
    expect(t.waitMs('10.0.0.1', 'x')).toBe(0);
  });

  test('an address with no failure for forgetAfterMs starts over', () => {
    const { t, advance } = throttle({ forgetAfterMs: 60_000 });
    for (let i = 0; i < 3; i++) t.failed('10.0.0.1', `u${i}`);
    advance(60_001);
    t.failed('10.0.0.1', 'x');
    expect(t.waitMs('10.0.0.1', 'y')).toBe(0);
  });

  test('memory is bounded: past maxKeys the least recently used address is dropped', () => {
    const { t } = throttle({ maxKeys: 3 });
    for (let i = 0; i < 3; i++) t.failed('10.0.0.9', `u${i}`);
    for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) t.failed(address, 'x');
    expect(t.waitMs('10.0.0.9', 'y')).toBe(0);
  });

  test('an IPv6 address counts as its /64; IPv4 (also IPv4-mapped) as itself', () => {
    expect(addressKey('2001:db8:1:2:aaaa::1')).toBe(addressKey('2001:db8:1:2:bbbb::2'));
    expect(addressKey('2001:db8:1:2::1')).not.toBe(addressKey('2001:db8:1:3::1'));
    expect(addressKey('::ffff:10.0.0.1')).not.toBe(addressKey('::ffff:10.0.0.2'));
    const { t } = throttle();
    for (let i = 0; i < 2; i++) t.failed(`2001:db8::${i + 1}`, `u${i}`);
    expect(t.waitMs('2001:db8::99', 'x')).toBe(BASE);
  });
});

describe('per user name: a token bucket of failures', () => {
  /** Exhausts the user's bucket from addresses that stay within their own free failures. */
  function exhaust(t: ReturnType<typeof throttle>['t'], user: string) {
    t.failed('10.0.1.1', user);
    t.failed('10.0.1.2', user);
  }

  test('with the bucket empty, an address that has failed waits for the next token', () => {
    const { t, advance } = throttle();
    exhaust(t, 'admin');
    expect(t.waitMs('10.0.1.1', 'admin')).toBe(REFILL);
    advance(REFILL / 4);
    expect(t.waitMs('10.0.1.2', 'admin')).toBe((3 * REFILL) / 4);
    // Another user name is not affected.
    expect(t.waitMs('10.0.1.1', 'auditor')).toBe(0);
  });

  test('with the bucket empty, an address with no failure on record is still heard', () => {
    const { t } = throttle();
    exhaust(t, 'admin');
    expect(t.waitMs('10.0.2.1', 'admin')).toBe(0);
    // Its failure spends it: the next guess from there waits like the others.
    t.failed('10.0.2.1', 'admin');
    expect(t.waitMs('10.0.2.1', 'admin')).toBe(REFILL);
  });

  test('one failure per refill interval: guessing stays at the fixed rate', () => {
    const { t, advance } = throttle();
    exhaust(t, 'admin');
    for (let round = 0; round < 5; round++) {
      advance(REFILL); // longer than MAX: the address's own backoff is over
      expect(t.waitMs('10.0.1.2', 'admin')).toBe(0);
      t.failed('10.0.1.2', 'admin');
      expect(t.waitMs('10.0.1.1', 'admin')).toBe(REFILL);
    }
  });

  test('the bucket refills to its size, not beyond', () => {
    const { t, advance } = throttle();
    exhaust(t, 'admin');
    advance(10 * REFILL);
    exhaust(t, 'admin');
    expect(t.waitMs('10.0.1.1', 'admin')).toBe(REFILL);
  });

  test('a success does not refill the user bucket', () => {
    const { t } = throttle();
    exhaust(t, 'admin');
    t.succeeded('10.0.2.1', 'admin');
    expect(t.waitMs('10.0.1.1', 'admin')).toBe(REFILL);
  });
});
