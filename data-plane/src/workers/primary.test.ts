import { readinessOf, restartDelay } from './primary.js';

describe('restartDelay', () => {
  test('100 ms after a first death, doubling with each quick death after it, capped at 30 s', () => {
    expect([1, 2, 3, 4, 9, 10, 20].map(restartDelay)).toEqual([100, 200, 400, 800, 25_600, 30_000, 30_000]);
  });
});

describe('readinessOf', () => {
  const serving = (worker: number, version: number) => ({ worker, pid: 100 + worker, version, hash: `h${version}` });

  test('ready with the oldest version any worker serves, so "version >= V" means every worker has V', () => {
    const workers = [serving(1, 7), serving(2, 6), serving(3, 7)];
    expect(readinessOf(workers)).toEqual({ ready: true, version: 6, hash: 'h6', workers });
  });

  test('not ready while one worker serves nothing (not listening, silent, or without a snapshot)', () => {
    const workers = [serving(1, 7), { worker: 2, pid: null, version: null, hash: null }];
    expect(readinessOf(workers)).toEqual({ ready: false, reason: "no snapshot yet in worker 2 (each worker's log says why)", workers });
  });
});
