/**
 * HTTP syntax shared by plugin configs: header names and values, comma lists (Janus accepts
 * `"GET,POST"` where a list is expected), and the headers a plugin may never set or remove.
 */
import { z } from 'zod';
import { HTTP_TOKEN } from '../definition/proxy-schema.js';

/** RFC 9110 §7.6.1 hop-by-hop headers: they stop at the gateway in both directions. */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

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

/** Node's own rule for header values: no CR, LF, NUL or other control characters except tab. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

export const headerNameSchema = z.string().min(1, 'must not be empty').regex(HTTP_TOKEN, 'is not a valid header name');

export const headerValueSchema = z.string().regex(HEADER_VALUE, 'must not contain control characters (CR, LF, NUL)');

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
