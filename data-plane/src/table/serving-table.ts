/**
 * The serving table: everything a request needs from one applied snapshot, built whole before it is swapped in
 * (build.ts) and never changed afterwards. Every proxied request reads the current one once and uses it to the
 * end, so it never sees half of one.
 */
import type { CompiledRoute } from '#proto/compile/index';
import { parseDuration } from '#proto/duration';
import type { LayeredMap } from '#proto/layered-map';
import type { Authorizer } from '../auth/index.js';
import type { Pipeline } from '../plugins/index.js';
import type { GatewayTlsContexts } from './gateway-tls.js';
import { createBalancer, type Balancer, type RoutingTable } from '../routing/index.js';

/**
 * Per-route forwarding state, parsed once so the hot path parses nothing: at build time for a route with plugins or
 * a health check (their stages and probes belong to the table being built), at its first request for a plain
 * one (RouteUpstreams).
 */
export interface RouteUpstream {
  balancer: Balancer;
  dialTimeoutMs: number;
  headersTimeoutMs: number;
  insecureSkipVerify: boolean;
  /** `proxy.upstreams.protocol: "http2"` (upstream-pools.ts). */
  http2: boolean;
  /** The route's enabled plugins as hooks (data-plane/src/plugins); null when it has none. */
  pipeline: Pipeline | null;
}

export interface ServingTable {
  readonly version: number;
  readonly hash: string;
  readonly routing: RoutingTable;
  readonly authorizer: Authorizer;
  readonly upstreams: RouteUpstreams;
  /** The cookies every openid_connect plugin of the snapshot sets (session and flow): no upstream gets them, on any route. null: none. */
  readonly sessionCookies: ReadonlySet<string> | null;
  /** The Gateway API HTTPS listeners' certificates, picked by SNI on GATEWAY_HTTPS_PORT (gateway-tls.ts); null: none. */
  readonly gatewayTls: GatewayTlsContexts | null;
}

/** Where the proxy reads the serving table of each request (the snapshot holder); null before the first snapshot. */
export interface TableSource {
  current(): ServingTable | null;
}

/**
 * The forwarding state of the snapshot's routes. A route without plugins or health check depends on nothing but
 * itself, so its state is made at its first request and kept as long as the route object (unchanged by deltas, new
 * at a full snapshot), in a WeakMap of the builder's: a DP with 10,000 APIs of which a few get traffic holds a few
 * of them, not 10,000 (~150 bytes each with their map entry). The others' are built with the table, keyed by
 * route id; a delta makes a new version sharing the held one's entries (layered-map.ts).
 */
export class RouteUpstreams {
  constructor(
    readonly built: LayeredMap<string, RouteUpstream>,
    private readonly plain: WeakMap<CompiledRoute, RouteUpstream>,
  ) {}

  /** undefined for a route of another snapshot that has plugins or a health check. */
  get(route: CompiledRoute): RouteUpstream | undefined {
    if (!isPlain(route)) return this.built.get(route.id);
    let upstream = this.plain.get(route);
    if (upstream === undefined) this.plain.set(route, (upstream = plainUpstreamOf(route)));
    return upstream;
  }
}

/** A route whose forwarding state is its own alone: no plugin stages, no health checks. */
export const isPlain = (route: CompiledRoute): boolean => route.plugins.length === 0 && !route.proxy.upstreams.health_check;

/** The parts of a route's forwarding state that come from its proxy settings alone. */
export function forwardingOf(route: CompiledRoute): Omit<RouteUpstream, 'balancer' | 'pipeline'> {
  // fromSnapshotMessage / applyDeltaMessage re-parse every definition, so the timeouts are filled in and valid.
  const timeouts = route.proxy.forwarding_timeouts;
  return {
    dialTimeoutMs: parseDuration(timeouts.dial_timeout),
    headersTimeoutMs: parseDuration(timeouts.response_header_timeout),
    insecureSkipVerify: route.proxy.insecure_skip_verify,
    http2: route.proxy.upstreams.protocol === 'http2',
  };
}

/** One literal for every RouteUpstream (not a spread, which left the last members out of the object): one shape on the hot path. */
export function routeUpstream(forwarding: ReturnType<typeof forwardingOf>, balancer: Balancer, pipeline: Pipeline | null): RouteUpstream {
  const { dialTimeoutMs, headersTimeoutMs, insecureSkipVerify, http2 } = forwarding;
  return { balancer, dialTimeoutMs, headersTimeoutMs, insecureSkipVerify, http2, pipeline };
}

const plainUpstreamOf = (route: CompiledRoute): RouteUpstream =>
  routeUpstream(forwardingOf(route), createBalancer(route.proxy.upstreams.balancing, route.targets, null), null);
