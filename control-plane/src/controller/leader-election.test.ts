import { microTime } from './leader-election.js';

test('Lease times are RFC3339 with six fractional digits (what the apiserver parses as MicroTime)', () => {
  expect(microTime(Date.UTC(2026, 10, 22, 20, 1, 2, 345))).toBe('2026-11-22T20:01:02.345000Z');
});
