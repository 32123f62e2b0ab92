import { idleTrimmer } from './idle-trim.js';

function trimmer(idleMs = 10_000) {
  const trims: number[] = [];
  let now = 0;
  const t = idleTrimmer(idleMs, () => trims.push(now), 0, 0);
  return { trims, at: (ms: number, requests: number) => ((now = ms), t.check(ms, requests)) };
}

test('no trim before the first request, however long the data plane idles', () => {
  const { trims, at } = trimmer();
  for (let ms = 1_000; ms <= 60_000; ms += 1_000) at(ms, 0);
  expect(trims).toEqual([]);
});

test('one trim once requests have stood still for the idle time, none while they keep coming', () => {
  const { trims, at } = trimmer();
  // A request every second for a minute: never idle for 10 s.
  for (let s = 1; s <= 60; s++) at(s * 1_000, s);
  expect(trims).toEqual([]);
  // Then nothing: the count last changed at 60 s.
  for (let s = 61; s <= 69; s++) at(s * 1_000, 60);
  expect(trims).toEqual([]);
  expect(at(70_000, 60)).toBe(true);
  expect(trims).toEqual([70_000]);
  // Still idle: not again.
  for (let s = 71; s <= 200; s++) at(s * 1_000, 60);
  expect(trims).toEqual([70_000]);
});

test('a new idle time after more requests trims again', () => {
  const { trims, at } = trimmer(5_000);
  at(1_000, 3);
  at(6_000, 3);
  at(7_000, 4);
  at(11_000, 4);
  at(12_000, 4);
  expect(trims).toEqual([6_000, 12_000]);
});
