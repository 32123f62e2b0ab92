/**
 * How a request goes to its target (the ForwardPlan forward.ts carries out): the rewritten path, the pool of the
 * target's origin and the upstream request headers.
 */
import type { IncomingMessage } from 'node:http';
import type { CompiledTarget } from '#proto/compile/index';
import type { PluginExchange } from '../plugins/index.js';
import { forwardedForUpstream, originalHost, originalScheme, type TrustedProxies } from '../plugins/client-ip.js';
import { rewrite, type RouteMatch } from '../routing/index.js';
import type { RouteUpstream, ServingTable } from '../table/index.js';
import type { AccessRecord } from './access-log.js';
import { forwardedClientCert } from './client-certificate.js';
import type { ForwardPlan } from './forward.js';
import { upstreamRequestHeaders, withoutConnectionNamed } from './headers.js';
import type { RequestTrace } from './request-trace.js';
import type { UpstreamPool, UpstreamPools } from './upstream-pools.js';

/** How a request goes to `target`: rewritten path, pool and upstream headers. */
export type PlanFor = (
  req: IncomingMessage,
  requestId: string,
  ex: PluginExchange | null,
  snapshot: ServingTable,
  match: RouteMatch,
  upstream: RouteUpstream,
  target: CompiledTarget,
  path: string,
  query: string,
  access: AccessRecord | null,
  trace: RequestTrace,
) => ForwardPlan;

/** `clientCertificates`: PROXY_TLS_CLIENT_CA is set, so every client presented a certificate (forwarded to upstreams). */
export function createPlanner(deps: { pools: UpstreamPools; trusted: TrustedProxies; clientCertificates: boolean }): PlanFor {
  const { pools, trusted, clientCertificates } = deps;
  /**
   * Pools of the targets whose origin is fixed (no placeholder), by target: a CompiledTarget belongs
   * to one compiled route (one dial timeout and TLS mode) and is replaced when its route changes.
   * A WeakMap lookup costs a fraction of pools.get's key string + lru-cache get. Targets whose host comes from the request keep the
   * bounded LRU; a pool it evicted is closed, so a closed one is looked up again.
   */
  const fixedPools = new WeakMap<CompiledTarget, UpstreamPool>();
  function poolFor(target: CompiledTarget, origin: string, upstream: RouteUpstream): UpstreamPool {
    if (!target.plan.resolved) return pools.get(origin, upstream);
    let pool = fixedPools.get(target);
    if (pool === undefined || pool.closed) {
      pool = pools.get(origin, upstream);
      fixedPools.set(target, pool);
    }
    return pool;
  }

  return (req, requestId, ex, snapshot, match, upstream, target, path, query, access, trace) => {
    const destination = rewrite(match, target, { path, query, host: req.headers.host });
    if (access) {
      access.upstream = destination.origin;
      if (ex?.consumer != null) access.consumer = ex.consumer;
    }
    trace.upstream(destination.origin);
    const pool = poolFor(target, destination.origin, upstream);
    const headers = upstreamRequestHeaders(ex ? ex.headers : withoutConnectionNamed(req.rawHeaders), {
      host: destination.host,
      forwardedFor: forwardedForUpstream(req),
      forwardedHost: originalHost(req, trusted),
      proto: originalScheme(req, trusted),
      sessionCookies: snapshot.sessionCookies,
      requestId,
      traceparent: trace.traceparent,
      keepTracestate: trace.keepTracestate,
      consumer: ex ? ex.consumer : null,
      consumerGroups: ex ? ex.groupsHeader : null,
      clientCert: clientCertificates ? forwardedClientCert(req) : null,
    });
    return {
      requestId,
      routeId: match.route.id,
      pool,
      path: destination.path,
      headers,
      headersTimeoutMs: upstream.headersTimeoutMs,
      observer: snapshot.authorizer.observe(match.route),
      plugins: ex,
      load: upstream.balancer.loadOf(target),
    };
  };
}
