/**
 * The counters of rate_limit, one instance per data plane (main.ts makes it; it outlives snapshots,
 * so applying a new configuration never resets a client's count).
 *
 * - in-process: GCRA TATs in one LRU cache (at most LOCAL_MAX_KEYS clients over all routes; an
 *   evicted client starts afresh, which can only admit more, never refuse wrongly).
 * - Redis (`REDIS_URL`): the same GCRA in one Lua script, so read, decide and write are one atomic
 *   step on the Redis server and its clock: every data plane shares one count per client. Keys are
 *   `gatehouse:ratelimit:<route id>:<rate>:<client>` and expire when their TAT is reached (≤ one period).
 *
 * Degraded, never refusing because of Redis: a route with `policy: redis` on a data plane without
 * `REDIS_URL` is counted in-process (warned once per API); a Redis command that fails or takes over
 * its timeout (`RATE_LIMIT_REDIS_TIMEOUT`) is decided in-process too (warned once per outage). Both are counted in
 * `gatehouse_rate_limit_degraded_total{reason}`.
 */
import type { Redis as RedisClient } from 'ioredis';
import { loadRedis } from '../../redis.js';
import { LRUCache } from 'lru-cache';
import { Counter, type Registry } from 'prom-client';
import type { CompiledRateLimit } from '#proto/plugins/index';
import type { Logger } from '#proto/logger';
import { gcra, type RateDecision } from './gcra.js';

export const LOCAL_MAX_KEYS = 100_000;
/**
 * A request waits at most this long for Redis before it is decided in-process (`RATE_LIMIT_REDIS_TIMEOUT`):
 * a rate-limit decision must never add more than this to a request, even with Redis hanging.
 */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 250;

export type RateLimiterLogger = Pick<Logger, 'info' | 'warn'>;

/** Decides one request of a client (its full key), synchronously when counted in-process. */
export type Decide = (key: string) => RateDecision | Promise<RateDecision>;

export interface RateLimiter {
  /** Once per route and snapshot: the decision function for this limit. */
  decider(limit: CompiledRateLimit, routeId: string): Decide;
  close(): Promise<void>;
}

/**
 * KEYS[1] the client's key; ARGV interval and window in µs. Returns {allowed, remaining,
 * reset in µs, retry after in µs}: gcra.ts, step for step, on the Redis clock. Numbers are
 * formatted explicitly: Redis would turn a Lua number argument into 14 significant digits.
 */
const GCRA_SCRIPT = `
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0) or 0
if tat < now then tat = now end
local next = tat + interval
local allow_at = next - window
if allow_at > now then
  return {0, 0, tat - now, allow_at - now}
end
redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', string.format('%.0f', math.ceil((next - now) / 1000)))
return {1, math.floor((window - (next - now)) / interval), next - now, 0}
`;

type GcraCommand = (key: string, intervalUs: number, windowUs: number) => Promise<[number, number, number, number]>;

export function createRateLimiter(deps: {
  redisUrl?: string;
  logger?: RateLimiterLogger;
  registry?: Registry;
  /** Microseconds since the epoch (tests pass their own clock). */
  nowUs?: () => number;
  maxKeys?: number;
  /** How long a decision waits for Redis; DEFAULT_REDIS_COMMAND_TIMEOUT_MS when unset. */
  redisTimeoutMs?: number;
}): RateLimiter {
  const { logger } = deps;
  const nowUs = deps.nowUs ?? (() => Date.now() * 1000);
  // Created at the first in-process decision: lru-cache allocates for all its keys up front, and most data
  // planes have no rate_limit plugin at all.
  let tats: LRUCache<string, number> | undefined;
  const degraded = deps.registry
    ? new Counter({
        name: 'gatehouse_rate_limit_degraded_total',
        help: 'rate_limit decisions with policy redis made in-process: REDIS_URL unset (no_redis_url) or Redis failed or timed out (redis_error).',
        labelNames: ['reason'],
        registers: [deps.registry],
      })
    : null;
  const noRedisUrl = degraded?.labels('no_redis_url');
  const redisError = degraded?.labels('redis_error');

  function local(key: string, limit: CompiledRateLimit): RateDecision {
    tats ??= new LRUCache<string, number>({ max: deps.maxKeys ?? LOCAL_MAX_KEYS });
    const step = gcra(tats.get(key), nowUs(), limit.intervalUs, limit.windowUs);
    if (step.allowed) tats.set(key, step.tat);
    return step;
  }

  const redis = deps.redisUrl ? connect(deps.redisUrl) : null;
  let outage = false;

  function connect(url: string): { client: RedisClient; gcra: GcraCommand } {
    const client = new (loadRedis())(url, {
      connectTimeout: 1000,
      commandTimeout: deps.redisTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS,
      // While disconnected a command fails at once (decided in-process) instead of queueing.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // Reconnect forever with a capped delay: the data plane outlives a Redis outage.
      retryStrategy: (times) => Math.min(times * 200, 2000),
    });
    client.on('error', () => {
      // Reported once per outage by `decide` below; without a listener ioredis would log each retry.
    });
    client.on('ready', () => logger?.info({ store: 'redis' }, 'rate limit store connected'));
    client.defineCommand('gatehouseGcra', { numberOfKeys: 1, lua: GCRA_SCRIPT });
    const command = (client as unknown as { gatehouseGcra: GcraCommand }).gatehouseGcra.bind(client);
    return { client, gcra: command };
  }

  async function shared(key: string, limit: CompiledRateLimit): Promise<RateDecision> {
    try {
      const [allowed, remaining, resetInUs, retryAfterUs] = await redis!.gcra(`gatehouse:ratelimit:${key}`, limit.intervalUs, limit.windowUs);
      if (outage) {
        outage = false;
        logger?.info({ store: 'redis' }, 'rate limit store reachable again: limits are shared by every data plane');
      }
      return { allowed: allowed === 1, remaining, resetInUs, retryAfterUs };
    } catch (err) {
      if (!outage) {
        outage = true;
        logger?.warn({ store: 'redis', err }, 'rate limit store unreachable: limits with policy redis are counted per data plane until it is back');
      }
      redisError?.inc();
      return local(key, limit);
    }
  }

  const warnedNoRedis = new Set<string>();

  return {
    decider(limit, routeId) {
      if (limit.policy === 'local') return (key) => local(key, limit);
      if (redis) return (key) => shared(key, limit);
      if (!warnedNoRedis.has(routeId)) {
        warnedNoRedis.add(routeId);
        logger?.warn({ route: routeId }, 'rate_limit policy redis without REDIS_URL: counted per data plane');
      }
      return (key) => {
        noRedisUrl?.inc();
        return local(key, limit);
      };
    },
    async close() {
      tats?.clear();
      if (!redis) return;
      if (redis.client.status === 'ready') {
        try {
          await redis.client.quit();
          return;
        } catch {
          // fall through: drop the socket
        }
      }
      redis.client.disconnect();
    },
  };
}
