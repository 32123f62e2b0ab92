/**
 * Match and rewrite: pure functions over an immutable RoutingTable built from a snapshot.
 * No I/O, no clock, no module state. No request makes a lookup throw (a malformed path matches
 * nothing): a throw is a bug, which the caller answers as an internal error, not as "no route".
 * Shared by the data plane (which routes with it) and the control plane (POST /explain answers
 * with the very same code), hence in proto/.
 */
import type { CompiledRoute } from '../compile/index.js';

/** A request's headers as node gives them (IncomingMessage.headers): lower-case names. */
export type RequestHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface RequestFacts {
  method: string;
  /** Raw Host header (may carry a port); undefined when absent. */
  host: string | undefined;
  /** Path only, no query string: the output of normalizePath(raw path), which is also what is forwarded. */
  path: string;
  /** Read only by routes with header conditions (the request's own object, not a copy); absent = no headers. */
  headers?: RequestHeaders;
}

export interface RouteMatch {
  route: CompiledRoute;
  params: Record<string, string>;
  /** L of docs/proxy.md "Proxy behaviour". */
  matched: string;
}

export interface RoutingTable {
  /** Number of routes, for metrics/logs. */
  readonly size: number;
  match(req: RequestFacts): RouteMatch | null;
  /**
   * Every route `match` considers for this request (those whose literal listen_path prefix starts
   * the path, and routes without listen_path), in the order it tries them, each with the conditions
   * it fails. For POST /explain: it reads the same tree and buckets as `match`, which it leaves alone.
   */
  explain(req: RequestFacts): ConsideredRoute[];
}

export interface ConsideredRoute {
  route: CompiledRoute;
  /** The route's conditions the request fails, each checked on its own; [] when every one holds. */
  failed: Array<'method' | 'host' | 'headers' | 'path'>;
  /** Set when every condition holds. */
  match: RouteMatch | null;
}

/**
 * The priority rule that puts one matching route before another (router.ts): a longer literal
 * listen_path prefix, more conditions (hosts, methods, each header), an exact listen_path before a `/*` one,
 * then name and route id order.
 */
export type PriorityRule = 'longer_prefix' | 'more_conditions' | 'exact_listen_path' | 'name_order' | 'id_order';

export interface UpstreamTarget {
  /** `http://host:port` or `https://host:port`, the key of the undici pool. */
  origin: string;
  /** Path plus query (`/a/b?x=1`), never empty. */
  path: string;
  /** Value for the upstream Host header (target host[:port], or the client's Host when preserve_host). */
  host: string;
}

/**
 * Priority baked in at build: longest literal prefix, then more conditions, then name (see router.ts).
 * updateRoutingTable(previous, removed, added) rebuilds only the buckets of the changed routes' prefixes.
 */
export { buildRoutingTable, buildRoutingTableInTurns, updateRoutingTable, outrankedBecause } from './router.js';
/**
 * docs/proxy.md "Proxy behaviour" rewrite table. `query` is the client's raw query string without '?', '' when none.
 * Throws GatehouseError('BAD_UPSTREAM_HOST') when substituted placeholders do not form a valid hostname.
 */
export { rewrite, joinPaths, stripMatched } from './rewrite.js';
/** Call before `match` and forward the result: see proto/src/compile/normalize-path.ts. */
export { ambiguousPathForm, hasEncodedSlash, normalizePath, refusedBeforeRouting, refusedForApi } from '../compile/normalize-path.js';
/** POST /explain: a request's route, the candidates that lost and why, its upstream URLs. */
export {
  explainRequest,
  LOSS_REASONS,
  type ExplainInput,
  type ExplainTables,
  type ExplainedCandidate,
  type LossReason,
  type RequestExplanation,
} from './explain.js';
