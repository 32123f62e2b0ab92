/**
 * proxy_cache (Kong's proxy-cache): responses kept in the data plane's memory and replayed without
 * asking the upstream. Config (every member optional, stored with its default):
 *
 * - `ttl` (Go duration, 1s to 24h, default "30s"): how long an entry is fresh when the response
 *   gives no `s-maxage` / `max-age` (or `cache_control` is false).
 * - `methods` (GET and/or HEAD, default both), `statuses` (default 200, 301, 404).
 * - `content_types` (media ranges as compression's; null = any type, the default).
 * - `vary_headers` (request header names whose values are part of the key, default none).
 * - `vary_query_params` (null = the whole query, in canonical order, the default; [] = the query is
 *   ignored; names = only those parameters).
 * - `cache_control` (default true): RFC 9111's basics, in the request and the response.
 * - `max_entry_size` (a size as body_limit's, default "1MB"): a longer body is streamed, not kept.
 * - `per_consumer` (default false): responses to requests that basic_auth, oauth2 or openid_connect
 *   authenticated (by Authorization or the session cookie) are stored, each consumer under its own key;
 *   without it they are never stored (nor looked up).
 */
import { z } from 'zod';
import { tryParseDurationUpTo } from '../duration.js';
import { parseSize } from './body-limit.js';
import { compileMediaRanges, contentTypeSchema, type MediaRanges } from './compression.js';
import { commaList, dedupeCaseInsensitive, headerNameSchema, subsetOf } from './http-syntax.js';
import { deepFreeze, definePlugin } from './plugin.js';

export const PROXY_CACHE_METHODS = ['GET', 'HEAD'] as const;
export const DEFAULT_CACHED_STATUSES = [200, 301, 404];
const MIN_TTL_MS = 1000;
export const MAX_TTL_MS = 86_400_000;
const MAX_ENTRY_BYTES = 1024 ** 3;
const MAX_NAMES = 32;

/** Milliseconds of a ttl, or null when it is not a duration from 1 s to 24 h. */
function ttlMs(text: string): number | null {
  const ms = tryParseDurationUpTo(text, MAX_TTL_MS);
  return ms !== null && ms >= MIN_TTL_MS ? ms : null;
}

const entrySize = (s: string): number | null => {
  const bytes = parseSize(s);
  return bytes !== null && bytes >= 1 && bytes <= MAX_ENTRY_BYTES ? bytes : null;
};

const nameList = <T extends z.ZodType<string>>(item: T) =>
  z
    .array(item)
    .max(MAX_NAMES, `must have at most ${MAX_NAMES} names`)
    .transform((names) => [...new Set(names)]);

const schema = z.object({
  ttl: z
    .string()
    .transform((s) => s.trim())
    .refine((s) => ttlMs(s) !== null, 'must be a duration from "1s" to "24h", e.g. "30s"')
    .default('30s'),
  methods: subsetOf(PROXY_CACHE_METHODS, (s) => s.toUpperCase(), 'must be "GET" or "HEAD"'),
  statuses: z
    .array(z.int({ error: 'must be an HTTP status' }).min(100, 'must be an HTTP status').max(599, 'must be an HTTP status'))
    .min(1, 'must not be empty')
    .default(DEFAULT_CACHED_STATUSES)
    .transform((s) => [...new Set(s)].sort((a, b) => a - b)),
  content_types: commaList(contentTypeSchema)
    .refine((t) => t.length > 0, 'must not be empty (leave it out for any type)')
    .transform((t) => [...new Set(t)])
    .nullable()
    .default(null),
  vary_headers: nameList(headerNameSchema)
    .transform((names) => dedupeCaseInsensitive(names).map((n) => n.toLowerCase()))
    .default([]),
  vary_query_params: nameList(z.string().min(1, 'must not be empty')).nullable().default(null),
  cache_control: z.boolean().default(true),
  max_entry_size: z
    .string()
    .transform((s) => s.replace(/\s+/g, '').toUpperCase())
    .refine((s) => entrySize(s) !== null, 'must be a size from "1B" to "1G", such as "512K" or "1MB"')
    .default('1MB'),
  per_consumer: z.boolean().default(false),
});

export type ProxyCacheConfig = z.output<typeof schema>;

export interface CompiledProxyCache {
  ttlMs: number;
  methods: ReadonlySet<string>;
  statuses: ReadonlySet<number>;
  /** null: any Content-Type (a response without one too). */
  contentTypes: MediaRanges | null;
  /** Lower-cased request header names. */
  varyHeaders: readonly string[];
  /** null: the whole query; otherwise only these parameters (names compared decoded). */
  varyQueryParams: ReadonlySet<string> | null;
  cacheControl: boolean;
  maxEntryBytes: number;
  /** Responses to requests authenticated by Authorization or a session cookie are stored (under the identity). */
  perConsumer: boolean;
}

export const proxyCachePlugin = definePlugin({
  schema,
  compile: (c): CompiledProxyCache =>
    deepFreeze({
      ttlMs: ttlMs(c.ttl)!,
      methods: new Set<string>(c.methods),
      statuses: new Set(c.statuses),
      contentTypes: c.content_types === null ? null : compileMediaRanges(c.content_types),
      varyHeaders: c.vary_headers,
      varyQueryParams: c.vary_query_params === null ? null : new Set(c.vary_query_params),
      cacheControl: c.cache_control,
      maxEntryBytes: entrySize(c.max_entry_size)!,
      perConsumer: c.per_consumer,
    }),
});
