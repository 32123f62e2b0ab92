import fc from 'fast-check';
import { LayeredMap } from './layered-map.js';

/** Batches of sets and removals over few keys, some batches large enough to fold the overlay into a new flat map. */
const batchArb = fc.array(
  fc.tuple(
    fc.integer({ min: 0, max: 150 }).map((k) => `k${k}`),
    fc.option(fc.integer(), { nil: undefined }),
  ),
  { maxLength: 120 },
);

const KEYS = Array.from({ length: 151 }, (_, k) => `k${k}`);

const contents = (map: LayeredMap<string, number>) => [...map.entries()].sort(([a], [b]) => (a < b ? -1 : 1));

test('every version answers like a Map that had the same changes made, and older versions stay as they were', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.nat(), batchArb), { minLength: 1, maxLength: 12 }), (steps) => {
      const versions: { map: LayeredMap<string, number>; model: Map<string, number> }[] = [{ map: LayeredMap.of(), model: new Map() }];
      for (const [pick, batch] of steps) {
        // Derive from any earlier version, not only the newest (a DP keeps serving the old one).
        const from = versions[pick % versions.length];
        const model = new Map(from.model);
        for (const [key, value] of batch) {
          if (value === undefined) model.delete(key);
          else model.set(key, value);
        }
        versions.push({ map: from.map.with(batch), model });
      }
      for (const { map, model } of versions) {
        expect(map.size).toBe(model.size);
        expect(contents(map)).toEqual([...model.entries()].sort(([a], [b]) => (a < b ? -1 : 1)));
        expect(KEYS.map((key) => [map.get(key), map.has(key)])).toEqual(KEYS.map((key) => [model.get(key), model.has(key)]));
        expect([...map.keys()].length).toBe(model.size);
        expect([...map.values()].sort()).toEqual([...model.values()].sort());
      }
    }),
    { numRuns: 200 },
  );
});
