/**
 * proxy_cache's rules, pure (no clock, no store): what a request may take from the cache, whether
 * a response may be kept and for how long (RFC 9111's basics when `cache_control` is on), and the
 * key a request is stored under.
 *
 * Request (with cache_control): `Cache-Control: no-cache` (or, without Cache-Control, HTTP/1.0's
 * `Pragma: no-cache`) skips the lookup, the fresh response is stored; `no-store` skips both.
 * Response: the status, method and Content-Type must be allowed, no `Set-Cookie`, no `Vary: *`;
 * with cache_control, no `no-store`, `private` or `no-cache`, and a request that carried
 * `Authorization` only when the response says `public`, `s-maxage` or `must-revalidate` (§3.5);
 * without cache_control, such a request never (nothing in the response then says it may be shared).
 * A request whose Authorization is part of the key (`vary_headers`) is not such a request: each
 * credential has its own entries.
 * Freshness: `s-maxage`, else `max-age`, else the config's `ttl` (all capped at 24 h); a zero one
 * is not stored.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { MAX_PROXY_CACHE_TTL_MS, mediaTypeListed, type CompiledProxyCache } from '#proto/plugins/index';
import { headerText } from '../compression.js';
import { decodeQueryComponent } from '../request-transformer.js';

/** Cache-Control directives, lower-cased names; a directive without argument maps to ''. */
export function cacheDirectives(value: string | undefined): Map<string, string> {
  const directives = new Map<string, string>();
  if (!value) return directives;
  for (const part of value.split(',')) {
    const eq = part.indexOf('=');
    const name = (eq === -1 ? part : part.slice(0, eq)).trim().toLowerCase();
    if (name === '') continue;
    const argument =
      eq === -1
        ? ''
        : part
            .slice(eq + 1)
            .trim()
            .replace(/^"(.*)"$/, '$1');
    if (!directives.has(name)) directives.set(name, argument);
  }
  return directives;
}

/** What a request may do with the cache. */
export type RequestUse = 'lookup' | 'refresh' | 'bypass';

export function requestUse(config: CompiledProxyCache, method: string | undefined, headers: IncomingHttpHeaders): RequestUse {
  if (method === undefined || !config.methods.has(method)) return 'bypass';
  if (!config.cacheControl) return 'lookup';
  const cacheControl = headers['cache-control'];
  const directives = cacheDirectives(cacheControl);
  if (directives.has('no-store')) return 'bypass';
  if (directives.has('no-cache')) return 'refresh';
  if (cacheControl === undefined && /(?:^|,)\s*no-cache\s*(?:,|$)/i.test(headers.pragma ?? '')) return 'refresh';
  return 'lookup';
}

/** Seconds of a delta-seconds argument, null when it is not one. */
function deltaSeconds(text: string | undefined): number | null {
  return text !== undefined && /^\d+$/.test(text) ? Number(text) : null;
}

/** The response's Vary names, lower-cased, as listed (duplicates kept). */
export function varyNames(vary: OutgoingHttpHeaders[string]): string[] {
  const text = headerText(vary);
  if (text === undefined) return [];
  return text
    .split(',')
    .map((n) => n.trim().toLowerCase())
    .filter((n) => n !== '');
}

/**
 * Milliseconds the response stays fresh, or null when it may not be stored. `headers`: the response
 * as the client gets it (after the other plugins); `body` limits are the stage's.
 */
export function freshnessMs(config: CompiledProxyCache, status: number, headers: OutgoingHttpHeaders, requestHasAuthorization: boolean): number | null {
  if (!config.statuses.has(status)) return null;
  if (headers['set-cookie'] !== undefined) return null;
  if (varyNames(headers.vary).includes('*')) return null;
  if (config.contentTypes) {
    const type = headerText(headers['content-type']);
    if (type === undefined || !mediaTypeListed(config.contentTypes, type)) return null;
  }
  if (!config.cacheControl) return requestHasAuthorization ? null : config.ttlMs;
  const directives = cacheDirectives(headerText(headers['cache-control']));
  if (directives.has('no-store') || directives.has('private') || directives.has('no-cache')) return null;
  const sMaxAge = deltaSeconds(directives.get('s-maxage'));
  if (requestHasAuthorization && !directives.has('public') && sMaxAge === null && !directives.has('must-revalidate')) return null;
  const seconds = sMaxAge ?? deltaSeconds(directives.get('max-age'));
  if (seconds === null) return config.ttlMs;
  return seconds === 0 ? null : Math.min(seconds * 1000, MAX_PROXY_CACHE_TTL_MS);
}

/** The query as keyed: every parameter (or only those named), decoded and sorted by name then value, re-encoded. */
export function keyedQuery(query: string, only: ReadonlySet<string> | null): string {
  if (query === '' || only?.size === 0) return '';
  const pairs: [string, string][] = [];
  for (const raw of query.split('&')) {
    if (raw === '') continue;
    const eq = raw.indexOf('=');
    const name = decodeQueryComponent(eq === -1 ? raw : raw.slice(0, eq));
    if (only && !only.has(name)) continue;
    pairs.push([name, eq === -1 ? '' : decodeQueryComponent(raw.slice(eq + 1))]);
  }
  pairs.sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0));
  return pairs.map(([n, v]) => `${encodeURIComponent(n)}=${encodeURIComponent(v)}`).join('&');
}

/** Values of the named request headers (lower-case names) in a raw header list, in name order; repeated ones joined. */
export function headerValues(raw: readonly string[], names: readonly string[]): string[] {
  return names.map((name) => {
    const values: string[] = [];
    for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === name.length && raw[i]!.toLowerCase() === name) values.push(raw[i + 1]!.trim());
    return values.join(', ');
  });
}

/** Parts joined by a separator no header value, path or encoded query holds (NUL). */
export function keyOf(parts: readonly (string | number)[]): string {
  return parts.join('\0');
}
