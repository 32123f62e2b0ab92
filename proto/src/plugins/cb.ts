/**
 * cb (circuit breaker): Janus's hystrix settings, per API and upstream target. `timeout` (ms; 0 =
 * the route's response_header_timeout only), `max_concurrent_requests` (0 = unlimited),
 * `error_percent_threshold` over a rolling 10 s window once it holds `request_volume_threshold`
 * requests, `sleep_window` (ms open before one probe is let through), `predicate` (what counts as
 * an error, status-predicate.ts), plus `consecutive_failures` (0 = off): open after that many
 * errors in a row, whatever the volume. Janus's `name` (hystrix's shared command) is not used:
 * breakers are always per API and target.
 */
import { z } from 'zod';
import { deepFreeze, definePlugin } from './plugin.js';
import { compilePredicate, DEFAULT_PREDICATE, type StatusPredicate } from './status-predicate.js';
import { predicateSchema } from './retry.js';

const count = (max: number) => z.int({ error: 'must be an integer' }).min(0, 'must be at least 0').max(max, `must be at most ${max}`);

const schema = z.object({
  timeout: count(3_600_000).default(0),
  max_concurrent_requests: count(1_000_000).default(0),
  error_percent_threshold: count(100).min(1, 'must be at least 1').default(50),
  request_volume_threshold: count(1_000_000).min(1, 'must be at least 1').default(20),
  sleep_window: count(3_600_000).min(1, 'must be at least 1').default(5000),
  consecutive_failures: count(1_000_000).default(0),
  predicate: predicateSchema.default(DEFAULT_PREDICATE),
});

export type CbConfig = z.output<typeof schema>;

export interface CompiledCb {
  timeoutMs: number;
  maxConcurrent: number;
  errorPercentThreshold: number;
  requestVolumeThreshold: number;
  sleepWindowMs: number;
  consecutiveFailures: number;
  /** True when the attempt counts as an error. */
  failed: StatusPredicate;
  /** The config's canonical JSON: a data plane keeps a breaker's state across snapshots while it is unchanged. */
  key: string;
}

export const cbPlugin = definePlugin({
  schema,
  compile: (c): CompiledCb =>
    deepFreeze({
      timeoutMs: c.timeout,
      maxConcurrent: c.max_concurrent_requests,
      errorPercentThreshold: c.error_percent_threshold,
      requestVolumeThreshold: c.request_volume_threshold,
      sleepWindowMs: c.sleep_window,
      consecutiveFailures: c.consecutive_failures,
      failed: compilePredicate(c.predicate),
      key: JSON.stringify(
        Object.keys(c)
          .sort()
          .map((k) => [k, c[k as keyof CbConfig]]),
      ),
    }),
});
