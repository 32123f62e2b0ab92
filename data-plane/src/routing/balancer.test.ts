import fc from 'fast-check';
import { compileTarget, type CompiledTarget } from '#proto/compile/index';
import { createBalancer } from './balancer.js';

/** Targets http://a, http://b, … with the given weights; picks are reported by their letter. */
function picks(balancing: 'roundrobin' | 'weight', weights: number[], n: number): string[] {
  const targets: CompiledTarget[] = weights.map((weight, i) => {
    const template = `http://${String.fromCharCode(97 + i)}`;
    return { template, weight, hostPattern: null, plan: compileTarget(template, [], 'target') };
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
      return { template, weight, hostPattern: null, plan: compileTarget(template, [], 'target') };
    });
    const health = targets.map(() => ({ healthy: true }));
    const balancer = createBalancer(balancing, targets, health);
    const picks = (n: number) => Array.from({ length: n }, () => balancer.next().template.slice('http://'.length)).join('');
    /** Marks the targets named by their letters unhealthy, every other healthy. */
    const down = (letters: string) =>
      health.forEach((h, i) => {
        h.healthy = !letters.includes(String.fromCharCode(97 + i));
      });
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
    const targets: CompiledTarget[] = ['http://a', 'http://b'].map((template) => ({
      template,
      weight: 1,
      hostPattern: null,
      plan: compileTarget(template, [], 'target'),
    }));
    const balancer = createBalancer('roundrobin', targets, health);
    expect(Array.from({ length: 4 }, () => balancer.next().template)).toEqual(['http://a', 'http://b', 'http://a', 'http://b']);
  });
});

/** Targets http://a, http://b, … with the given weights (or the given URLs), each with a health view the test flips. */
function route(balancing: 'least_conn' | 'hash', weights: number[], templates = weights.map((_, i) => `http://${String.fromCharCode(97 + i)}`)) {
  const targets: CompiledTarget[] = templates.map((template, i) => ({
    template,
    weight: weights[i]!,
    hostPattern: null,
    plan: compileTarget(template, [], 'target'),
  }));
  const health = targets.map(() => ({ healthy: true }));
  const balancer = createBalancer(balancing, targets, health);
  const letter = (t: CompiledTarget) => t.template.slice('http://'.length);
  const byLetter = (l: string) => targets.find((t) => letter(t) === l)!;
  /** Marks the targets named by their letters unhealthy, every other healthy. */
  const down = (letters: string) =>
    health.forEach((h, i) => {
      h.healthy = !letters.includes(letter(targets[i]!));
    });
  return { balancer, targets, letter, byLetter, down };
}

const tally = (picks: string[]) => {
  const counts: Record<string, number> = {};
  for (const p of picks) counts[p] = (counts[p] ?? 0) + 1;
  return counts;
};

describe('least_conn', () => {
  /** `inFlight`: the attempts in flight per target letter, set before each pick. */
  function withLoads(weights: number[], inFlight: Record<string, number>) {
    const r = route('least_conn', weights);
    for (const [l, n] of Object.entries(inFlight)) r.balancer.loadOf(r.byLetter(l))!.inFlight = n;
    return r;
  }

  test('every target has its own count; the other balancers count nothing', () => {
    const { balancer, targets } = route('least_conn', [1, 1]);
    const loads = targets.map((t) => balancer.loadOf(t));
    expect(loads[0]).not.toBeNull();
    expect(loads[0]).not.toBe(loads[1]);
    expect(balancer.loadOf(targets[0]!)).toBe(loads[0]);
    for (const other of ['roundrobin', 'weight', 'hash'] as const) expect(createBalancer(other, targets).loadOf(targets[0]!)).toBeNull();
    expect(createBalancer('least_conn', [targets[0]!]).loadOf(targets[0]!)).toBeNull();
  });

  test('equal targets with equal counts take turns (ties broken round robin)', () => {
    const { balancer, letter } = route('least_conn', [1, 1, 1]);
    expect(Array.from({ length: 7 }, () => letter(balancer.next())).join('')).toBe('abcabca');
  });

  test('the target with the fewest attempts in flight is picked', () => {
    const { balancer, letter } = withLoads([1, 1, 1], { a: 3, b: 1, c: 2 });
    expect(Array.from({ length: 3 }, () => letter(balancer.next())).join('')).toBe('bbb');
  });

  test('picks that start attempts spread them until the counts are even', () => {
    const { balancer, letter } = withLoads([1, 1, 1], { a: 4 });
    const picks = Array.from({ length: 8 }, () => {
      const t = balancer.next();
      balancer.loadOf(t)!.inFlight++;
      return letter(t);
    });
    expect(tally(picks)).toEqual({ b: 4, c: 4 });
  });

  test.each([
    ['2 of weight 2 against 1 of weight 1: a tie, shared by weight (smooth 2:1)', [2, 1], { a: 2, b: 1 }, 'abaa'],
    ['1 of weight 2 against 1 of weight 1: the heavier is less loaded', [2, 1], { a: 1, b: 1 }, 'aaaa'],
    ['3 of weight 2 against 1 of weight 1', [2, 1], { a: 3, b: 1 }, 'bbbb'],
  ])('compares in-flight / weight: %s', (_name, weights, inFlight, expected) => {
    const { balancer, letter } = withLoads(weights, inFlight);
    expect(Array.from({ length: 4 }, () => letter(balancer.next())).join('')).toBe(expected);
  });

  test('under light load (every count 0) weights 3:1 still give 6:2 over 8 picks, smoothly (nginx)', () => {
    const { balancer, letter } = route('least_conn', [3, 1]);
    expect(Array.from({ length: 8 }, () => letter(balancer.next())).join('')).toBe('aabaaaba');
  });

  test('an unhealthy target is skipped however idle; all unhealthy: the least loaded of all (fail open)', () => {
    const { balancer, letter, down } = withLoads([1, 1, 1], { a: 0, b: 5, c: 6 });
    down('a');
    expect(letter(balancer.next())).toBe('b');
    down('abc');
    expect(letter(balancer.next())).toBe('a');
  });

  test('a retry leaves out the target it moves from while another will do', () => {
    const { balancer, letter, byLetter, down } = withLoads([1, 1, 1], { a: 0, b: 5, c: 6 });
    expect(letter(balancer.next(null, byLetter('a')))).toBe('b');
    down('bc');
    expect(letter(balancer.next(null, byLetter('a')))).toBe('a');
  });
});

/** The same keys at every run (fast-check's generator, seeded). */
const seededKeys = (n: number): string[] => fc.sample(fc.uuid(), { seed: 0x5eed, numRuns: n });

describe('hash (rendezvous)', () => {
  const KEYS = seededKeys(6000);
  const mapping = (r: ReturnType<typeof route>, keys = KEYS) => keys.map((k) => r.letter(r.balancer.next(k)));

  test('the same key gives the same target, whatever was picked in between', () => {
    const r = route('hash', [1, 1, 1, 1]);
    const first = mapping(r, KEYS.slice(0, 200));
    r.balancer.next(null);
    r.balancer.next('someone-else');
    expect(mapping(r, KEYS.slice(0, 200))).toEqual(first);
    // Another balancer over the same targets (another data plane, another worker) agrees.
    expect(mapping(route('hash', [1, 1, 1, 1]), KEYS.slice(0, 200))).toEqual(first);
  });

  test('different keys spread evenly over equal targets', () => {
    const counts = tally(mapping(route('hash', [1, 1, 1, 1])));
    for (const l of 'abcd') expect(Math.abs(counts[l]! / KEYS.length - 0.25)).toBeLessThan(0.03);
  });

  test('weights 3:1 win keys 3:1', () => {
    const counts = tally(mapping(route('hash', [3, 1])));
    expect(Math.abs(counts.a! / KEYS.length - 0.75)).toBeLessThan(0.03);
  });

  test('the order of the targets does not matter', () => {
    const urls = ['http://a', 'http://b', 'http://c'];
    expect(mapping(route('hash', [1, 1, 1], [...urls].reverse()))).toEqual(mapping(route('hash', [1, 1, 1], urls)));
  });

  test('removing one of 5 targets moves only its keys (~1/5), each to another target; adding one takes ~1/6 and only for itself', () => {
    const five = mapping(route('hash', [1, 1, 1, 1, 1]));
    const four = mapping(route('hash', [1, 1, 1, 1]));
    const moved = KEYS.filter((_, i) => five[i] !== four[i]);
    expect(KEYS.every((_, i) => five[i] === 'e' || five[i] === four[i])).toBe(true);
    expect(Math.abs(moved.length / KEYS.length - 1 / 5)).toBeLessThan(0.03);
    const six = mapping(route('hash', [1, 1, 1, 1, 1, 1]));
    expect(KEYS.every((_, i) => six[i] === 'f' || six[i] === five[i])).toBe(true);
    expect(Math.abs(six.filter((l) => l === 'f').length / KEYS.length - 1 / 6)).toBeLessThan(0.03);
  });

  test("an unhealthy target's keys move to the others (only its keys) and come back when it is healthy", () => {
    const r = route('hash', [1, 1, 1]);
    const before = mapping(r);
    r.down('b');
    const during = mapping(r);
    expect(during).not.toContain('b');
    expect(KEYS.every((_, i) => before[i] === 'b' || during[i] === before[i])).toBe(true);
    const movedTo = tally(during.filter((_, i) => before[i] === 'b'));
    expect(Object.keys(movedTo).sort()).toEqual(['a', 'c']);
    r.down('');
    expect(mapping(r)).toEqual(before);
  });

  test('all unhealthy: keys keep the targets they had (fail open)', () => {
    const r = route('hash', [1, 1, 1]);
    const before = mapping(r);
    r.down('abc');
    expect(mapping(r)).toEqual(before);
  });

  test.each([
    ['null', null],
    ['absent', undefined],
    ['empty', ''],
  ])('no key (%s): round robin, weights respected', (_name, key) => {
    const r = route('hash', [1, 1, 1]);
    expect(Array.from({ length: 6 }, () => r.letter(r.balancer.next(key))).join('')).toBe('abcabc');
    const weighted = route('hash', [3, 1]);
    expect(Array.from({ length: 4 }, () => weighted.letter(weighted.balancer.next(key))).join('')).toBe('aaba');
  });

  test("a retry goes to the key's next target, not the one it moves from", () => {
    const r = route('hash', [1, 1, 1]);
    for (const key of KEYS.slice(0, 100)) {
      const first = r.balancer.next(key);
      const second = r.balancer.next(key, first);
      expect(second).not.toBe(first);
      expect(r.balancer.next(key, first)).toBe(second);
    }
  });

  test('a URL listed twice is two targets that both win keys', () => {
    const r = route('hash', [1, 1], ['http://a', 'http://a']);
    const picked = new Set(KEYS.slice(0, 200).map((k) => r.balancer.next(k)));
    expect(picked.size).toBe(2);
  });
});
