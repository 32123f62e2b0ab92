/**
 * W3C Trace Context `traceparent` (https://www.w3.org/TR/trace-context/): parsing with every
 * validity rule of §3.2 and §4.3, and writing version 00. Used by the data plane's proxy hop
 * (propagated whether or not spans are exported) and by both services' spans.
 */
import { randomUUID } from 'node:crypto';

export interface TraceParent {
  /** 32 lower-case hex digits, not all zero. */
  traceId: string;
  /** The caller's span: 16 lower-case hex digits, not all zero. */
  parentId: string;
  /** Trace flags, 2 lower-case hex digits (`01` = sampled). */
  flags: string;
}

const VERSION_00 = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
/** A later version: its first four fields read as version 00, anything after a further `-` ignored (§4.3). */
const LATER_VERSION = /^(?!ff)[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(?:-.*)?$/;
const ZERO_TRACE_ID = '0'.repeat(32);
const ZERO_SPAN_ID = '0'.repeat(16);

/**
 * The caller's trace context, or null when the header is absent or invalid: wrong length or
 * field sizes, upper-case hex, version `ff`, an all-zero trace or parent id, or several
 * `traceparent` headers (Node joins them with `, `, which no valid value contains).
 */
export function parseTraceparent(header: string | string[] | undefined): TraceParent | null {
  if (typeof header !== 'string') return null;
  const m = (header.startsWith('00-') ? VERSION_00 : LATER_VERSION).exec(header);
  if (!m || m[1] === ZERO_TRACE_ID || m[2] === ZERO_SPAN_ID) return null;
  return { traceId: m[1]!, parentId: m[2]!, flags: m[3]! };
}

export function formatTraceparent(traceId: string, spanId: string, flags: string): string {
  return `00-${traceId}-${spanId}-${flags}`;
}

/*
 * Ids from randomUUID(): Node draws its entropy for many UUIDs at once, several times cheaper per
 * request than randomBytes(). 122 random bits for a trace id, 60 for a span id; the fixed version
 * digit `4` keeps both from ever being all zero.
 */
export function newTraceId(): string {
  const u = randomUUID();
  return u.slice(0, 8) + u.slice(9, 13) + u.slice(14, 18) + u.slice(19, 23) + u.slice(24);
}

export function newSpanId(): string {
  const u = randomUUID();
  return u.slice(0, 8) + u.slice(9, 13) + u.slice(14, 18);
}
