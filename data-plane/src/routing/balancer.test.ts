import { compileTarget, type CompiledTarget } from '#proto/compile/index';
import { createBalancer } from './balancer.js';

/** Targets http://a, http://b, … with the given weights; picks are reported by their letter. */
function picks(balancing: 'roundrobin' | 'weight', weights: number[], n: number): string[] {
  const targets: CompiledTarget[] = weights.map((weight, i) => {
    const template = `http://${String.fromCharCode(97 + i)}`;
    return { template, weight, plan: compileTarget(template, [], 'target') };
  });
  const balancer = createBalancer(balancing, targets);
  return Array.from({ length: n }, () => balancer.next().template.slice('http://'.length));
}

describe('createBalancer', () => {
  test.each([
    ['roundrobin over three targets', 'roundrobin', [1, 1, 1], 7, 'abcabca'],
    ['roundrobin ignores weights', 'roundrobin', [5, 1], 4, 'abab'],
    ['a single target is always picked', 'roundrobin', [1], 3, 'aaa'],
    ['weight 3:1 is smooth (a b never bunched as aaab)', 'weight', [3, 1], 8, 'aabaaaba'],
    ['weight 5:1:1 (nginx example)', 'weight', [5, 1, 1], 7, 'aabacaa'],
    ['weight 1:1 alternates', 'weight', [1, 1], 4, 'abab'],
    ['weight 0 counts as 1', 'weight', [0, 1], 4, 'abab'],
  ] as const)('%s', (_name, balancing, weights, n, expected) => {
    expect(picks(balancing, [...weights], n).join('')).toBe(expected);
  });

  test('weight 3:1 over 8 picks gives 6:2', () => {
    const all = picks('weight', [3, 1], 8);
    expect(all.filter((t) => t === 'a')).toHaveLength(6);
    expect(all.filter((t) => t === 'b')).toHaveLength(2);
  });

  test('no target is an error', () => {
    expect(() => createBalancer('roundrobin', [])).toThrow('at least one target');
  });
});

describe('createBalancer with target health', () => {
  /** Targets http://a, http://b, … with the given weights, each with a health view the test flips. */
  function checked(balancing: 'roundrobin' | 'weight', weights: number[]) {
    const targets: CompiledTarget[] = weights.map((weight, i) => {
      const template = `http://${String.fromCharCode(97 + i)}`;
      return { template, weight, plan: compileTarget(template, [], 'target') };
    });
    const health = targets.map(() => ({ healthy: true }));
    const balancer = createBalancer(balancing, targets, health);
    const picks = (n: number) => Array.from({ length: n }, () => balancer.next().template.slice('http://'.length)).join('');
    /** Marks the targets named by their letters unhealthy, every other healthy. */
    const down = (letters: string) => health.forEach((h, i) => (h.healthy = !letters.includes(String.fromCharCode(97 + i))));
    return { picks, down };
  }

  const counts = (picks: string) => Object.fromEntries([...new Set(picks)].sort().map((c) => [c, [...picks].filter((p) => p === c).length]));

  test('all healthy: the rotation is unchanged', () => {
    expect(checked('roundrobin', [1, 1, 1]).picks(7)).toBe('abcabca');
    expect(checked('weight', [5, 1, 1]).picks(7)).toBe('aabacaa');
  });

  test.each([
    ['the first of three', 3, 'a', 9, { b: 5, c: 4 }],
    ['the middle of three', 3, 'b', 9, { a: 5, c: 4 }],
    ['the last of three', 3, 'c', 9, { a: 5, b: 4 }],
    ['two of four, next to each other', 4, 'bc', 10, { a: 5, d: 5 }],
    ['two of five, apart', 5, 'bd', 9, { a: 3, c: 3, e: 3 }],
  ])('round robin skips unhealthy targets (%s) and shares evenly among the healthy', (_name, targets, unhealthy, n, expected) => {
    const { picks, down } = checked('roundrobin', Array<number>(targets).fill(1));
    down(unhealthy);
    const all = picks(n);
    expect(counts(all)).toEqual(expected);
    // Evenly over every window, not just in total: no healthy target picked twice before another once.
    for (let i = 0; i + 1 < all.length; i++) expect(all[i]).not.toBe(all[i + 1]);
  });

  test('a target is skipped only while unhealthy: flipped back, it is picked again in turn', () => {
    const { picks, down } = checked('roundrobin', [1, 1, 1]);
    down('b');
    expect(picks(4)).toBe('acac');
    down('');
    expect(counts(picks(6))).toEqual({ a: 2, b: 2, c: 2 });
  });

  test.each([
    ['3:1, the light one down', [3, 1], 'b', 8, { a: 8 }],
    ['3:1, the heavy one down', [3, 1], 'a', 8, { b: 8 }],
    ['5:1:1, the heavy one down', [5, 1, 1], 'a', 8, { b: 4, c: 4 }],
    ['2:1:1, one light one down', [2, 1, 1], 'c', 9, { a: 6, b: 3 }],
  ])('weighted balancing still skips unhealthy targets: %s', (_name, weights, unhealthy, n, expected) => {
    const { picks, down } = checked('weight', weights);
    down(unhealthy);
    expect(counts(picks(n))).toEqual(expected);
  });

  test.each([
    ['round robin', 'roundrobin', [1, 1, 1]],
    ['weighted 1:1:1', 'weight', [1, 1, 1]],
  ] as const)('all unhealthy: %s fails open and still rotates over every target', (_name, balancing, weights) => {
    const { picks, down } = checked(balancing, [...weights]);
    down('abc');
    expect(counts(picks(9))).toEqual({ a: 3, b: 3, c: 3 });
  });

  test('a single unhealthy target is still returned (fail open)', () => {
    const { picks, down } = checked('roundrobin', [1]);
    down('a');
    expect(picks(3)).toBe('aaa');
  });

  test.each([
    ['no health at all', undefined],
    ['null health', null],
  ])('%s: the balancer behaves as without health checks', (_name, health) => {
    const targets: CompiledTarget[] = ['http://a', 'http://b'].map((template) => ({ template, weight: 1, plan: compileTarget(template, [], 'target') }));
    const balancer = createBalancer('roundrobin', targets, health);
    expect(Array.from({ length: 4 }, () => balancer.next().template)).toEqual(['http://a', 'http://b', 'http://a', 'http://b']);
  });
});
