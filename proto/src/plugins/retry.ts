/**
 * retry: Janus's `attempts` (tries in all, the first included), `backoff` (a Go duration: the wait
 * before the second try, doubled before each further one, plus up to 50% jitter, as Janus does)
 * and `predicate` (status-predicate.ts; default `statusCode == 0 || statusCode >= 500`), plus
 * `statuses` (a shorthand: retry on a connection failure or one of these statuses, stored as the
 * equivalent predicate) and `methods` (the methods retried; default the idempotent ones).
 */
import { z } from 'zod';
import { tryParseDuration } from '../duration.js';
import { HTTP_TOKEN } from '../definition/proxy-schema.js';
import { commaList } from './http-syntax.js';
import { deepFreeze, definePlugin } from './plugin.js';
import { compilePredicate, DEFAULT_PREDICATE, predicateProblem, type StatusPredicate } from './status-predicate.js';

export const IDEMPOTENT_METHODS = ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'TRACE'];
export const MAX_ATTEMPTS = 10;
const MAX_BACKOFF_MS = 10_000;

/** Milliseconds of a backoff: a duration up to 10 s, or zero (`"0"`, `"0s"`, `"0ms"`). */
function backoffMs(text: string): number | null {
  if (/^0(?:ms|s|m|h)?$/.test(text)) return 0;
  const ms = tryParseDuration(text);
  return ms !== null && ms <= MAX_BACKOFF_MS ? ms : null;
}

export const predicateSchema = z
  .string()
  .transform((s) => s.trim())
  .superRefine((s, ctx) => {
    const problem = predicateProblem(s);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });

export const methodListSchema = commaList(z.string().regex(HTTP_TOKEN, 'is not a valid HTTP method')).transform((m) => [
  ...new Set(m.map((x) => x.toUpperCase())),
]);

const schema = z
  .object({
    attempts: z
      .int({ error: 'must be an integer' })
      .min(1, 'must be at least 1')
      .max(MAX_ATTEMPTS, `must be at most ${MAX_ATTEMPTS}`)
      .default(3),
    backoff: z
      .string()
      .refine((s) => backoffMs(s) !== null, 'must be a duration from "0s" to "10s", e.g. "100ms"')
      .default('1s'),
    predicate: predicateSchema.optional(),
    statuses: z.array(z.int({ error: 'must be an HTTP status' }).min(100, 'must be an HTTP status').max(599, 'must be an HTTP status')).optional(),
    methods: methodListSchema.pipe(z.array(z.string()).min(1, 'must not be empty')).default(IDEMPOTENT_METHODS),
  })
  .superRefine((c, ctx) => {
    if (c.predicate !== undefined && c.statuses !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['statuses'], message: 'must not be given together with predicate' });
    }
  })
  .transform(({ statuses, predicate, ...rest }) => ({
    ...rest,
    predicate: statuses ? ['statusCode == 0', ...[...new Set(statuses)].map((s) => `statusCode == ${s}`)].join(' || ') : (predicate ?? DEFAULT_PREDICATE),
  }));

export type RetryConfig = z.output<typeof schema>;

export interface CompiledRetry {
  attempts: number;
  backoffMs: number;
  /** Upper-cased methods that may be retried. */
  methods: ReadonlySet<string>;
  /** True when the attempt failed and may be tried again. */
  retryOn: StatusPredicate;
}

export const retryPlugin = definePlugin({
  schema,
  compile: (c): CompiledRetry =>
    deepFreeze({ attempts: c.attempts, backoffMs: backoffMs(c.backoff)!, methods: new Set(c.methods), retryOn: compilePredicate(c.predicate) }),
});
