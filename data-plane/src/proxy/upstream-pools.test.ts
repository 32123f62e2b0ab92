import { createUpstreamPools } from './upstream-pools.js';

const verify = { dialTimeoutMs: 1000, insecureSkipVerify: false };

describe('upstream pools', () => {
  test.each([
    ['same origin and options share a pool', 'http://a:1', verify, 'http://a:1', verify, true],
    ['another origin gets its own pool', 'http://a:1', verify, 'http://b:1', verify, false],
    ['insecure_skip_verify never shares a pool with verified TLS', 'https://a:1', verify, 'https://a:1', { ...verify, insecureSkipVerify: true }, false],
    ['another dial timeout gets its own pool', 'http://a:1', verify, 'http://a:1', { ...verify, dialTimeoutMs: 5 }, false],
  ])('%s', async (_name, originA, optionsA, originB, optionsB, shared) => {
    const pools = createUpstreamPools();
    const a = pools.get(originA, optionsA);
    const b = pools.get(originB, optionsB);
    expect(a === b).toBe(shared);
    expect(pools.size).toBe(shared ? 1 : 2);
    await pools.close();
  });

  test('past maxPools the least recently used pool is closed', async () => {
    const pools = createUpstreamPools({ maxPools: 2 });
    const a = pools.get('http://a:1', verify);
    const b = pools.get('http://b:1', verify);
    expect(pools.get('http://a:1', verify)).toBe(a); // a is now the most recently used
    pools.get('http://c:1', verify);
    expect(pools.size).toBe(2);
    expect(b.closed).toBe(true);
    expect(a.closed).toBe(false);
    await pools.close();
    expect(a.closed).toBe(true);
    expect(() => pools.get('http://a:1', verify)).toThrow('closed');
  });
});
