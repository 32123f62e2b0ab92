/**
 * Match and rewrite: pure functions over an immutable RoutingTable built from a snapshot.
 * No I/O, no clock, no module state; lookup never throws (find-my-way's `find`).
 */
import type { CompiledRoute } from '#proto/compile/index';

export interface RequestFacts {
  method: string;
  /** Raw Host header (may carry a port); undefined when absent. */
  host: string | undefined;
  /** Path only, no query string: the output of normalizePath(raw path), which is also what is forwarded. */
  path: string;
}

export interface RouteMatch {
  route: CompiledRoute;
  params: Record<string, string>;
  /** L of SPEC §4. */
  matched: string;
}

export interface RoutingTable {
  /** Number of routes, for metrics/logs. */
  readonly size: number;
  match(req: RequestFacts): RouteMatch | null;
}

export interface UpstreamTarget {
  /** `http://host:port` or `https://host:port`, the key of the undici pool. */
  origin: string;
  /** Path plus query (`/a/b?x=1`), never empty. */
  path: string;
  /** Value for the upstream Host header (target host[:port], or the client's Host when preserve_host). */
  host: string;
}

/** Priority baked in at build: longest literal prefix, then more conditions, then name (see router.ts). */
export { buildRoutingTable } from './router.js';
/**
 * SPEC §4 rewrite table. `query` is the client's raw query string without '?', '' when none.
 * Throws GatehouseError('BAD_UPSTREAM_HOST') when substituted placeholders do not form a valid hostname.
 */
export { rewrite, joinPaths } from './rewrite.js';
export { createBalancer, type Balancer } from './balancer.js';
/** Call before `match` and forward the result: see proto/src/compile/normalize-path.ts. */
export { normalizePath } from '#proto/compile/normalize-path';
