/**
 * HTTP syntax shared by plugin configs: header names and values, comma lists (Janus accepts
 * `"GET,POST"` where a list is expected), and the headers a plugin may never set or remove.
 */
import { z } from 'zod';
import { HOP_BY_HOP_HEADERS } from '../http-fields.js';

export { HOP_BY_HOP_HEADERS, headerNameSchema, headerValueSchema } from '../http-fields.js';

/**
 * Headers the gateway itself owns (README "Proxy behaviour"): the upstream Host, the X-Forwarded-* trail, the
 * request id, the authenticated consumer and client certificate, and the body framing (content-length: a transformer must not desynchronise it).
 */
export const GATEWAY_HEADERS: ReadonlySet<string> = new Set([
  'host',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-request-id',
  'x-consumer-username',
  'x-forwarded-client-cert',
  'content-length',
  'expect',
]);

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

export function dedupeCaseInsensitive(values: readonly string[]): string[] {
  const seen = new Set<string>();
  return values.filter((v) => {
    const key = v.toLowerCase();
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
