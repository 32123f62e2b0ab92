/**
 * The process's proxy_cache store: one LRU bounded in bytes (PROXY_CACHE_SIZE), shared by every
 * route of every snapshot. Each proxy_cache stage instance (one per route and snapshot) takes a
 * namespace of its own, so a route rebuilt by a new snapshot never reads what its former
 * definition stored; those entries are no longer reachable and leave as the LRU needs room.
 *
 * A primary key (namespace, method, Host, path, query, consumer, vary_headers: index.ts) holds the Vary names of the last
 * response stored under it; each variant (the values of those request headers) is an entry of its
 * own, so an identity and a gzip client each get theirs. With WORKERS every worker has its own store.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { LRUCache } from 'lru-cache';
import { Counter, type Registry } from 'prom-client';

export interface CachedResponse {
  status: number;
  /** As the client got them, without the per-request ones (X-Request-Id, the plugins' client headers). */
  headers: OutgoingHttpHeaders;
  body: Buffer;
  /** Date.now() when stored and when stale. */
  storedAt: number;
  expiresAt: number;
}

/** The Vary names (lower-case) a primary key's variants are told apart by. */
interface VaryMarker {
  names: readonly string[];
}

type Stored = CachedResponse | VaryMarker;

export type CacheStatus = 'Hit' | 'Miss' | 'Bypass';

export interface ResponseCache {
  /** A key prefix no other stage instance has (per process). */
  namespace(): string;
  /** The Vary names stored for `primary`, or null when nothing is. */
  varyOf(primary: string): readonly string[] | null;
  /** A fresh entry, or null (a stale one is dropped). */
  get(variant: string, now: number): CachedResponse | null;
  set(primary: string, vary: readonly string[], variant: string, entry: CachedResponse): void;
  /** gatehouse_proxy_cache_total{route,status}. */
  count(route: string, status: CacheStatus): void;
  /** Bytes held (keys, headers and bodies). */
  readonly size: number;
}

/** Bytes an entry is counted for besides its body: its key, its headers, and the objects around them. */
const OVERHEAD = 256;

function sizeOf(value: Stored, key: string): number {
  if (!('body' in value)) return OVERHEAD + key.length + value.names.join().length;
  let headers = 0;
  for (const name in value.headers) headers += name.length + String(value.headers[name]).length;
  return OVERHEAD + key.length + headers + value.body.length;
}

export function createResponseCache(options: { maxBytes: number; registry?: Registry }): ResponseCache {
  const lru = new LRUCache<string, Stored>({ maxSize: options.maxBytes, sizeCalculation: sizeOf });
  const counter = options.registry
    ? new Counter({
        name: 'gatehouse_proxy_cache_total',
        help: 'Requests of proxy_cache routes, by route and X-Cache-Status (Hit, Miss, Bypass).',
        labelNames: ['route', 'status'],
        registers: [options.registry],
      })
    : null;
  let namespaces = 0;
  return {
    namespace: () => (++namespaces).toString(36),
    // Markers and entries in key spaces of their own: a variant without Vary values has its primary's key.
    varyOf(primary) {
      const marker = lru.get(`p${primary}`);
      return marker && !('body' in marker) ? marker.names : null;
    },
    get(variant, now) {
      const entry = lru.get(`v${variant}`);
      if (!entry || !('body' in entry)) return null;
      if (entry.expiresAt > now) return entry;
      lru.delete(`v${variant}`);
      return null;
    },
    set(primary, vary, variant, entry) {
      const marker = lru.peek(`p${primary}`);
      if (!marker || 'body' in marker || marker.names.join() !== vary.join()) lru.set(`p${primary}`, { names: vary });
      lru.set(`v${variant}`, entry);
    },
    count(route, status) {
      counter?.inc({ route, status });
    },
    get size() {
      return lru.calculatedSize;
    },
  };
}
