/**
 * ioredis, loaded when a Redis client is first made (REDIS_URL set): a data plane without Redis
 * never loads it (importing it costs heap and start-up time); a synchronous require keeps the token store and
 * rate limiter constructors synchronous.
 */
import { createRequire } from 'node:module';
import type { Redis } from 'ioredis';

let RedisClass: typeof Redis | undefined;

export function loadRedis(): typeof Redis {
  return (RedisClass ??= (createRequire(import.meta.url)('ioredis') as typeof import('ioredis')).Redis);
}
