/**
 * The data plane's one piece of configuration state: the applied snapshot. main.ts creates one
 * holder; the snapshot client (and the cold-start cache) apply messages to it; every proxied
 * request reads `current()` once and uses that object to the end, so it never sees half of one.
 *
 * A delta is applied on top of the held content only: the unchanged definitions keep their objects,
 * their compiled routes stay in the held index (compile/incremental.ts: only the delta's definitions
 * are compiled and checked) and their RouteUpstream (balancer position, pipeline) is reused; then the
 * routing table is rebuilt from the route list and swapped in like a full snapshot.
 */
import type { CompiledOAuthServer, CompiledRoute } from '#proto/compile/index';
import { applyChanges, indexConfig, indexRoutes, type ConfigIndex } from '#proto/compile/incremental';
import type { PasswordHash } from '#proto/password-hash';
import { parseDuration } from '#proto/duration';
import { applyDeltaMessage, fromSnapshotMessage, type ContentChange, type DeltaMessage, type SnapshotContent, type SnapshotMessage } from '#proto/snapshot/codec';
import { Counter, Gauge, type Registry } from 'prom-client';
import { createAuthorizer, type AuthLogger, type Authorizer, type Introspector } from '../auth/index.js';
import { createBasicAuthChecker, type BasicAuthChecker } from '../auth/basic-credentials.js';
import type { TokenStore } from '../auth/token-store.js';
import { createBalancer, type Balancer } from '../routing/index.js';
import { buildRoutingTable, type RoutingTable } from '../routing/index.js';
import { buildPipeline, type Pipeline, type StageDeps } from '../plugins/index.js';
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
  /** Same, for a delta on top of the held content (refused unless that is exactly its base). */
  applyDelta(delta: DeltaMessage): ApplyResult;
  /** The held content (definitions), for the snapshot cache; null before the first snapshot. */
  content(): SnapshotContent | null;
}

/** What a later delta builds on: the content and what was built from it. */
interface Held {
  content: SnapshotContent;
  /** Route keys and references of the content: a delta is checked by what it changes (compile/incremental.ts). */
  index: ConfigIndex;
  oauthServers: ReadonlyMap<string, CompiledOAuthServer>;
  basicAuthUsers: ReadonlyMap<string, PasswordHash>;
  /** Route objects by id: a route that is the same object next time is unchanged. */
  routes: ReadonlyMap<string, CompiledRoute>;
  basicAuth: StageDeps['basicAuth'];
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
  // No CompileCache here: a full snapshot brings new objects (nothing to reuse), and across deltas the
  // index itself keeps every unchanged definition's compiled routes (a cache would only cost memory).
  let held: Held | null = null;
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

  const sameEntries = <K, V>(a: ReadonlyMap<K, V>, b: ReadonlyMap<K, V>) => a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);

  /**
   * Builds what `content` needs, reusing from `previous` what did not change. `changes` (a delta's)
   * are checked against `previous`'s index; without them the content is indexed whole.
   */
  function build(content: SnapshotContent, breakers: BreakerGeneration, previous: Held | null, changes?: ContentChange[]): { next: AppliedSnapshot; held: Held } {
    // The CP sends only accepted definitions: anything rejected here means the whole snapshot is bad.
    const index = previous && changes ? applyChanges(previous.index, changes) : indexConfig(content.defs);
    const compiled = indexRoutes(index);
    const table = buildRoutingTable(compiled.routes);
    // Unchanged servers and users (same compiled objects) keep the authorizer and its caches.
    const authReused = previous !== null && applied !== null && sameEntries(previous.oauthServers, compiled.oauthServers);
    const usersReused = previous !== null && sameEntries(previous.basicAuthUsers, compiled.basicAuthUsers);
    const authorizer =
      authReused && applied
        ? applied.authorizer
        : createAuthorizer({ servers: compiled.oauthServers, tokenStore: deps.tokenStore, introspector: deps.introspector, now: deps.now, logger: deps.logger });
    const basicAuth =
      usersReused && previous ? previous.basicAuth : (authorization: string | undefined) => basicAuthChecker.check(compiled.basicAuthUsers, authorization);
    const pipelineDeps = { authorizer, rateLimiter, basicAuth, breakers };
    const upstreams = new Map<string, RouteUpstream>();
    const routes = new Map<string, CompiledRoute>();
    for (const route of compiled.routes) {
      routes.set(route.id, route);
      const old = authReused && usersReused && previous?.routes.get(route.id) === route ? applied?.upstreams.get(route.id) : undefined;
      if (old) {
        // cb breakers live in the breaker generation: get them again (same state) so the commit keeps them.
        upstreams.set(route.id, route.plugins.some((p) => p.name === 'cb') ? { ...old, pipeline: buildPipeline(route, pipelineDeps) } : old);
        continue;
      }
      // fromSnapshotMessage / applyDeltaMessage re-parse every definition, so the timeouts are filled in and valid.
      const timeouts = route.proxy.forwarding_timeouts;
      upstreams.set(route.id, {
        balancer: createBalancer(route.proxy.upstreams.balancing, route.targets),
        dialTimeoutMs: parseDuration(timeouts.dial_timeout),
        headersTimeoutMs: parseDuration(timeouts.response_header_timeout),
        insecureSkipVerify: route.proxy.insecure_skip_verify,
        pipeline: buildPipeline(route, pipelineDeps),
      });
    }
    const { oauthServers, basicAuthUsers } = compiled;
    return { next: { version: content.version, hash: content.hash, table, authorizer, upstreams }, held: { content, index, oauthServers, basicAuthUsers, routes, basicAuth } };
  }

  function swap(version: number, content: () => SnapshotContent & { changes?: ContentChange[] }, previous: Held | null): ApplyResult {
    let built: ReturnType<typeof build>;
    const breakers = breakerRegistry.begin();
    try {
      const next = content();
      built = build({ version: next.version, hash: next.hash, defs: next.defs }, breakers, previous, next.changes);
    } catch (err) {
      applies?.inc({ result: 'rejected' });
      return { ok: false, version, error: err instanceof Error ? err.message : String(err) };
    }
    applied = built.next;
    held = built.held;
    breakers.commit();
    applies?.inc({ result: 'applied' });
    return { ok: true, version: built.next.version, hash: built.next.hash, changed: true };
  }

  return {
    current: () => applied,
    content: () => (held && applied ? { ...held.content, version: applied.version } : null),
    apply(message) {
      const version = Number(message?.version ?? 0);
      if (applied && message?.hash && message.hash === applied.hash) {
        // Same content: nothing to rebuild. The CP's version is authoritative, so adopt it.
        if (version !== applied.version) applied = { ...applied, version };
        applies?.inc({ result: 'unchanged' });
        return { ok: true, version, hash: applied.hash, changed: false };
      }
      return swap(version, () => fromSnapshotMessage(message), null);
    },
    applyDelta(delta) {
      const version = Number(delta?.version ?? 0);
      const base = held && applied ? { ...held.content, version: applied.version } : null;
      return swap(
        version,
        () => {
          if (!base) throw new Error('delta without a held snapshot');
          return applyDeltaMessage(base, delta);
        },
        held,
      );
    },
  };
}
