import { pino } from 'pino';
import { Redis } from 'ioredis';
import { accessKey, createMemoryTokenStore, createRedisTokenStore, createTokenStore, refreshKey, type TokenStore } from './token-store.js';
import { freePort } from '../../../test/helpers/free-port.js';
import { startRedisServer, type RedisServer } from '../../../test/helpers/redis-server.js';

const logger = pino({ enabled: false });

function clock(start = 1_700_000_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms) };
}

describe('key names', () => {
  test('access keys are namespaced per server and hold a SHA-256, never the token', () => {
    const key = accessKey('auth', 'secret-token');
    expect(key).toMatch(/^gatehouse:token:auth:[0-9a-f]{64}$/);
    expect(key).not.toContain('secret-token');
    expect(accessKey('other', 'secret-token')).not.toBe(key);
  });
  test('refresh keys live in their own namespace', () => {
    expect(refreshKey('auth', 'r')).toMatch(/^gatehouse:refresh:auth:[0-9a-f]{64}$/);
  });
});

describe('memory token store', () => {
  test.each([
    ['valid just before expiry', 10, 9_999, true],
    ['gone at expiry', 10, 10_000, false],
    ['gone after expiry', 10, 60_000, false],
    ['fractional TTL rounds up to whole seconds', 0.2, 999, true],
  ])('%s', async (_name, ttl, elapsedMs, expected) => {
    const c = clock();
    const store = createMemoryTokenStore({ now: c.now });
    await store.put('auth', 'tok', ttl);
    c.advance(elapsedMs);
    expect(await store.has('auth', 'tok')).toBe(expected);
  });

  test('tokens are per server', async () => {
    const store = createMemoryTokenStore();
    await store.put('a', 'tok', 60);
    expect(await store.has('a', 'tok')).toBe(true);
    expect(await store.has('b', 'tok')).toBe(false);
  });

  test('delete removes a token', async () => {
    const store = createMemoryTokenStore();
    await store.put('a', 'tok', 60);
    await store.delete('a', 'tok');
    expect(await store.has('a', 'tok')).toBe(false);
  });

  test('bounded: the oldest entry goes when full', async () => {
    const store = createMemoryTokenStore({ maxEntries: 2 });
    await store.put('a', 't1', 60);
    await store.put('a', 't2', 60);
    await store.put('a', 't3', 60);
    expect([await store.has('a', 't1'), await store.has('a', 't2'), await store.has('a', 't3')]).toEqual([false, true, true]);
  });

  test('bounded: a token that was read outlives one stored after it', async () => {
    const store = createMemoryTokenStore({ maxEntries: 2 });
    await store.put('a', 't1', 60);
    await store.put('a', 't2', 60);
    expect(await store.has('a', 't1')).toBe(true);
    await store.put('a', 't3', 60);
    expect([await store.has('a', 't1'), await store.has('a', 't2'), await store.has('a', 't3')]).toEqual([true, false, true]);
  });

  test('refresh links are bounded on their own: the least recently used goes when full', async () => {
    const store = createMemoryTokenStore({ maxEntries: 2 });
    await store.put('a', 'access', 60);
    await store.linkRefresh('a', 'r1', 'access1', 60);
    await store.linkRefresh('a', 'r2', 'access2', 60);
    await store.linkRefresh('a', 'r3', 'access3', 60);
    expect(await store.accessForRefresh('a', 'r1')).toBeNull();
    expect([await store.accessForRefresh('a', 'r2'), await store.accessForRefresh('a', 'r3')]).toEqual(['access2', 'access3']);
    expect(await store.has('a', 'access')).toBe(true);
  });

  test('refresh links expire with their TTL and can be deleted', async () => {
    const c = clock();
    const store = createMemoryTokenStore({ now: c.now });
    await store.linkRefresh('a', 'r1', 'access1', 5);
    await store.linkRefresh('a', 'r2', 'access2', 5);
    expect(await store.accessForRefresh('a', 'r1')).toBe('access1');
    await store.deleteRefresh('a', 'r1');
    expect(await store.accessForRefresh('a', 'r1')).toBeNull();
    c.advance(5_000);
    expect(await store.accessForRefresh('a', 'r2')).toBeNull();
  });

  test('createTokenStore without REDIS_URL is the in-process store', async () => {
    const store = createTokenStore({ logger });
    await store.put('a', 'tok', 60);
    expect(await store.has('a', 'tok')).toBe(true);
    await store.close();
  });
});

describe('redis token store (real redis-server)', () => {
  let redis: RedisServer;
  let store: TokenStore;

  beforeAll(async () => {
    redis = await startRedisServer();
    store = createRedisTokenStore({ url: redis.url, logger });
    await waitReady(store);
  });
  afterAll(async () => {
    await store?.close();
    await redis?.stop();
  });

  test('put / has / delete', async () => {
    await store.put('auth', 'tok-1', 60);
    expect(await store.has('auth', 'tok-1')).toBe(true);
    expect(await store.has('auth', 'unknown')).toBe(false);
    expect(await store.has('other', 'tok-1')).toBe(false);
    await store.delete('auth', 'tok-1');
    expect(await store.has('auth', 'tok-1')).toBe(false);
  });

  test('keys are hashed and carry the TTL (SET EX)', async () => {
    await store.put('auth', 'raw-token-value', 30);
    const client = new Redis(redis.url);
    try {
      const keys = await client.keys('gatehouse:*');
      expect(keys).toContain(accessKey('auth', 'raw-token-value'));
      expect(keys.join(' ')).not.toContain('raw-token-value');
      const ttl = await client.ttl(accessKey('auth', 'raw-token-value'));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(30);
    } finally {
      client.disconnect();
    }
  });

  test('expiry after the TTL', async () => {
    await store.put('auth', 'short', 1);
    expect(await store.has('auth', 'short')).toBe(true);
    await new Promise((r) => setTimeout(r, 1_100));
    expect(await store.has('auth', 'short')).toBe(false);
  });

  test('refresh links', async () => {
    await store.linkRefresh('auth', 'refresh-1', 'access-1', 60);
    expect(await store.accessForRefresh('auth', 'refresh-1')).toBe('access-1');
    await store.deleteRefresh('auth', 'refresh-1');
    expect(await store.accessForRefresh('auth', 'refresh-1')).toBeNull();
  });

  test('two stores on one redis share tokens (DP replicas)', async () => {
    const second = createTokenStore({ redisUrl: redis.url, logger });
    try {
      await store.put('auth', 'shared', 60);
      await waitReady(second);
      expect(await second.has('auth', 'shared')).toBe(true);
    } finally {
      await second.close();
    }
  });
});

/** A fresh client rejects until its connection is up (no offline queue): retry briefly. */
async function waitReady(store: TokenStore): Promise<void> {
  for (let i = 0; i < 50; i++) {
    try {
      await store.has('probe', 'probe');
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

describe('redis token store when redis is unreachable', () => {
  test('has() rejects quickly when nothing listens', async () => {
    const port = await freePort();
    const store = createRedisTokenStore({ url: `redis://127.0.0.1:${port}`, logger });
    try {
      const started = Date.now();
      await expect(store.has('auth', 'tok')).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(5_000); // fails closed instead of hanging (commands time out after 1 s)
    } finally {
      await store.close();
    }
  });

  test('has() rejects quickly after redis goes away, and works again once it is back', async () => {
    const redis = await startRedisServer();
    const store = createRedisTokenStore({ url: redis.url, logger });
    let restarted: RedisServer | undefined;
    try {
      await waitReady(store);
      await store.put('auth', 'tok', 60);
      expect(await store.has('auth', 'tok')).toBe(true);
      await redis.stop();
      const started = Date.now();
      await expect(store.has('auth', 'tok')).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(5_000); // fails closed instead of hanging (commands time out after 1 s)

      restarted = await startRedisServer({ port: redis.port });
      await waitReady(store);
      // A restarted redis without persistence lost the token: unknown, not an error.
      expect(await store.has('auth', 'tok')).toBe(false);
    } finally {
      await store.close();
      await restarted?.stop();
      await redis.stop();
    }
  });
});
