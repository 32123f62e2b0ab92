/**
 * Token store of the storage strategy: Redis (REDIS_URL, shared by DP replicas) or in-process.
 */
import { hash as digest } from 'node:crypto';
import { loadRedis } from '../redis.js';
import type { Logger } from '#proto/logger';
import { DeadlineCache } from './deadline-cache.js';

export interface TokenStore {
  /** Stores a token for a server with a TTL in seconds. */
  put(server: string, token: string, ttlSeconds: number): Promise<void>;
  /** true when stored and not expired. Rejects when the backend is unreachable (callers fail closed). */
  has(server: string, token: string): Promise<boolean>;
  delete(server: string, token: string): Promise<void>;
  /** Remember which access token a refresh token belongs to, so a refresh grant can replace it. */
  linkRefresh(server: string, refreshToken: string, accessToken: string, ttlSeconds: number): Promise<void>;
  /** Access token linked to a refresh token, or null. */
  accessForRefresh(server: string, refreshToken: string): Promise<string | null>;
  deleteRefresh(server: string, refreshToken: string): Promise<void>;
  close(): Promise<void>;
}

export type StoreLogger = Pick<Logger, 'info' | 'warn'>;

/**
 * Keys carry a SHA-256 of the token, never the token itself: a key listing (or a memory dump of the
 * key space) does not hand out credentials, and key length stays fixed whatever the token size.
 */
export function accessKey(server: string, token: string): string {
  return `gatehouse:token:${server}:${sha256(token)}`;
}

export function refreshKey(server: string, refreshToken: string): string {
  return `gatehouse:refresh:${server}:${sha256(refreshToken)}`;
}

function sha256(value: string): string {
  return digest('sha256', value, 'hex');
}

/** Redis EX wants whole seconds ≥ 1; a fractional TTL is rounded up so a token never outlives less than asked. */
function wholeSeconds(ttlSeconds: number): number {
  return Number.isFinite(ttlSeconds) ? Math.max(1, Math.ceil(ttlSeconds)) : 1;
}

export function createTokenStore(deps: { redisUrl?: string; logger: StoreLogger }): TokenStore {
  if (deps.redisUrl) return createRedisTokenStore({ url: deps.redisUrl, logger: deps.logger });
  return createMemoryTokenStore();
}

// ---------------------------------------------------------------------------------------------------------------
// In-process store

export const MEMORY_STORE_MAX_ENTRIES = 100_000;

export function createMemoryTokenStore(options: { maxEntries?: number; now?: () => number } = {}): TokenStore {
  const maxEntries = options.maxEntries ?? MEMORY_STORE_MAX_ENTRIES;
  /** Milliseconds since epoch. */
  const now = options.now ?? Date.now;
  // Each bounded on its own; when full, the least recently used entry goes (an expired one is dropped when read).
  const tokens = new DeadlineCache<true>(maxEntries);
  const refresh = new DeadlineCache<string>(maxEntries);
  const expiry = (ttlSeconds: number) => now() + wholeSeconds(ttlSeconds) * 1000;

  return {
    async put(server, token, ttlSeconds) {
      tokens.set(accessKey(server, token), true, expiry(ttlSeconds));
    },
    async has(server, token) {
      return tokens.get(accessKey(server, token), now()) !== undefined;
    },
    async delete(server, token) {
      tokens.delete(accessKey(server, token));
    },
    async linkRefresh(server, refreshToken, accessToken, ttlSeconds) {
      refresh.set(refreshKey(server, refreshToken), accessToken, expiry(ttlSeconds));
    },
    async accessForRefresh(server, refreshToken) {
      return refresh.get(refreshKey(server, refreshToken), now()) ?? null;
    },
    async deleteRefresh(server, refreshToken) {
      refresh.delete(refreshKey(server, refreshToken));
    },
    async close() {
      tokens.clear();
      refresh.clear();
    },
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Redis store (shared by every DP replica)

export interface RedisStoreOptions {
  url: string;
  logger: StoreLogger;
  /** Both bounded so that an unreachable Redis makes `has` reject fast and the proxy answers 401, not a hang. */
  connectTimeoutMs?: number;
  commandTimeoutMs?: number;
}

export function createRedisTokenStore(options: RedisStoreOptions): TokenStore {
  const { logger } = options;
  const redis = new (loadRedis())(options.url, {
    lazyConnect: false,
    connectTimeout: options.connectTimeoutMs ?? 1000,
    commandTimeout: options.commandTimeoutMs ?? 1000,
    // Commands issued while disconnected fail at once instead of queueing: the caller fails closed (401).
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // Keep reconnecting forever with a capped delay: the DP must outlive a Redis outage.
    retryStrategy: (times) => Math.min(times * 200, 2000),
  });

  // Log transitions, not every failed reconnect attempt.
  let up = false;
  let reportedDown = false;
  redis.on('ready', () => {
    up = true;
    reportedDown = false;
    logger.info({ store: 'redis' }, 'token store connected');
  });
  redis.on('error', (err: Error) => {
    if (up || !reportedDown) {
      logger.warn({ store: 'redis', err }, 'token store unreachable');
      reportedDown = true;
    }
    up = false;
  });

  return {
    async put(server, token, ttlSeconds) {
      await redis.set(accessKey(server, token), '1', 'EX', wholeSeconds(ttlSeconds));
    },
    async has(server, token) {
      return (await redis.exists(accessKey(server, token))) === 1;
    },
    async delete(server, token) {
      await redis.del(accessKey(server, token));
    },
    async linkRefresh(server, refreshToken, accessToken, ttlSeconds) {
      await redis.set(refreshKey(server, refreshToken), accessToken, 'EX', wholeSeconds(ttlSeconds));
    },
    async accessForRefresh(server, refreshToken) {
      return redis.get(refreshKey(server, refreshToken));
    },
    async deleteRefresh(server, refreshToken) {
      await redis.del(refreshKey(server, refreshToken));
    },
    async close() {
      if (redis.status === 'ready') {
        try {
          await redis.quit();
          return;
        } catch {
          // fall through: drop the socket
        }
      }
      redis.disconnect();
    },
  };
}
