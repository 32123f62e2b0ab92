/**
 * W3C Trace Context `traceparent` (https://www.w3.org/TR/trace-context/): parsing with every
 * validity rule of §3.2 and §4.3, and writing version 00. Used by the data plane's proxy hop
 * (propagated whether or not spans are exported) and by both services' spans. The data plane's request
 * ids come from the same pool of random bytes as the trace and span ids (newRequestId).
 */
import { randomFillSync } from 'node:crypto';

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
 * Ids are hex cut from a pool of random bytes refilled 64 KiB at a time: about half the cost of cutting
 * each id from its own randomUUID() (sliced and joined: a cons string flattened again when written), and
 * the data plane makes one per proxied request. Under load each refill costs far more than its bytes,
 * so the pool is large enough for refills to be rare. An all-zero id (invalid; chance 2^-64 or less) is
 * drawn again.
 */
const pool = Buffer.alloc(65536);
let used = pool.length;

/** The pool offset of `bytes` fresh random bytes, refilling the pool when it has fewer left. */
function take(bytes: number): number {
  if (used + bytes > pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  const start = used;
  used += bytes;
  return start;
}

function randomHex(bytes: number): string {
  for (;;) {
    const start = take(bytes);
    if (!allZero(start, used)) return pool.toString('hex', start, used);
  }
}

const allZero = (from: number, to: number): boolean => {
  for (let i = from; i < to; i++) if (pool[i] !== 0) return false;
  return true;
};

export function newTraceId(): string {
  return randomHex(16);
}

export function newSpanId(): string {
  return randomHex(8);
}

const HEX_DIGITS = Buffer.from('0123456789abcdef');

/** Writes `count` pool bytes from `start` as lower-case hex into `out` at `at`; returns the offset after them. */
function writeHex(out: Buffer, at: number, start: number, count: number): number {
  for (let i = start; i < start + count; i++) {
    const byte = pool[i]!;
    out[at++] = HEX_DIGITS[byte >> 4]!;
    out[at++] = HEX_DIGITS[byte & 15]!;
  }
  return at;
}

/** `00-<trace id>-<span id>-01`, the dashes and the version in place. */
const traceparentLine = Buffer.from(`00-${'0'.repeat(32)}-${'0'.repeat(16)}-01`);

/**
 * The traceparent of a new, sampled trace: trace and span id written into one buffer and read out as one flat string
 * (formatTraceparent(newTraceId(), newSpanId(), '01') reads two strings from the pool and joins them into a cons string
 * of five pieces, flattened again when the header is written): fewer instructions per request
 * (scripts/count-instructions.sh).
 */
export function newTraceparent(): string {
  let start: number;
  do start = take(24);
  while (allZero(start, start + 16) || allZero(start + 16, start + 24));
  writeHex(traceparentLine, writeHex(traceparentLine, 3, start, 16) + 1, start + 16, 8);
  return traceparentLine.toString('latin1');
}

const uuid = Buffer.alloc(36);

/**
 * A version 4 UUID (RFC 9562 §5.4) from the pool, written as ASCII into one buffer and read out as
 * one flat string. randomUUID() builds its string from 20 concatenated pieces (a cons string of
 * ~600 bytes per id, flattened again when the header is written); this costs about two thirds of that.
 */
export function newRequestId(): string {
  const start = take(16);
  let o = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) uuid[o++] = 0x2d; // '-'
    let byte = pool[start + i]!;
    if (i === 6)
      byte = (byte & 0x0f) | 0x40; // version 4
    else if (i === 8) byte = (byte & 0x3f) | 0x80; // variant 10
    uuid[o++] = HEX_DIGITS[byte >> 4]!;
    uuid[o++] = HEX_DIGITS[byte & 15]!;
  }
  return uuid.toString('latin1', 0, 36);
}
