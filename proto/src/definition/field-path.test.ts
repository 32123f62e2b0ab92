import { assertNestingDepth, dropNulls, MAX_NESTING_DEPTH } from './field-path.js';

const nested = (depth: number, leaf: unknown = 1): unknown => (depth === 0 ? leaf : { a: nested(depth - 1, leaf) });

describe('dropNulls', () => {
  test('a value with no null member and no __proto__ member is returned as it is, not copied', () => {
    const value = { name: 'a', proxy: { methods: ['GET', null], upstreams: { targets: [{ target: 'http://a', weight: 1 }] } }, plugins: [] };
    expect(dropNulls(value)).toBe(value);
  });

  test('null members at any depth are dropped in a copy; the input is left as it was', () => {
    const value = { name: 'a', hosts: null, proxy: { listen_path: null, upstreams: { targets: [{ target: 'http://a', weight: null }] } } };
    const before = structuredClone(value);
    const out = dropNulls(value);
    expect(out).toEqual({ name: 'a', proxy: { upstreams: { targets: [{ target: 'http://a' }] } } });
    expect(value).toEqual(before);
  });

  test('null array elements stay (validation rejects them)', () => {
    expect(dropNulls({ hosts: [null], x: null })).toEqual({ hosts: [null] });
  });

  test('an own __proto__ member (JSON.parse makes one) is dropped even with no null anywhere', () => {
    const value = JSON.parse('{"proxy": {"__proto__": {"listen_path": "/sneaky"}}, "name": "a"}') as Record<string, unknown>;
    const out = dropNulls(value) as { proxy: object };
    expect(out).not.toBe(value);
    expect(Object.keys(out.proxy)).toEqual([]);
    expect((out.proxy as { listen_path?: string }).listen_path).toBeUndefined();
  });

  test('a value nested deeper than the limit is refused, in objects and in arrays, with or without nulls', () => {
    expect(dropNulls(nested(MAX_NESTING_DEPTH - 1))).toEqual(nested(MAX_NESTING_DEPTH - 1));
    expect(() => dropNulls(nested(MAX_NESTING_DEPTH + 1))).toThrow(`body nests deeper than ${MAX_NESTING_DEPTH} levels`);
    expect(() => dropNulls(nested(MAX_NESTING_DEPTH + 1, null))).toThrow('body nests deeper');
    let deepArray: unknown = 1;
    for (let i = 0; i <= MAX_NESTING_DEPTH; i++) deepArray = [deepArray];
    expect(() => dropNulls({ a: deepArray })).toThrow('body nests deeper');
    expect(() => assertNestingDepth(deepArray)).toThrow('body nests deeper');
  });

  test('a refusal leaves nothing behind for the next call (the walk shares its stacks)', () => {
    expect(() => dropNulls({ wide: Array.from({ length: 50 }, () => ({ x: null })), deep: nested(MAX_NESTING_DEPTH + 1) })).toThrow('body nests deeper');
    const clean = { a: { b: [1, 2] } };
    expect(dropNulls(clean)).toBe(clean);
    expect(dropNulls({ a: { b: null } })).toEqual({ a: {} });
  });
});
