/**
 * Match and rewrite: pure functions over an immutable RoutingTable built from a snapshot.
 * No I/O, no clock, no module state; lookup never throws (find-my-way's `find`).
 * OWNER: compile/routing helper. Exported names/types are a contract; extend, don't rename.
 */
import type { CompiledRoute, CompiledTarget } from '#proto/compile/index';

export interface RequestFacts {
  method: string;
  /** Raw Host header (may carry a port); undefined when absent. */
  host: string | undefined;
  /** Path only, no query string, as received (percent-encoding kept). */
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

/** Priority baked in at build: longest literal prefix, then more conditions, then name. */
export function buildRoutingTable(routes: readonly CompiledRoute[]): RoutingTable {
  throw new Error('not implemented');
}

export interface UpstreamTarget {
  /** `http://host:port` or `https://host:port`, the key of the undici pool. */
  origin: string;
  /** Path plus query (`/a/b?x=1`), never empty. */
  path: string;
  /** Value for the upstream Host header (target host[:port], or the client's Host when preserve_host). */
  host: string;
}

/**
 * SPEC §4 rewrite table. `query` is the client's raw query string without '?', '' when none.
 * Throws GatehouseError('BAD_UPSTREAM_HOST') when substituted placeholders do not form a valid hostname.
 */
export function rewrite(
  match: RouteMatch,
  target: CompiledTarget,
  request: { path: string; query: string; host: string | undefined },
): UpstreamTarget {
  throw new Error('not implemented');
}
