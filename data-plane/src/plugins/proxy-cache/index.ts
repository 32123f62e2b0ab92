/**
 * proxy_cache (config: proto/src/plugins/proxy-cache.ts; rules: cache-rules.ts; store:
 * response-cache.ts). The last stage of the pipeline, on both hooks:
 *
 * - request: runs after admission and authentication (a refused request never reaches it). The
 *   key is the stage's namespace, the method, the scheme and host the client used (X-Forwarded-Proto
 *   and -Host from a trusted proxy), the Host, the normalised path, the query per `vary_query_params`,
 *   the authenticated identity (ex.identity: any authentication plugin's), and the `vary_headers`
 *   values; then the values of the request headers the stored response's Vary names. A request that
 *   basic_auth, oauth2 or openid_connect authenticated (by Authorization or session cookie) bypasses the
 *   cache unless `per_consumer` (or, for Authorization, `vary_headers` naming it) keys it by its identity. A request with an Authorization not in
 *   the key is stored only as RFC 9111 §3.5 allows (cache-rules.ts), never without cache_control. A fresh entry is answered at once
 *   (PluginAnswer: the stored status, headers and bytes, plus this request's client headers, `Age`
 *   and `X-Cache-Status: Hit`); the upstream is not asked.
 * - response: sees the response as the client gets it (after response_transformer and
 *   compression). It gets `X-Cache-Status: Miss` (`Bypass` when the lookup was skipped); a
 *   storable one is copied as it streams by (never held back), and stored once the body is
 *   complete, unless it grew past `max_entry_size` (the copy is then dropped, the client still gets
 *   every byte). Upgrade requests (WebSocket) are never cached.
 *
 * Stored headers leave out what belongs to one request: X-Request-Id, X-Cache-Status, Age, and the
 * headers the other plugins added for that client (CORS, rate limit), which a hit gets anew.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { Transform } from 'node:stream';
import type { CompiledProxyCache } from '#proto/plugins/index';
import { headerText } from '../compression.js';
import { originalHost, originalScheme, type TrustedProxies } from '../client-ip.js';
import type { PluginExchange } from '../pipeline.js';
import type { PluginRuntime } from '../runtime.js';
import { freshnessMs, headerValues, keyedQuery, keyOf, requestUse, varyNames, type RequestUse } from './cache-rules.js';
import type { CachedResponse } from './response-cache.js';

export { createResponseCache, type ResponseCache } from './response-cache.js';

/** What the request hook decided, for the response hook. */
export interface CacheLookup {
  use: RequestUse;
  /** The primary key ('' when bypassed). */
  primary: string;
  hasAuthorization: boolean;
}

const BYPASS: CacheLookup = Object.freeze({ use: 'bypass', primary: '', hasAuthorization: false });

/** Never stored: they belong to one request. */
const PER_REQUEST = new Set(['x-request-id', 'x-cache-status', 'age']);

/** The Vary names the upstream (and the response plugins) gave: `vary` minus one occurrence of each the client headers added (CORS's Origin). */
export function responseVary(vary: OutgoingHttpHeaders[string], added: OutgoingHttpHeaders[string]): string[] {
  const names = varyNames(vary);
  for (const name of varyNames(added)) {
    const at = names.indexOf(name);
    if (at !== -1) names.splice(at, 1);
  }
  return [...new Set(names)].sort();
}

function storedHeaders(headers: OutgoingHttpHeaders, clientHeaders: OutgoingHttpHeaders | null): OutgoingHttpHeaders {
  const stored: OutgoingHttpHeaders = {};
  for (const name in headers) {
    if (PER_REQUEST.has(name) || (clientHeaders && name !== 'vary' && clientHeaders[name] !== undefined)) continue;
    stored[name] = headers[name];
  }
  return stored;
}

/** A hit's headers: the stored ones, this request's client headers (a Vary name already listed is not repeated), Age. */
export function hitHeaders(entry: CachedResponse, clientHeaders: OutgoingHttpHeaders | null, now: number): OutgoingHttpHeaders {
  const headers: OutgoingHttpHeaders = { ...entry.headers };
  for (const name in clientHeaders) {
    const value = clientHeaders[name];
    if (name !== 'vary' || headers.vary === undefined) {
      headers[name] = value;
      continue;
    }
    const listed = new Set(varyNames(headers.vary));
    const more = String(value)
      .split(',')
      .map((v) => v.trim())
      .filter((v) => v !== '' && !listed.has(v.toLowerCase()));
    if (more.length > 0) headers.vary = `${headerText(headers.vary)}, ${more.join(', ')}`;
  }
  headers.age = String(Math.max(0, Math.floor((now - entry.storedAt) / 1000)));
  headers['x-cache-status'] = 'Hit';
  return headers;
}

/** Passes every chunk on at once and keeps a copy, given to `complete` when the body ended within `limit` bytes. */
export function copyingStream(limit: number, complete: (body: Buffer) => void): Transform {
  let chunks: Buffer[] | null = [];
  let bytes = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (chunks) {
        bytes += chunk.length;
        if (bytes > limit) chunks = null;
        else chunks.push(chunk);
      }
      callback(null, chunk);
    },
    flush(callback) {
      if (chunks) complete(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes));
      callback();
    },
  });
}

/** Whether a request's authenticated identity keeps it out of the cache: one user's answer is for that user alone. */
function personalUnkeyed(config: CompiledProxyCache, ex: PluginExchange): boolean {
  if (!ex.personal || config.perConsumer) return false;
  return !(ex.req.headers.authorization !== undefined && config.varyHeaders.includes('authorization'));
}

function lookupOf(config: CompiledProxyCache, namespace: string, ex: PluginExchange, trusted: TrustedProxies): CacheLookup {
  const req = ex.req;
  const use = req.headers.upgrade === undefined && !personalUnkeyed(config, ex) ? requestUse(config, req.method, req.headers) : 'bypass';
  if (use === 'bypass') return BYPASS;
  // The Host too: one route may serve several hosts (wildcards, several names), whose upstreams may answer each its own.
  // The scheme and forwarded host as the upstream gets them (X-Forwarded-*), which it may build links from.
  const host = (req.headers.host ?? '').toLowerCase();
  const origin = `${originalScheme(req, trusted)}://${(originalHost(req, trusted) ?? '').toLowerCase()}`;
  const primary = keyOf([
    namespace,
    req.method!,
    origin,
    host,
    ex.path,
    keyedQuery(ex.query, config.varyQueryParams),
    ex.identity ?? '',
    ...headerValues(ex.headers, config.varyHeaders),
  ]);
  // An Authorization in the key gives every credential entries of its own: then it restricts nothing.
  // So does per_consumer's identity in the key (personalUnkeyed let only such a request of a personal one come here).
  const keyed = config.varyHeaders.includes('authorization') || (ex.personal && config.perConsumer);
  return { use, primary, hasAuthorization: req.headers.authorization !== undefined && !keyed };
}

export const proxyCacheRuntime: PluginRuntime<CompiledProxyCache> = {
  stage: (config, { route, responseCache: cache, trustedProxies }) => {
    const namespace = cache.namespace();
    return {
      request(ex) {
        const lookup = (ex.cacheLookup = lookupOf(config, namespace, ex, trustedProxies));
        if (lookup.use !== 'lookup') return;
        const vary = cache.varyOf(lookup.primary);
        if (vary === null) return;
        const now = Date.now();
        const entry = cache.get(keyOf([lookup.primary, ...headerValues(ex.headers, vary)]), now);
        if (!entry) return;
        cache.count(route.id, 'Hit');
        return { status: entry.status, headers: hitHeaders(entry, ex.clientHeaders, now), body: entry.body };
      },
      response(ex, status, headers) {
        const lookup = ex.cacheLookup;
        if (!lookup) return;
        const cacheStatus = lookup.use === 'lookup' ? 'Miss' : 'Bypass';
        headers['x-cache-status'] = cacheStatus;
        cache.count(route.id, cacheStatus);
        if (lookup.use === 'bypass') return;
        const ttlMs = freshnessMs(config, status, headers, lookup.hasAuthorization);
        if (ttlMs === null) return;
        const length = headerText(headers['content-length']);
        if (ex.req.method !== 'HEAD' && length !== undefined && Number(length) > config.maxEntryBytes) return;
        const vary = responseVary(headers.vary, ex.clientHeaders?.vary);
        const variant = keyOf([lookup.primary, ...headerValues(ex.headers, vary)]);
        const stored = storedHeaders(headers, ex.clientHeaders);
        return copyingStream(config.maxEntryBytes, (body) => {
          const now = Date.now();
          cache.set(lookup.primary, vary, variant, { status, headers: stored, body, storedAt: now, expiresAt: now + ttlMs });
        });
      },
    };
  },
};
