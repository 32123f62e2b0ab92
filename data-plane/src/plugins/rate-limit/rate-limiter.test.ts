/**
 * The limiter against a real redis-server: the Lua script decides exactly as gcra.ts does, keys
 * expire with their TAT, and a Redis that goes away is replaced by in-process counting at once
 * (a bounded wait, never a refusal), counted in the degraded metric.
 */
import { Registry } from 'prom-client';
import { Redis } from 'ioredis';
import { rateLimitPlugin } from '#proto/plugins/rate-limit';
import { startRedisServer, type RedisServer } from '../../../../test/helpers/redis-server.js';
import { createRateLimiter, type RateLimiter } from './rate-limiter.js';
import type { RateDecision } from './gcra.js';

const limitOf = (config: object) => rateLimitPlugin.compile(rateLimitPlugin.schema.parse(config));

let redis: RedisServer;
const limiters: RateLimiter[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
});

afterAll(async () => {
  await Promise.all(limiters.map((l) => l.close()));
  await redis?.stop();
});

function limiter(options: Parameters<typeof createRateLimiter>[0]): RateLimiter {
  const made = createRateLimiter(options);
  limiters.push(made);
  return made;
}

async function decideAll(decide: (key: string) => RateDecision | Promise<RateDecision>, key: string, n: number): Promise<RateDecision[]> {
  const out: RateDecision[] = [];
  for (let i = 0; i < n; i++) out.push(await decide(key));
  return out;
}

async function metric(registry: Registry, reason: string): Promise<number> {
  const values = (await registry.getSingleMetric('gatehouse_rate_limit_degraded_total')!.get()).values;
  return values.find((v) => v.labels.reason === reason)?.value ?? 0;
}

/** enableOfflineQueue is off: until its socket is up, a limiter decides in-process. Wait for Redis. */
async function waitUntilShared(l: RateLimiter, registry: Registry): Promise<void> {
  const decide = l.decider(limitOf({ limit: '1000-S', policy: 'redis' }), 'api:probe');
  for (let i = 0; i < 100; i++) {
    const before = await metric(registry, 'redis_error');
    await decide(`probe:${i}`);
    if ((await metric(registry, 'redis_error')) === before) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('the limiter never reached Redis');
}

test('the Redis script decides step for step as the in-process GCRA, and its key expires with the TAT', async () => {
  const limit = limitOf({ limit: '5-M', policy: 'redis' });
  const registry = new Registry();
  const shared = limiter({ redisUrl: redis.url, registry });
  await waitUntilShared(shared, registry);
  const errorsBefore = await metric(registry, 'redis_error');
  const fromRedis = await decideAll(shared.decider(limit, 'api:a'), 'api:a:5-M:ip:1.2.3.4', 7);
  const inProcess = await decideAll(limiter({}).decider(limitOf({ limit: '5-M' }), 'api:a'), 'k', 7);
  const shape = (d: RateDecision) => ({ allowed: d.allowed, remaining: d.remaining });
  expect(fromRedis.map(shape)).toEqual(inProcess.map(shape));
  expect(fromRedis.map((d) => d.allowed)).toEqual([true, true, true, true, true, false, false]);
  // Refused: next one in one interval (12 s), full limit in one window (60 s), give or take the test's own time.
  expect(fromRedis[5].retryAfterUs).toBeGreaterThan(11_000_000);
  expect(fromRedis[5].retryAfterUs).toBeLessThanOrEqual(12_000_000);
  expect(fromRedis[5].resetInUs).toBeGreaterThan(59_000_000);
  const client = new Redis(redis.url);
  const ttl = await client.pttl('gatehouse:ratelimit:api:a:5-M:ip:1.2.3.4');
  await client.quit();
  expect(ttl).toBeGreaterThan(59_000);
  expect(ttl).toBeLessThanOrEqual(60_000);
  expect(await metric(registry, 'redis_error')).toBe(errorsBefore);
});

test('two limiters (two data planes) on one Redis share one count', async () => {
  const limit = limitOf({ limit: '4-M', policy: 'redis' });
  const [ra, rb] = [new Registry(), new Registry()];
  const [a, b] = [limiter({ redisUrl: redis.url, registry: ra }), limiter({ redisUrl: redis.url, registry: rb })];
  await waitUntilShared(a, ra);
  await waitUntilShared(b, rb);
  const key = 'api:shared:4-M:ip:9.9.9.9';
  const decisions = await Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).decider(limit, 'api:shared')(key)));
  expect(decisions.filter((d) => d.allowed)).toHaveLength(4);
});

test('policy redis without REDIS_URL is counted in-process and in the degraded metric', async () => {
  const registry = new Registry();
  const decide = limiter({ registry }).decider(limitOf({ limit: '2-M', policy: 'redis' }), 'api:no-url');
  expect((await decideAll(decide, 'k', 3)).map((d) => d.allowed)).toEqual([true, true, false]);
  expect(await metric(registry, 'no_redis_url')).toBe(3);
});

test('Redis stopped: every decision comes at once from in-process counting, limits still hold per data plane', async () => {
  const own = await startRedisServer();
  const registry = new Registry();
  const limit = limitOf({ limit: '3-M', policy: 'redis' });
  const l = limiter({ redisUrl: own.url, registry });
  await own.stop();
  const started = Date.now();
  const decisions = await decideAll(l.decider(limit, 'api:down'), 'api:down:3-M:ip:5.5.5.5', 4);
  expect(Date.now() - started).toBeLessThan(2000);
  expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, false]);
  expect(await metric(registry, 'redis_error')).toBe(4);
});

test('a Redis that answers late: a decision waits for it up to its timeout (RATE_LIMIT_REDIS_TIMEOUT), then is decided in-process', async () => {
  const limit = limitOf({ limit: '5-M', policy: 'redis' });
  const [patientMetrics, hastyMetrics] = [new Registry(), new Registry()];
  const patient = limiter({ redisUrl: redis.url, registry: patientMetrics, redisTimeoutMs: 10_000 });
  const hasty = limiter({ redisUrl: redis.url, registry: hastyMetrics, redisTimeoutMs: 50 });
  await waitUntilShared(patient, patientMetrics);
  await waitUntilShared(hasty, hastyMetrics);
  const [patientErrors, hastyErrors] = [await metric(patientMetrics, 'redis_error'), await metric(hastyMetrics, 'redis_error')];
  // A script that keeps Redis busy for 1.5 s: every other client's command waits behind it.
  const blocker = new Redis(redis.url);
  try {
    const busy = blocker.eval(
      "local t = redis.call('TIME'); local s = t[1] * 1000000 + t[2]; repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - s > 1500000; return 1",
      0,
    );
    await new Promise((r) => setTimeout(r, 200));
    const key = 'api:late:5-M:ip:7.7.7.7';
    const [fromRedis, inProcess] = await Promise.all([patient.decider(limit, 'api:late')(key), hasty.decider(limit, 'api:late')(key)]);
    expect(await busy).toBe(1);
    expect(fromRedis.allowed).toBe(true);
    expect(inProcess.allowed).toBe(true);
    expect(await metric(patientMetrics, 'redis_error')).toBe(patientErrors);
    expect(await metric(hastyMetrics, 'redis_error')).toBe(hastyErrors + 1);
    // A timeout does not take a sent command back: the hasty limiter's ran too once Redis was free, so
    // the shared count holds both requests (counted against the limit, never admitted twice by it).
    const next = await patient.decider(limit, 'api:late')(key);
    expect(next.remaining).toBe(2);
  } finally {
    await blocker.quit();
  }
});
