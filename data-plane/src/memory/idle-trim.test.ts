import { idleTrimmer } from './idle-trim.js';

/** Checks every second from 1 s to `to` s with `count(s)` requests so far; the steps taken, as [second, step]. */
function run(idleMs: number, to: number, count: (s: number) => number): [number, string][] {
  const t = idleTrimmer(idleMs, 0, 0);
  const steps: [number, string][] = [];
  for (let s = 1; s <= to; s++) {
    const step = t.check(s * 1_000, count(s));
    if (step) steps.push([s, step]);
  }
  return steps;
}

test('nothing before the first request, however long the data plane idles', () => {
  expect(run(10_000, 120, () => 0)).toEqual([]);
});

test('nothing while requests keep coming', () => {
  expect(run(10_000, 120, (s) => s)).toEqual([]);
});

test('a scavenge once requests stood still for the idle time, the full GC 6 s later, then nothing more in that idle time', () => {
  // Requests until 60 s, then none.
  expect(run(10_000, 200, (s) => Math.min(s, 60))).toEqual([
    [70, 'scavenge'],
    [76, 'full'],
  ]);
});

test('a request between the two collections starts over; a new idle time after more requests trims again', () => {
  // Requests until 10 s, one more at 18 s (after the scavenge at 15 s, before its full GC), one more at 60 s.
  const count = (s: number) => (s <= 10 ? s : s < 18 ? 10 : s < 60 ? 11 : 12);
  expect(run(5_000, 120, count)).toEqual([
    [15, 'scavenge'],
    [23, 'scavenge'],
    [29, 'full'],
    [65, 'scavenge'],
    [71, 'full'],
  ]);
});

test("V8's collections are what they are named: a scavenge and a mark-compact (node's gc performance entries)", async () => {
  const { v8Collections } = await import('./idle-trim.js');
  const { PerformanceObserver, constants } = await import('node:perf_hooks');
  const kinds: number[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) kinds.push((entry as unknown as { detail: { kind: number } }).detail.kind);
  });
  observer.observe({ entryTypes: ['gc'] });
  const collections = v8Collections();
  // Entries of any collection before this point (a new context allocates) are delivered and dropped below.
  await new Promise((resolve) => setTimeout(resolve, 50));
  // Each collection alone, its entry delivered before the next one runs; it is the first one after the call (the
  // collection runs inside it), whatever the process's own allocation collects later.
  const kindOf = async (collect: () => void) => {
    kinds.length = 0;
    collect();
    await new Promise((resolve) => setTimeout(resolve, 50));
    return kinds[0];
  };
  expect(await kindOf(() => collections.scavenge())).toBe(constants.NODE_PERFORMANCE_GC_MINOR);
  expect(await kindOf(() => collections.full())).toBe(constants.NODE_PERFORMANCE_GC_MAJOR);
  observer.disconnect();
});

test('the full GC runs only once the old generation grew by FULL_GC_AFTER_GROWTH since the last one; else a second scavenge', async () => {
  const { startIdleTrim, FULL_GC_AFTER_GROWTH } = await import('./idle-trim.js');
  const ran: string[] = [];
  let oldUsed = 50 * 2 ** 20;
  let requests = 0;
  const fullGcs: boolean[] = [];
  const trim = startIdleTrim({
    idleMs: 20,
    windowMs: 20,
    checkEveryMs: 5,
    requests: () => requests,
    collections: {
      scavenge: () => ran.push('scavenge'),
      // A full GC collects what was promoted: back to 50 MiB.
      full: () => {
        ran.push('full');
        oldUsed = 50 * 2 ** 20;
      },
      oldGenerationUsed: () => oldUsed,
    },
    trimmed: (_pause, _young, fullGc) => fullGcs.push(fullGc),
  });
  /** Requests, the old generation grown by `growth`, then an idle time long enough for a whole trim. */
  const burst = async (growth: number) => {
    requests += 100;
    oldUsed += growth;
    const trims = fullGcs.length;
    for (let waited = 0; fullGcs.length === trims && waited < 10_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
  };
  try {
    await burst(2 ** 20);
    // What the first burst promoted is still there: together exactly the bound.
    await burst(FULL_GC_AFTER_GROWTH - 2 ** 20);
    // Counted from the full GC's 50 MiB, not from the start: just below the bound.
    await burst(FULL_GC_AFTER_GROWTH - 1);
    expect(fullGcs).toEqual([false, true, false]);
    expect(ran).toEqual(['scavenge', 'scavenge', 'scavenge', 'full', 'scavenge', 'scavenge']);
  } finally {
    trim.stop();
  }
}, 40_000);
