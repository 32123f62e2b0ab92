import { backoffDelay } from './backoff.js';

const options = { baseMs: 500, maxMs: 30_000 };

describe('backoffDelay: full jitter over a capped exponential', () => {
  test.each([
    ['first failure, top of the range', 0, 0.999999, 499],
    ['first failure, bottom of the range', 0, 0, 0],
    ['second failure doubles the ceiling', 1, 0.5, 500],
    ['third failure', 2, 0.5, 1000],
    ['sixth failure: 500 * 2^5 = 16000', 5, 0.5, 8000],
    ['seventh failure is capped at max', 6, 0.5, 15_000],
    ['a huge attempt count stays capped (no Infinity/NaN)', 5000, 0.5, 15_000],
    ['negative attempt counts as the first', -3, 0.5, 250],
  ])('%s', (_name, attempt, random, expected) => {
    expect(backoffDelay(attempt, options, () => random)).toBe(expected);
  });

  test('the delay stays in [0, min(max, base * 2^attempt)) with the real random source', () => {
    for (let attempt = 0; attempt < 12; attempt++) {
      const ceiling = Math.min(options.maxMs, options.baseMs * 2 ** attempt);
      const delay = backoffDelay(attempt, options);
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThan(ceiling);
    }
  });
});
