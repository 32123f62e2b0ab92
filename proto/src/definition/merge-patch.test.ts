import { mergePatch } from './merge-patch.js';

// RFC 7396 Appendix A, row by row.
test.each([
  ['A.1 replace member', { a: 'b' }, { a: 'c' }, { a: 'c' }],
  ['A.2 add member', { a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
  ['A.3 null removes', { a: 'b' }, { a: null }, {}],
  ['A.4 null removes one of two', { a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
  ['A.5 value replaces array', { a: ['b'] }, { a: 'c' }, { a: 'c' }],
  ['A.6 array replaces value', { a: 'c' }, { a: ['b'] }, { a: ['b'] }],
  ['A.7 nested merge with removal', { a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
  ['A.8 arrays are replaced, not merged', { a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
  ['A.9 array replaces array', ['a', 'b'], ['c', 'd'], ['c', 'd']],
  ['A.10 array replaces object', { a: 'b' }, ['c'], ['c']],
  ['A.11 null patch', { a: 'foo' }, null, null],
  ['A.12 string patch', { a: 'foo' }, 'bar', 'bar'],
  ['A.13 null in target is kept', { e: null }, { a: 1 }, { e: null, a: 1 }],
  ['A.14 object patch over array target', [1, 2], { a: 'b', c: null }, { a: 'b' }],
  ['A.15 nested nulls removed from new members', {}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
])('%s', (_name, target, patch, expected) => {
  expect(mergePatch(target, patch)).toEqual(expected);
});

function scribble(v: unknown): void {
  if (Array.isArray(v)) {
    v.forEach(scribble);
    v.push('scribbled');
  } else if (typeof v === 'object' && v !== null) {
    Object.values(v).forEach(scribble);
    (v as Record<string, unknown>).scribbled = true;
  }
}

test.each([
  ['nested merge', { a: { b: 1, c: [1] } }, { a: { b: 2 } }],
  ['removal', { a: { b: 1 }, d: [2] }, { a: null }],
  ['new member from patch', { a: 1 }, { b: { c: [1, { d: 2 }] } }],
])('neither mutates nor shares its inputs: %s', (_name, target, patch) => {
  const t = structuredClone(target);
  const p = structuredClone(patch);
  const out = mergePatch(target, patch);
  expect(target).toEqual(t);
  expect(patch).toEqual(p);
  scribble(out); // mutating the result must not reach the inputs
  expect(target).toEqual(t);
  expect(patch).toEqual(p);
});

test('a __proto__ member stays a plain member', () => {
  const patch = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}');
  const out = mergePatch({}, patch) as Record<string, unknown>;
  expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
  expect(Object.hasOwn(out, '__proto__')).toBe(true);
  expect((out as { polluted?: boolean }).polluted).toBeUndefined();
});
