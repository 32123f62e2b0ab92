/**
 * The data plane's one piece of configuration state: the applied snapshot. main.ts creates one
 * holder; the snapshot client (and the cold-start cache) apply messages to it; every proxied
 * request reads `current()` once and uses that object to the end, so it never sees half of one.
 */
import { compileAllOrThrow } from '#proto/compile/index';
import { parseDuration } from '#proto/duration';
import { fromSnapshotMessage, type SnapshotMessage } from '#proto/snapshot/codec';
import { Counter, Gauge, type Registry } from 'prom-client';
import { createAuthorizer, type AuthLogger, type Authorizer, type Introspector } from '../auth/index.js';
import { createBasicAuthChecker, type BasicAuthChecker } from '../auth/basic-credentials.js';
import type { TokenStore } from '../auth/token-store.js';
import { createBalancer, type Balancer } from '../routing/index.js';
import { buildRoutingTable, type RoutingTable } from '../routing/index.js';
import { buildPipeline, type Pipeline } from '../plugins/index.js';
import { createBreakerRegistry, type BreakerGeneration } from '../plugins/circuit-breaker.js';
import { createRateLimiter, type RateLimiter } from '../plugins/rate-limit/index.js';

/** Per-route forwarding state, built at apply time so the hot path parses nothing. */
export interface RouteUpstream {
  balancer: Balancer;
  dialTimeoutMs: number;
  headersTimeoutMs: number;
  insecureSkipVerify: boolean;
  /** The route's enabled plugins as hooks (data-plane/src/plugins); null when it has none. */
  pipeline: Pipeline | null;
}

export interface AppliedSnapshot {
  readonly version: number;
  readonly hash: string;
  readonly table: RoutingTable;
  readonly authorizer: Authorizer;
  /** Keyed by CompiledRoute.id. */
  readonly upstreams: ReadonlyMap<string, RouteUpstream>;
}

export type ApplyResult =
  | { ok: true; version: number; hash: string; changed: boolean }
  | { ok: false; version: number; error: string };

export interface SnapshotHolder {
  current(): AppliedSnapshot | null;
  /** Builds everything first, then swaps one reference; on error keeps the old snapshot. */
  apply(message: SnapshotMessage): ApplyResult;
}

export function createSnapshotHolder(deps: {
  tokenStore: TokenStore;
  /** The introspection strategy's calls and cache (main.ts passes the process's one, built on its upstream pools). */
  introspector?: Introspector;
  /** Seconds since epoch, passed to every authorizer (tests freeze it). */
  now?: () => number;
  logger?: AuthLogger;
  registry?: Registry;
  /** rate_limit counters (main.ts passes the process's one); an in-process one of this holder's own when absent. */
  rateLimiter?: RateLimiter;
  /** basic_auth verdict caches, kept across snapshots; this holder's own when absent. */
  basicAuthChecker?: BasicAuthChecker;
}): SnapshotHolder {
  let applied: AppliedSnapshot | null = null;
  const rateLimiter = deps.rateLimiter ?? createRateLimiter({ logger: deps.logger });
  const basicAuthChecker = deps.basicAuthChecker ?? createBasicAuthChecker();
  const breakerRegistry = createBreakerRegistry({ registry: deps.registry });
  const applies = deps.registry
    ? new Counter({
        name: 'gatehouse_snapshot_applies_total',
        help: 'Snapshot pushes handled, by result (applied, unchanged, rejected).',
        labelNames: ['result'],
        registers: [deps.registry],
      })
    : null;
  if (deps.registry) {
    new Gauge({
      name: 'gatehouse_snapshot_version',
      help: 'Version of the applied snapshot (0 before the first).',
      registers: [deps.registry],
      collect() {
        this.set(applied?.version ?? 0);
      },
    });
    new Gauge({
      name: 'gatehouse_snapshot_routes',
      help: 'Routes in the applied snapshot.',
      registers: [deps.registry],
      collect() {
        this.set(applied?.table.size ?? 0);
      },
    });
  }

  function build(message: SnapshotMessage, breakers: BreakerGeneration): AppliedSnapshot {
    const { version, hash, defs } = fromSnapshotMessage(message);
    // The CP sends only accepted definitions: anything rejected here means the whole snapshot is bad.
    const compiled = compileAllOrThrow(defs);
    const table = buildRoutingTable(compiled.routes);
    const authorizer = createAuthorizer({
      servers: compiled.oauthServers,
      tokenStore: deps.tokenStore,
      introspector: deps.introspector,
      now: deps.now,
      logger: deps.logger,
    });
    const basicAuth = (authorization: string | undefined) => basicAuthChecker.check(compiled.basicAuthUsers, authorization);
    const upstreams = new Map<string, RouteUpstream>();
    for (const route of compiled.routes) {
      // fromSnapshotMessage re-parses every definition, so the timeouts are filled in and valid.
      const timeouts = route.proxy.forwarding_timeouts;
      upstreams.set(route.id, {
        balancer: createBalancer(route.proxy.upstreams.balancing, route.targets),
        dialTimeoutMs: parseDuration(timeouts.dial_timeout),
        headersTimeoutMs: parseDuration(timeouts.response_header_timeout),
        insecureSkipVerify: route.proxy.insecure_skip_verify,
        pipeline: buildPipeline(route, { authorizer, rateLimiter, basicAuth, breakers }),
      });
    }
    return { version, hash, table, authorizer, upstreams };
  }

  return {
    current: () => applied,
    apply(message) {
      const version = Number(message?.version ?? 0);
      if (applied && message?.hash && message.hash === applied.hash) {
        // Same content: nothing to rebuild. The CP's version is authoritative, so adopt it.
        if (version !== applied.version) applied = { ...applied, version };
        applies?.inc({ result: 'unchanged' });
        return { ok: true, version, hash: applied.hash, changed: false };
      }
      let next: AppliedSnapshot;
      const breakers = breakerRegistry.begin();
      try {
        next = build(message, breakers);
      } catch (err) {
        applies?.inc({ result: 'rejected' });
        return { ok: false, version, error: err instanceof Error ? err.message : String(err) };
      }
      applied = next;
      breakers.commit();
      applies?.inc({ result: 'applied' });
      return { ok: true, version: next.version, hash: next.hash, changed: true };
    },
  };
}
