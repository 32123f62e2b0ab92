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
