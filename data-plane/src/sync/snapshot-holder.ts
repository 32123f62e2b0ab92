/**
 * The data plane's one piece of configuration state: the applied snapshot. main.ts creates one
 * holder; the snapshot client (and the cold-start cache) apply messages to it; every proxied
 * request reads `current()` once and uses that object to the end, so it never sees half of one.
 *
 * A delta is applied on top of the held content only: the unchanged definitions keep their objects,
 * their compiled routes stay in the held index (compile/incremental.ts: only the delta's definitions
 * are compiled and checked) and their RouteUpstream (balancer position, pipeline) is reused; the
 * routing table is updated in the buckets of the changed routes only (updateRoutingTable) and swapped
 * in like a full snapshot. State that outlives snapshots (cb's breakers, health checks) is kept by
 * route-state registries: a delta releases its removed routes' and gets its added routes' only.
 *
 * A full snapshot that arrives while one serves (applyInTurns) is decoded, validated, hashed, indexed and given its
 * routing table in turns, the requests in flight served between them, and then swapped in as apply() does.
 */
import type { CompiledOAuthServer, CompiledRoute } from '#proto/compile/index';
import {
  applyChanges,
  applyChangesInTurns,
  indexConfig,
  indexConfigInTurns,
  indexRoutes,
  indexRoutesInTurns,
  type ConfigIndex,
} from '#proto/compile/incremental';
import type { PasswordHash } from '#proto/password-hash';
import type { ApiDefinition } from '#proto/definition/types';
import { parseDuration } from '#proto/duration';
import { LayeredMap } from '#proto/layered-map';
import { allTurns } from '#proto/turns';
import {
  applyDeltaMessage,
  applyDeltaMessageInTurns,
  fromSnapshotMessage,
  fromSnapshotMessageInTurns,
  prepareForDeltas,
  type ContentChange,
  type DeltaMessage,
  type SnapshotContent,
  type SnapshotMessage,
} from '#proto/snapshot/codec';
import { Counter, Gauge, type Registry } from 'prom-client';
import { createAuthorizer, type AuthLogger, type Authorizer, type Introspector, type JwksCache } from '../auth/index.js';
import { createBasicAuthChecker, type BasicAuthChecker } from '../auth/basic-credentials.js';
import { apiKeyLookup } from '../auth/api-keys.js';
import type { TokenStore } from '../auth/token-store.js';
import type { OidcProviders } from '../auth/oidc-provider.js';
import type { CompiledOpenidConnect } from '#proto/plugins/index';
import { createBalancer, type Balancer } from '../routing/index.js';
import { buildRoutingTable, buildRoutingTableInTurns, updateRoutingTable, type RoutingTable } from '../routing/index.js';
import { NO_TRUSTED_PROXIES, type TrustedProxies } from '../plugins/client-ip.js';
import { buildPipeline, createResponseCache, type Pipeline, type ResponseCache, type StageDeps } from '../plugins/index.js';
import { createBreakerRegistry, type BreakerGeneration } from '../plugins/circuit-breaker.js';
import { passiveStage, type HealthGeneration, type HealthRegistry } from '../health/index.js';
import { createRateLimiter, type RateLimiter } from '../plugins/rate-limit/index.js';
import type { YoungGenerationHold } from '../memory/index.js';

const noop = (): void => {};

/**
 * Per-route forwarding state, parsed once so the hot path parses nothing: at apply time for a route with plugins or
 * a health check (their stages and probes belong to the snapshot being built), at its first request for a plain
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

export interface AppliedSnapshot {
  readonly version: number;
  readonly hash: string;
  readonly table: RoutingTable;
  readonly authorizer: Authorizer;
  readonly upstreams: RouteUpstreams;
  /** The cookies every openid_connect plugin of the snapshot sets (session and flow): no upstream gets them, on any route. null: none. */
  readonly sessionCookies: ReadonlySet<string> | null;
}

/**
 * The forwarding state of the snapshot's routes. A route without plugins or health check depends on nothing but
 * itself, so its state is made at its first request and kept as long as the route object (unchanged by deltas, new
 * at a full snapshot), in a WeakMap of the holder's: a DP with 10,000 APIs of which a few get traffic holds a few
 * of them, not 10,000 (~150 bytes each with their map entry). The others' are built with the snapshot, keyed by
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
const isPlain = (route: CompiledRoute): boolean => route.plugins.length === 0 && !route.proxy.upstreams.health_check;

/** The parts of a route's forwarding state that come from its proxy settings alone. */
function forwardingOf(route: CompiledRoute): Omit<RouteUpstream, 'balancer' | 'pipeline'> {
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
function routeUpstream(forwarding: ReturnType<typeof forwardingOf>, balancer: Balancer, pipeline: Pipeline | null): RouteUpstream {
  const { dialTimeoutMs, headersTimeoutMs, insecureSkipVerify, http2 } = forwarding;
  return { balancer, dialTimeoutMs, headersTimeoutMs, insecureSkipVerify, http2, pipeline };
}

const plainUpstreamOf = (route: CompiledRoute): RouteUpstream =>
  routeUpstream(forwardingOf(route), createBalancer(route.proxy.upstreams.balancing, route.targets, null), null);

export type ApplyResult = { ok: true; version: number; hash: string; changed: boolean } | { ok: false; version: number; error: string };

export interface SnapshotHolder {
  current(): AppliedSnapshot | null;
  /** Builds everything first, then swaps one reference; on error keeps the old snapshot. */
  apply(message: SnapshotMessage): ApplyResult;
  /**
   * apply() for a data plane that serves requests meanwhile: decoding, validating, hashing, compiling and the
   * routing table run in turns of APPLY_TURN definitions (routes, tree nodes) with the event loop's I/O between
   * them, the held snapshot serving; the rest and the swap as apply() does. Resolves null without applying when
   * `wanted()` turns false between turns (its stream went down).
   */
  applyInTurns(message: SnapshotMessage, wanted?: () => boolean): Promise<ApplyResult | null>;
  /** Same, for a delta on top of the held content (refused unless that is exactly its base). */
  applyDelta(delta: DeltaMessage): ApplyResult;
  /**
   * A large delta (LARGE_DELTA definitions or more) in turns as applyInTurns applies a full snapshot: its definitions
   * decoded, validated and the result hashed, its changes made to the held index, its changed routes found and the
   * routing table built, then swapped in as applyDelta does (the unchanged routes keep their state).
   */
  applyDeltaInTurns(delta: DeltaMessage, wanted?: () => boolean): Promise<ApplyResult | null>;
  /** The held content (definitions), for the snapshot cache; null before the first snapshot. */
  content(): SnapshotContent | null;
}

type IndexEntry = NonNullable<ReturnType<ConfigIndex['entries']['get']>>;

/**
 * Definitions per turn of applyInTurns: a few ms of work per turn, so a serving data plane's requests wait at most
 * that long, where a full snapshot applied at once would hold them for the whole apply (scripts/bench-full-apply.mjs).
 */
export const APPLY_TURN = 200;

/**
 * Definitions a delta adds, changes or removes from which a serving data plane applies it in turns
 * (applyDeltaInTurns): applied at once, a delta that large would pause its requests for tens of ms or more
 * (scripts/bench-large-delta.mjs).
 */
export const LARGE_DELTA = 1000;

/** What applyInTurns and applyDeltaInTurns build in turns for build() and buildDelta(): the index, its routes and their routing table. */
interface Prepared {
  index: ConfigIndex;
  routed: ReturnType<typeof indexRoutes>;
  table: RoutingTable;
  /** A large delta's changed routes (changedRoutesInTurns); absent for a full snapshot. */
  moved?: ChangedRoutes;
}

interface ChangedRoutes {
  removed: CompiledRoute[];
  added: CompiledRoute[];
}

/**
 * What the changed definitions route (as indexRoutes counts them) in the index before and after `changes`, yielding
 * after every `turn` changes (each change makes a key and looks it up in each index).
 */
function* changedRoutesInTurns(before: ConfigIndex, after: ConfigIndex, changes: readonly ContentChange[], turn = Infinity): Generator<void, ChangedRoutes> {
  const routesOf = (config: ConfigIndex, key: string): readonly CompiledRoute[] => {
    const entry = config.entries.get(key);
    if (entry?.kind === 'api') return (entry.def as ApiDefinition).active ? entry.routes : [];
    return entry?.server?.routes ?? [];
  };
  const moved: ChangedRoutes = { removed: [], added: [] };
  for (let i = 0; i < changes.length; i++) {
    if (i > 0 && i % turn === 0) yield;
    const key = `${changes[i]!.kind}:${changes[i]!.name}`;
    moved.removed.push(...routesOf(before, key));
    moved.added.push(...routesOf(after, key));
  }
  return moved;
}

/** Runs steps that yield between turns, letting the event loop's I/O (requests) run after each. */
async function inTurns<T>(steps: Generator<void, T>, wanted: () => boolean): Promise<T | null> {
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (!wanted()) return null;
  }
}

/** What a later delta builds on: the content and what was built from it. */
interface Held {
  content: SnapshotContent;
  /** Route keys and references of the content: a delta is checked by what it changes (compile/incremental.ts). */
  index: ConfigIndex;
  oauthServers: ReadonlyMap<string, CompiledOAuthServer>;
  credentials: HeldCredentials;
}

/** The snapshot's global credentials and the stage dependencies that check them (rebuilt only when they change). */
interface HeldCredentials extends Pick<StageDeps, 'basicAuth' | 'apiKeyOwner' | 'basicAuthGroups' | 'keyAuthGroups'> {
  /** basic_auth users: username → scrypt hash. */
  basicAuthUsers: ReadonlyMap<string, PasswordHash>;
  /** key_auth credentials: key_hash → username. */
  apiKeys: ReadonlyMap<string, string>;
  /** The snapshot's key_auth installation key (SnapshotContent.keyAuthHashKey). */
  keyAuthHashKey: string | undefined;
}

export function createSnapshotHolder(deps: {
  tokenStore: TokenStore;
  /** The introspection strategy's calls and cache (main.ts passes the process's one, built on its upstream pools). */
  introspector?: Introspector;
  /** JWKS sets of jwt servers with a jwks_uri (main.ts passes the process's one, built on its upstream pools). */
  jwks?: JwksCache;
  /** Seconds since epoch, passed to every authorizer (tests freeze it). */
  now?: () => number;
  logger?: AuthLogger;
  registry?: Registry;
  /** rate_limit counters (main.ts passes the process's one); an in-process one of this holder's own when absent. */
  rateLimiter?: RateLimiter;
  /** basic_auth verdict caches, kept across snapshots; this holder's own when absent. */
  basicAuthChecker?: BasicAuthChecker;
  /** Upstream health checks (main.ts passes the process's one, probing through its pools); without it, health_check is not acted on. */
  health?: HealthRegistry;
  /** proxy_cache's store (main.ts passes the process's one, PROXY_CACHE_SIZE); a 64 MiB one of this holder's own when absent. */
  responseCache?: ResponseCache;
  /** openid_connect's provider client (main.ts passes the process's one, on its upstream pools). */
  oidc?: OidcProviders;
  /** TRUSTED_PROXIES (plugins/client-ip.ts); none when absent. */
  trustedProxies?: TrustedProxies;
  /** Keeps V8's young generation from growing while a full snapshot is applied (young-generation.ts; main.ts passes the process's). Tests leave it out. */
  holdYoungGeneration?: YoungGenerationHold;
  /** Ends the process's start-up hold (start-up-hold.ts) once the first snapshot is applied. */
  endStartUpHold?: () => void;
}): SnapshotHolder {
  let applied: AppliedSnapshot | null = null;
  // No CompileCache here: a full snapshot brings new objects (nothing to reuse), and across deltas the
  // index itself keeps every unchanged definition's compiled routes (a cache would only cost memory).
  let held: Held | null = null;
  const rateLimiter = deps.rateLimiter ?? createRateLimiter({ logger: deps.logger });
  const basicAuthChecker = deps.basicAuthChecker ?? createBasicAuthChecker();
  const responseCache = deps.responseCache ?? createResponseCache({ maxBytes: 64 * 1024 ** 2 });
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

  function heldCredentials(
    { basicAuthUsers, apiKeys, basicAuthGroups, keyAuthGroups }: Omit<HeldCredentials, 'basicAuth' | 'apiKeyOwner' | 'keyAuthHashKey'>,
    keyAuthHashKey: string | undefined,
  ): HeldCredentials {
    return {
      basicAuthUsers,
      apiKeys,
      basicAuthGroups,
      keyAuthGroups,
      keyAuthHashKey,
      basicAuth: (authorization) => basicAuthChecker.check(basicAuthUsers, authorization),
      apiKeyOwner: apiKeyLookup(apiKeys, keyAuthHashKey),
    };
  }

  function pipelineDepsOf(authorizer: Authorizer, credentials: HeldCredentials, breakers: BreakerGeneration): Omit<StageDeps, 'route'> {
    const { basicAuth, apiKeyOwner, basicAuthGroups, keyAuthGroups } = credentials;
    return {
      authorizer,
      rateLimiter,
      basicAuth,
      apiKeyOwner,
      basicAuthGroups,
      keyAuthGroups,
      breakers,
      responseCache,
      oidc: deps.oidc,
      trustedProxies: deps.trustedProxies ?? NO_TRUSTED_PROXIES,
    };
  }

  /** The routes' plain upstreams (RouteUpstreams), for as long as each route object lives. */
  const plainUpstreams = new WeakMap<CompiledRoute, RouteUpstream>();

  /** The forwarding state of a route with plugins or a health check, built with its snapshot. */
  function upstreamOf(route: CompiledRoute, pipelineDeps: Omit<StageDeps, 'route'>, health: HealthGeneration | null): RouteUpstream {
    const forwarding = forwardingOf(route);
    const { dialTimeoutMs, insecureSkipVerify, http2 } = forwarding;
    const check = route.proxy.upstreams.health_check;
    // A Service target left in a snapshot stands for "no ready endpoints": nothing to probe.
    const checks =
      check && health && !route.targets.some((t) => t.plan.service)
        ? route.targets.map((t) => health.get(route.id, t, check, { dialTimeoutMs, insecureSkipVerify, http2 }))
        : null;
    const balancer = createBalancer(route.proxy.upstreams.balancing, route.targets, checks);
    return routeUpstream(forwarding, balancer, buildPipeline(route, pipelineDeps, checks && check!.passive ? passiveStage(route.targets, checks) : undefined));
  }

  /** The upstreams of `routes` that are built with the snapshot. */
  function builtUpstreams(routes: Iterable<CompiledRoute>, pipelineDeps: Omit<StageDeps, 'route'>, health: HealthGeneration | null): RouteUpstreams {
    const built = new Map<string, RouteUpstream>();
    for (const route of routes) if (!isPlain(route)) built.set(route.id, upstreamOf(route, pipelineDeps, health));
    return new RouteUpstreams(LayeredMap.of(built), plainUpstreams);
  }

  /** The openid_connect configs of `routes`: the issuers the process's provider client keeps (OidcProviders.retain). */
  const oidcConfigsOf = (routes: readonly CompiledRoute[]): CompiledOpenidConnect[] =>
    routes.flatMap((route) => route.plugins.flatMap((p) => (p.name === 'openid_connect' ? [p.config] : [])));

  const sessionCookiesOf = (routes: readonly CompiledRoute[]): ReadonlySet<string> | null => {
    const names = oidcConfigsOf(routes).flatMap((c) => [c.cookieName, c.flowCookieName]);
    return names.length === 0 ? null : new Set(names);
  };

  /**
   * What a build made. `oidc`: the openid_connect configs to retain once it is applied, null when none can have gone
   * (a delta that removed no openid_connect route: new issuers are fetched when first asked).
   */
  type Built = { next: AppliedSnapshot; held: Held; oidc: readonly CompiledOpenidConnect[] | null };

  /** Builds everything `content` needs from nothing (a full snapshot). */
  function build(content: SnapshotContent, breakers: BreakerGeneration, health: HealthGeneration | null, prepared?: Prepared): Built {
    // The CP sends only accepted definitions: anything rejected here means the whole snapshot is bad.
    const index = prepared?.index ?? indexConfig(content.defs);
    const { routes, oauthServers, ...credentialMaps } = prepared?.routed ?? indexRoutes(index);
    const authorizer = createAuthorizer({
      servers: oauthServers,
      tokenStore: deps.tokenStore,
      introspector: deps.introspector,
      jwks: deps.jwks,
      now: deps.now,
      logger: deps.logger,
    });
    const credentials = heldCredentials(credentialMaps, content.keyAuthHashKey);
    const pipelineDeps = pipelineDepsOf(authorizer, credentials, breakers);
    breakers.releaseAll();
    health?.releaseAll();
    return {
      next: {
        version: content.version,
        hash: content.hash,
        table: prepared?.table ?? buildRoutingTable(routes),
        authorizer,
        upstreams: builtUpstreams(routes, pipelineDeps, health),
        sessionCookies: sessionCookiesOf(routes),
      },
      held: { content, index, oauthServers, credentials },
      oidc: deps.oidc ? oidcConfigsOf(routes) : null,
    };
  }

  /**
   * Builds what a delta's `content` needs on top of `previous` (what `applied` was built from): only
   * the `changes` are compiled and checked, and only their routes get new upstreams and table buckets.
   * `prepared`: a large delta's index (the changes made in turns) and its whole routing table, built in turns.
   */
  function buildDelta(
    content: SnapshotContent,
    breakers: BreakerGeneration,
    health: HealthGeneration | null,
    previous: Held,
    current: AppliedSnapshot,
    changes: ContentChange[],
    prepared?: Prepared,
  ): Built {
    const index = prepared?.index ?? applyChanges(previous.index, changes);
    const { removed, added } = prepared?.moved ?? allTurns(changedRoutesInTurns(previous.index, index, changes));
    /**
     * `held` with the changes of `kind` made: each changed definition's entry (keyed by `keyOf`) taken
     * out as it was, then put in as it is, in two passes, so that changes may swap keys among themselves.
     */
    const patched = <V>(
      held: ReadonlyMap<string, V>,
      kind: ContentChange['kind'],
      entryValue: (e: IndexEntry | undefined) => V | undefined,
      keyOf: (name: string, value: V) => string,
      valueOf: (name: string, value: V) => V,
    ) => {
      const mine = changes.filter((c) => c.kind === kind);
      if (mine.length === 0) return held;
      const map = new Map(held);
      for (const { name } of mine) {
        const before = entryValue(previous.index.entries.get(`${kind}:${name}`));
        if (before !== undefined) map.delete(keyOf(name, before));
      }
      for (const { name } of mine) {
        const after = entryValue(index.entries.get(`${kind}:${name}`));
        if (after !== undefined) map.set(keyOf(name, after), valueOf(name, after));
      }
      return map;
    };
    const oauthServers = patched(
      previous.oauthServers,
      'oauth-server',
      (e) => e?.server,
      (name) => name,
      (_name, server) => server,
    );
    const basicAuthUsers = patched(
      previous.credentials.basicAuthUsers,
      'basic-auth-credential',
      (e) => e?.passwordHash,
      (name) => name,
      (_name, hash) => hash,
    );
    const apiKeys = patched(
      previous.credentials.apiKeys,
      'key-auth-credential',
      (e) => e?.keyHash,
      (_name, keyHash) => keyHash,
      (name) => name,
    );
    const groupsOf = (kind: ContentChange['kind'], held: ReadonlyMap<string, readonly string[]>) =>
      patched(
        held,
        kind,
        (e) => e?.groups,
        (name) => name,
        (_name, groups) => groups,
      );
    const basicAuthGroups = groupsOf('basic-auth-credential', previous.credentials.basicAuthGroups);
    const keyAuthGroups = groupsOf('key-auth-credential', previous.credentials.keyAuthGroups);
    // Unchanged servers and credentials keep the authorizer and its caches, and every route its upstream.
    const authReused = oauthServers === previous.oauthServers;
    const credentialsReused =
      basicAuthUsers === previous.credentials.basicAuthUsers &&
      apiKeys === previous.credentials.apiKeys &&
      content.keyAuthHashKey === previous.credentials.keyAuthHashKey &&
      basicAuthGroups === previous.credentials.basicAuthGroups &&
      keyAuthGroups === previous.credentials.keyAuthGroups;
    const authorizer = authReused
      ? current.authorizer
      : createAuthorizer({
          servers: oauthServers,
          tokenStore: deps.tokenStore,
          introspector: deps.introspector,
          jwks: deps.jwks,
          now: deps.now,
          logger: deps.logger,
        });
    const credentials = credentialsReused
      ? previous.credentials
      : heldCredentials({ basicAuthUsers, apiKeys, basicAuthGroups, keyAuthGroups }, content.keyAuthHashKey);
    const pipelineDeps = pipelineDepsOf(authorizer, credentials, breakers);
    // Only a route with plugins or a health check holds breakers or health state (a plain route gets none).
    for (const route of removed) {
      if (isPlain(route)) continue;
      breakers.release(route.id);
      health?.release(route.id);
    }
    let upstreams: RouteUpstreams;
    if (authReused && credentialsReused) {
      // Only the changed routes' entries are new; the rest are shared with the held map, not copied (a copy grows with the APIs).
      const updates = new Map<string, RouteUpstream | undefined>();
      for (const route of removed) if (!isPlain(route)) updates.set(route.id, undefined);
      for (const route of added) if (!isPlain(route)) updates.set(route.id, upstreamOf(route, pipelineDeps, health));
      upstreams = updates.size === 0 ? current.upstreams : new RouteUpstreams(current.upstreams.built.with(updates), plainUpstreams);
    } else {
      // Every pipeline holds the authorizer or the credentials: all are built again (plain routes have none).
      upstreams = builtUpstreams((prepared?.routed ?? indexRoutes(index)).routes, pipelineDeps, health);
    }
    // Every route's cookie names again only when an openid_connect route came or went.
    const oidcMoved = oidcConfigsOf(removed).length > 0 || oidcConfigsOf(added).length > 0;
    const sessionCookies = oidcMoved ? sessionCookiesOf((prepared?.routed ?? indexRoutes(index)).routes) : current.sessionCookies;
    return {
      next: {
        version: content.version,
        hash: content.hash,
        table: prepared?.table ?? updateRoutingTable(current.table, removed, added),
        authorizer,
        upstreams,
        sessionCookies,
      },
      held: { content, index, oauthServers, credentials },
      oidc: deps.oidc && oidcConfigsOf(removed).length > 0 ? oidcConfigsOf((prepared?.routed ?? indexRoutes(index)).routes) : null,
    };
  }

  function swap(version: number, content: () => SnapshotContent & { changes?: ContentChange[] }, previous: Held | null, prepared?: Prepared): ApplyResult {
    let built: Built;
    const breakers = breakerRegistry.begin();
    const health = deps.health?.begin() ?? null;
    try {
      const { changes, ...next } = content();
      built =
        previous && applied && changes ? buildDelta(next, breakers, health, previous, applied, changes, prepared) : build(next, breakers, health, prepared);
    } catch (err) {
      applies?.inc({ result: 'rejected' });
      return { ok: false, version, error: err instanceof Error ? err.message : String(err) };
    }
    applied = built.next;
    held = built.held;
    breakers.commit();
    health?.commit();
    if (built.oidc) deps.oidc?.retain(built.oidc);
    applies?.inc({ result: 'applied' });
    return { ok: true, version: built.next.version, hash: built.next.hash, changed: true };
  }

  /** After a full snapshot's swap: what deltas on it need is prepared once it is served, not on the path of the first. */
  function served(result: ApplyResult, endHold: () => void): ApplyResult {
    if (!result.ok) {
      endHold();
      return result;
    }
    const { defs } = held!.content;
    setImmediate(() => {
      prepareForDeltas(defs);
      endHold();
      deps.endStartUpHold?.();
    });
    return result;
  }

  /** The CP's answer to a Hello naming the content it serves (after its restart, say): the held content under its version. */
  function sameContent(delta: DeltaMessage): boolean {
    return applied !== null && delta?.hash === applied.hash && delta.base_hash === applied.hash && Number(delta.base_version) === applied.version;
  }

  /**
   * The content `steps` give (a full snapshot's, or a large delta's on the held content), then its index and routing
   * table, all in turns (requests served between them), then the swap; null when `wanted()` turned false meanwhile.
   * A large delta's index is `previous`'s with the changes made (applyChangesInTurns), so its unchanged definitions keep
   * their compiled routes and, when still held at the swap, what was built for them (buildDelta: upstreams with their
   * balancer positions, the authorizer with its verification caches, when no server changed).
   */
  async function wholeInTurns(
    version: number,
    steps: Generator<void, SnapshotContent & { changes?: ContentChange[] }>,
    wanted: () => boolean,
    previous: Held | null = null,
  ): Promise<ApplyResult | null> {
    const endHold = deps.holdYoungGeneration?.() ?? noop;
    let content: (SnapshotContent & { changes?: ContentChange[] }) | null;
    let prepared: Prepared | null;
    try {
      content = await inTurns(steps, wanted);
      prepared = content && (await prepareInTurns(content, previous, wanted));
    } catch (err) {
      endHold();
      applies?.inc({ result: 'rejected' });
      return { ok: false, version, error: err instanceof Error ? err.message : String(err) };
    }
    if (!content || !prepared) {
      endHold();
      return null;
    }
    const whole = content;
    // Built on `previous` only while it is what is applied; otherwise as a full snapshot is (the index is whole either way).
    return served(
      swap(version, () => whole, previous !== null && held === previous ? previous : null, prepared),
      endHold,
    );
  }

  /** wholeInTurns' index, changed routes (a delta's on `previous`), route list and routing table; null when no longer wanted. */
  async function prepareInTurns(
    content: SnapshotContent & { changes?: ContentChange[] },
    previous: Held | null,
    wanted: () => boolean,
  ): Promise<Prepared | null> {
    const delta = previous && content.changes ? { previous, changes: content.changes } : null;
    const index = await inTurns(
      delta ? applyChangesInTurns(delta.previous.index, delta.changes, undefined, APPLY_TURN) : indexConfigInTurns(content.defs, APPLY_TURN),
      wanted,
    );
    if (!index) return null;
    const moved = delta ? await inTurns(changedRoutesInTurns(delta.previous.index, index, delta.changes, APPLY_TURN), wanted) : undefined;
    if (moved === null) return null;
    const routed = await inTurns(indexRoutesInTurns(index, APPLY_TURN), wanted);
    const table = routed && (await inTurns(buildRoutingTableInTurns(routed.routes, APPLY_TURN), wanted));
    return routed && table ? { index, routed, table, moved } : null;
  }

  /** Same content: nothing to rebuild. The CP's version is authoritative, so adopt it. */
  function unchanged(version: number): ApplyResult {
    if (version !== applied!.version) applied = { ...applied!, version };
    applies?.inc({ result: 'unchanged' });
    return { ok: true, version, hash: applied!.hash, changed: false };
  }

  /** What a delta builds on: the held content under the applied version (the CP's, adopted by `unchanged`). */
  const heldContent = (): SnapshotContent | null => (held && applied ? { ...held.content, version: applied.version } : null);

  /** Whether a full snapshot names the content already applied. */
  const holdsHash = (message: SnapshotMessage): boolean => applied !== null && !!message?.hash && message.hash === applied.hash;

  return {
    current: () => applied,
    content: heldContent,
    apply(message) {
      const version = Number(message?.version ?? 0);
      if (holdsHash(message)) return unchanged(version);
      const endHold = deps.holdYoungGeneration?.() ?? noop;
      return served(
        swap(version, () => fromSnapshotMessage(message), null),
        endHold,
      );
    },
    async applyInTurns(message, wanted = () => true) {
      const version = Number(message?.version ?? 0);
      if (holdsHash(message)) return unchanged(version);
      return wholeInTurns(version, fromSnapshotMessageInTurns(message, APPLY_TURN), wanted);
    },
    async applyDeltaInTurns(delta, wanted = () => true) {
      const version = Number(delta?.version ?? 0);
      if (sameContent(delta)) return unchanged(version);
      const base = heldContent();
      if (!base) return { ok: false, version, error: 'delta without a held snapshot' };
      return wholeInTurns(version, applyDeltaMessageInTurns(base, delta, APPLY_TURN), wanted, held);
    },
    applyDelta(delta) {
      const version = Number(delta?.version ?? 0);
      if (sameContent(delta)) return unchanged(version);
      const base = heldContent();
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
