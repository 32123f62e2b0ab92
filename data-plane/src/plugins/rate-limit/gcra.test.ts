import { gcra, type GcraStep } from './gcra.js';

/** 10 per second: one request per 100 ms, 10 at once. */
const INTERVAL = 100_000;
const WINDOW = 1_000_000;

/** Sends requests at the given times (µs) through gcra, storing the TAT as a limiter does. */
function run(times: number[]): GcraStep[] {
  let tat: number | undefined;
  return times.map((now) => {
    const step = gcra(tat, now, INTERVAL, WINDOW);
    if (step.allowed) tat = step.tat;
    return step;
  });
}

test('a fresh client gets the whole limit at once, remaining counting down, then a refusal', () => {
  const steps = run(Array(11).fill(0));
  expect(steps.map((s) => s.allowed)).toEqual([...Array(10).fill(true), false]);
  expect(steps.map((s) => s.remaining)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0]);
  expect(steps[0].resetInUs).toBe(INTERVAL);
  expect(steps[9].resetInUs).toBe(WINDOW);
  // Refused: the next request is possible one interval later; the full limit after the window.
  expect(steps[10]).toMatchObject({ allowed: false, retryAfterUs: INTERVAL, resetInUs: WINDOW });
});

test.each([
  ['one interval later, one more request passes', INTERVAL, [true, false]],
  ['just before one interval, none', INTERVAL - 1, [false]],
  ['a whole window later, the whole limit again', WINDOW, [...Array(10).fill(true), false]],
])('after a burst: %s', (_row, wait, expected) => {
  const burst = Array(10).fill(0);
  const after = run([...burst, ...expected.map(() => wait)]).slice(10);
  expect(after.map((s) => s.allowed)).toEqual(expected);
});

test('a refused request does not count: waiting the Retry-After is enough', () => {
  const steps = run([...Array(10).fill(0), 50_000, 50_000, 100_000]);
  expect(steps.slice(10).map((s) => s.allowed)).toEqual([false, false, true]);
  expect(steps[10].retryAfterUs).toBe(50_000);
});

test('a steady client at the rate is never refused; twice the rate gets half through', () => {
  const steady = run(Array.from({ length: 100 }, (_, i) => i * INTERVAL));
  expect(steady.every((s) => s.allowed)).toBe(true);
  const fast = run(Array.from({ length: 200 }, (_, i) => i * (INTERVAL / 2)));
  // 10 of the burst, then one per interval over 9.95 s: 10 + 99.
  expect(fast.filter((s) => s.allowed).length).toBe(109);
});

test('a TAT in the past counts as now', () => {
  expect(gcra(5, 1_000_000_000, INTERVAL, WINDOW)).toMatchObject({ allowed: true, remaining: 9, tat: 1_000_000_000 + INTERVAL });
});
