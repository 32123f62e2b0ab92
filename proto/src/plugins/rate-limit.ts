/**
 * rate_limit: Janus's `limit` (`"<count>-<unit>"`, unit `S`, `M`, `H` or `D`, any case: `"10-S"`,
 * `"100-m"`), `policy` (`local` or `redis`), plus `key`: what a client is counted by, `ip` (default: the
 * data plane's client address, TRUSTED_PROXIES) or `token` (a hash of its Authorization credentials).
 * `trust_forward_headers` is still accepted so stored definitions load, and has no effect. Janus's
 * `redis.dsn` / `redis.prefix` are not used: a data plane's Redis is its `REDIS_URL`, keys are
 * namespaced per API. Stored with the limit upper-cased without spaces (`"100-M"`).
 */
import { z } from 'zod';
import { deepFreeze, definePlugin } from './plugin.js';

const UNIT_MS: Record<string, number> = { S: 1000, M: 60_000, H: 3_600_000, D: 86_400_000 };

/** Largest count a limit may allow per period. */
export const MAX_RATE_COUNT = 1_000_000_000;

/** Data planes count in whole microseconds: at most one request per µs, a million per second. */
const MAX_PER_SECOND = 1_000_000;

export interface Rate {
  /** Requests allowed per period. */
  count: number;
  periodMs: number;
}

/** `"10-S"` → 10 per 1000 ms; null when the text is not a Janus rate (or allows more than 10^6/s). */
export function parseRate(text: string): Rate | null {
  const m = /^(\d{1,10})-([SMHD])$/.exec(text.replace(/\s+/g, '').toUpperCase());
  if (!m) return null;
  const count = Number(m[1]);
  const periodMs = UNIT_MS[m[2]];
  if (count < 1 || count > MAX_RATE_COUNT || count > (periodMs / 1000) * MAX_PER_SECOND) return null;
  return { count, periodMs };
}

const schema = z.object({
  limit: z
    .string()
    .transform((s) => s.replace(/\s+/g, '').toUpperCase())
    .refine((s) => parseRate(s) !== null, 'must be a rate such as "10-S", "100-M", "1000-H" or "5000-D" (at least 1, at most 1000000 per second)'),
  policy: z.enum(['local', 'redis'], { error: 'must be "local" or "redis"' }).default('local'),
  trust_forward_headers: z.boolean().default(false),
  key: z.enum(['ip', 'token'], { error: 'must be "ip" or "token"' }).default('ip'),
});

export type RateLimitConfig = z.output<typeof schema>;

/**
 * What a data plane runs: GCRA (generic cell rate algorithm) in whole microseconds. Each admitted
 * request moves the client's theoretical arrival time (TAT) on by `intervalUs`; a request is
 * admitted while TAT stays within `windowUs` (= count × intervalUs) of now, so `count` requests pass
 * at once and then one per interval.
 */
export interface CompiledRateLimit {
  /** The stored rate (`"10-S"`): part of every counter key, so a changed limit starts afresh. */
  rate: string;
  /** Requests allowed at once (the burst), and its X-RateLimit-Limit value. */
  count: number;
  limitHeader: string;
  /** One request's share of the period, periodMs × 1000 / count, rounded to a whole µs (≥ 1). */
  intervalUs: number;
  /** count × intervalUs: the period as counted (within count µs of the configured one). */
  windowUs: number;
  policy: 'local' | 'redis';
  key: 'ip' | 'token';
}

function compile(c: RateLimitConfig): CompiledRateLimit {
  const { count, periodMs } = parseRate(c.limit)!;
  const intervalUs = Math.max(1, Math.round((periodMs * 1000) / count));
  return deepFreeze({
    rate: c.limit,
    count,
    limitHeader: String(count),
    intervalUs,
    windowUs: count * intervalUs,
    policy: c.policy,
    key: c.key,
  });
}

export const rateLimitPlugin = definePlugin({ schema, compile });
