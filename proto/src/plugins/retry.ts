/**
 * retry: Janus's `attempts` (tries in all, the first included), `backoff` (a Go duration: the wait
 * before the second try, doubled before each further one, plus up to 50% jitter, as Janus does)
 * and `predicate` (status-predicate.ts; default `statusCode == 0 || statusCode >= 500`), plus
 * `statuses` (a shorthand: retry on a connection failure or one of these statuses, stored as the
 * equivalent predicate), `grpc_statuses` (the same for gRPC statuses of Trailers-Only answers: names or
 * numbers, stored as `grpcStatus == n` terms) and `methods` (the methods retried; default the idempotent ones;
 * gRPC calls, always POST, are retried whatever it lists: data-plane/src/plugins/retry.ts says when).
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

/** gRPC's status codes by number (grpc/grpc doc/statuscodes.md). */
export const GRPC_STATUS_NAMES = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
] as const;

const NOT_A_GRPC_STATUS = 'must be a gRPC status: a name such as "UNAVAILABLE" or a number from 0 to 16';

/** A gRPC status by name (case-insensitive) or number, as its number. */
const grpcStatusSchema = z.union([z.int(), z.string()], { error: NOT_A_GRPC_STATUS }).transform((v, ctx) => {
  const n = typeof v === 'number' ? v : GRPC_STATUS_NAMES.indexOf(v.toUpperCase() as (typeof GRPC_STATUS_NAMES)[number]);
  if (n >= 0 && n < GRPC_STATUS_NAMES.length) return n;
  ctx.addIssue({ code: 'custom', message: NOT_A_GRPC_STATUS });
  return z.NEVER;
});

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
    attempts: z.int({ error: 'must be an integer' }).min(1, 'must be at least 1').max(MAX_ATTEMPTS, `must be at most ${MAX_ATTEMPTS}`).default(3),
    backoff: z
      .string()
      .refine((s) => backoffMs(s) !== null, 'must be a duration from "0s" to "10s", e.g. "100ms"')
      .default('1s'),
    predicate: predicateSchema.optional(),
    statuses: z.array(z.int({ error: 'must be an HTTP status' }).min(100, 'must be an HTTP status').max(599, 'must be an HTTP status')).optional(),
    grpc_statuses: z
      .array(grpcStatusSchema)
      .min(1, 'must not be empty')
      .max(GRPC_STATUS_NAMES.length, `must hold at most ${GRPC_STATUS_NAMES.length} statuses`)
      .optional(),
    methods: methodListSchema.pipe(z.array(z.string()).min(1, 'must not be empty')).default(IDEMPOTENT_METHODS),
  })
  .superRefine((c, ctx) => {
    for (const shorthand of ['statuses', 'grpc_statuses'] as const) {
      if (c.predicate !== undefined && c[shorthand] !== undefined) {
        ctx.addIssue({ code: 'custom', path: [shorthand], message: 'must not be given together with predicate' });
      }
    }
  })
  .transform(({ statuses, grpc_statuses, predicate, ...rest }) => ({
    ...rest,
    predicate:
      statuses || grpc_statuses
        ? ['statusCode == 0', ...[...new Set(statuses)].map((s) => `statusCode == ${s}`), ...[...new Set(grpc_statuses)].map((s) => `grpcStatus == ${s}`)].join(
            ' || ',
          )
        : (predicate ?? DEFAULT_PREDICATE),
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
