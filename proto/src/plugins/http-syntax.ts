/**
 * HTTP syntax shared by plugin configs: header names and values, comma lists (Janus accepts
 * `"GET,POST"` where a list is expected), and the headers a plugin may never set or remove.
 */
import { z } from 'zod';
import { HOP_BY_HOP_HEADERS } from '../http-fields.js';

export { HOP_BY_HOP_HEADERS, headerNameSchema, headerValueSchema } from '../http-fields.js';

/**
 * Request headers the data plane replaces on the way upstream (data-plane proxy/headers.ts drops the copies it
 * gets, the client's or a plugin's, and writes its own; X-Forwarded-* are appended to): the upstream Host, the
 * X-Forwarded-* trail, the request id, the W3C traceparent, the authenticated consumer and its groups, the client
 * certificate, and Expect (node:http has answered 100-continue already).
 */
export const GATEWAY_SET_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-request-id',
  'traceparent',
  'x-consumer-username',
  'x-consumer-groups',
  'x-forwarded-client-cert',
  'expect',
]);

/**
 * Headers the gateway itself owns (docs/proxy.md "Proxy behaviour"): those it sets, and the body framing
 * (content-length: a transformer must not desynchronise it). A value configured for one of them would be dropped.
 */
export const GATEWAY_HEADERS: ReadonlySet<string> = new Set([...GATEWAY_SET_HEADERS, 'content-length']);

/** Why a header may not be set or removed by configuration, or null when it may. */
export function reservedHeaderReason(name: string): string | null {
  const lower = name.toLowerCase();
  if (HOP_BY_HOP_HEADERS.has(lower)) return 'is a hop-by-hop header';
  if (GATEWAY_HEADERS.has(lower)) return 'is set by the gateway';
  return null;
}

/** A JSON array, or (Janus) one comma-delimited string; empty items are dropped. */
export function commaList<T extends z.ZodType>(item: T) {
  return z.preprocess(
    (v) =>
      typeof v === 'string'
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter((s) => s !== '')
        : v,
    z.array(item),
  );
}

/**
 * A non-empty subset of `values` (JSON array or comma list; items trimmed and put through `normalise`, e.g.
 * lower-cased), all of them by default, stored in the order of `values` whatever order it was written in.
 */
export function subsetOf<const T extends readonly [string, ...string[]]>(values: T, normalise: (s: string) => string, error: string) {
  return commaList(
    z
      .string()
      .transform((s) => normalise(s.trim()))
      .pipe(z.enum(values, { error })),
  )
    .default([...values])
    .refine((picked) => picked.length > 0, 'must not be empty')
    .transform((picked) => values.filter((v) => picked.includes(v)) as T[number][]);
}

export function dedupeCaseInsensitive(values: readonly string[]): string[] {
  const seen = new Set<string>();
  return values.filter((v) => {
    const key = v.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
