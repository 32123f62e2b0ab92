import { DeadlineCache } from './deadline-cache.js';

describe('deadline cache', () => {
  test.each([
    ['served just before its deadline', 9.999, 'v'],
    ['gone at its deadline', 10, undefined],
    ['gone after its deadline', 11, undefined],
  ])('%s', (_name, at, expected) => {
    const cache = new DeadlineCache<string>(10);
    cache.set('k', 'v', 10);
    expect(cache.get('k', at)).toBe(expected);
  });

  test('an expired entry is dropped when read', () => {
    const cache = new DeadlineCache<string>(10);
    cache.set('k', 'v', 10);
    expect(cache.size).toBe(1);
    cache.get('k', 10);
    expect(cache.size).toBe(0);
  });

  test('when full, the least recently used entry goes', () => {
    const cache = new DeadlineCache<string>(2);
    cache.set('a', 'A', 100);
    cache.set('b', 'B', 100);
    expect(cache.get('a', 0)).toBe('A'); // a is now the most recently used
    cache.set('c', 'C', 100);
    expect([cache.get('a', 0), cache.get('b', 0), cache.get('c', 0)]).toEqual(['A', undefined, 'C']);
    expect(cache.size).toBe(2);
  });

  test.each([0, -1])('a bound of %i remembers nothing', (max) => {
    const cache = new DeadlineCache<string>(max);
    cache.set('k', 'v', 100);
    expect(cache.get('k', 0)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  test('delete and clear forget entries', () => {
    const cache = new DeadlineCache<string>(10);
    cache.set('a', 'A', 100);
    cache.set('b', 'B', 100);
    cache.delete('a');
    expect([cache.get('a', 0), cache.get('b', 0)]).toEqual([undefined, 'B']);
    cache.clear();
    expect(cache.size).toBe(0);
  });
});
