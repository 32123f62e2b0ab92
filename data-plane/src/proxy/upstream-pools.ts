/**
 * Connection pools to upstreams, held per instance (undici's Agent shape): one undici Pool per
 * origin, dial timeout and TLS mode. insecure_skip_verify APIs get pools of their own, so only
 * those APIs ever accept a self-signed certificate, even when another API uses the same origin.
 */
import { LRUCache } from 'lru-cache';
import type { SecureContext } from 'node:tls';
import type { Dispatcher } from 'undici';
import { Http2Upstream } from './http2-upstream.js';
import { Pool } from './undici.js';
import { upstreamSecureContext, type UpstreamTlsWatcher } from './upstream-tls.js';

export interface PoolOptions {
  dialTimeoutMs: number;
  insecureSkipVerify: boolean;
  /** `proxy.upstreams.protocol: "http2"`: one h2 connection per origin (http2-upstream.ts) instead of an HTTP/1.1 pool. */
  http2?: boolean;
}

/** An undici Pool, or its HTTP/2 counterpart. */
export type UpstreamPool = Dispatcher & { readonly closed: boolean };

export interface UpstreamPools {
  get(origin: string, options: PoolOptions): UpstreamPool;
  readonly size: number;
  /** Gracefully closes every pool (in-flight requests finish first). */
  close(): Promise<void>;
}

/**
 * Response bodies may legitimately pause (long polling, slow downloads): 5 minutes between
 * two body chunks before the upstream counts as dead. Header waits use the route's
 * response_header_timeout (forward.ts HeaderWait); undici's own header timeout is this same
 * value, a backstop: with equal values undici's parser refreshes one timer per connection
 * rather than replacing it twice per request (forward.ts gives the measurement).
 */
export const UPSTREAM_IDLE_TIMEOUT_MS = 5 * 60_000;

/**
 * Targets may take their host from request placeholders, so the number of origins is not
 * bounded by the configuration: past this many pools the least recently used one is closed.
 */
const DEFAULT_MAX_POOLS = 1024;

/** `tls`: UPSTREAM_CA_FILE / UPSTREAM_TLS_CERT (upstream-tls.ts); each new set closes the pools, so new connections use it. */
export function createUpstreamPools(options: { maxPools?: number; tls?: UpstreamTlsWatcher | null } = {}): UpstreamPools {
  const pools = new LRUCache<string, UpstreamPool>({
    max: options.maxPools ?? DEFAULT_MAX_POOLS,
    // An evicted pool finishes its in-flight requests, then closes; close() below closes the rest itself.
    dispose: (pool, _key, reason) => {
      if (reason === 'evict') void pool.close().catch(() => undefined);
    },
  });
  let closed = false;
  let secureContext: SecureContext | undefined = options.tls ? upstreamSecureContext(options.tls.current()) : undefined;
  options.tls?.subscribe((files) => {
    secureContext = upstreamSecureContext(files);
    // As an eviction by the bound: each finishes its requests in flight, then closes.
    const old = [...pools.values()];
    pools.clear();
    for (const pool of old) void pool.close().catch(() => undefined);
  });

  return {
    get(origin, { dialTimeoutMs, insecureSkipVerify, http2 }) {
      if (closed) throw new Error('upstream pools are closed');
      const key = `${insecureSkipVerify ? 'insecure' : 'verify'} ${dialTimeoutMs} ${http2 ? 'h2 ' : ''}${origin}`;
      let pool = pools.get(key);
      if (!pool && http2) {
        pool = new Http2Upstream(origin, {
          dialTimeoutMs,
          insecureSkipVerify,
          idleTimeoutMs: UPSTREAM_IDLE_TIMEOUT_MS,
          ...(secureContext && { secureContext }),
        });
        pools.set(key, pool);
      } else if (!pool) {
        pool = new Pool(origin, {
          connect: { timeout: dialTimeoutMs, ...(insecureSkipVerify ? { rejectUnauthorized: false } : {}), ...(secureContext && { secureContext }) },
          headersTimeout: UPSTREAM_IDLE_TIMEOUT_MS,
          bodyTimeout: UPSTREAM_IDLE_TIMEOUT_MS,
        });
        pools.set(key, pool);
      }
      return pool;
    },
    get size() {
      return pools.size;
    },
    async close() {
      closed = true;
      const all = [...pools.values()];
      pools.clear();
      await Promise.allSettled(all.map((pool) => pool.close()));
    },
  };
}
