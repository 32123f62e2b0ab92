/**
 * Turns applied snapshot content into one immutable serving table (serving-table.ts): the routing table, each
 * route's balancer and plugin pipeline (with its breakers, rate limits, health stage and response cache) and the
 * authorizer. The snapshot holder (sync/) decodes and checks what arrives and swaps the built table in.
 *
 * A delta's table is built on the held one: the unchanged definitions keep their objects, their compiled routes stay
 * in the held index (compile/incremental.ts: only the delta's definitions are compiled and checked) and their
 * RouteUpstream (balancer position, pipeline) is reused; the routing table is updated in the buckets of the changed
 * routes only (updateRoutingTable). State that outlives snapshots (cb's breakers, health checks) is kept by
 * route-state registries: a delta releases its removed routes' and gets its added routes' only.
 */
import type { CompiledOAuthServer, CompiledRoute } from '#proto/compile/index';
import { applyChanges, indexConfig, indexRoutes, type ConfigIndex } from '#proto/compile/incremental';
import type { CompiledOpenidConnect } from '#proto/plugins/index';
import { LayeredMap } from '#proto/layered-map';
import { allTurns } from '#proto/turns';
import type { ContentChange, SnapshotContent } from '#proto/snapshot/codec';
import type { Registry } from 'prom-client';
import { createAuthorizer, type AuthLogger, type Authorizer, type Introspector, type JwksCache } from '../auth/index.js';
import { createBasicAuthChecker, type BasicAuthChecker } from '../auth/basic-credentials.js';
import type { TokenStore } from '../auth/token-store.js';
import type { OidcProviders } from '../auth/oidc-provider.js';
import { buildRoutingTable, createBalancer, updateRoutingTable } from '../routing/index.js';
import { NO_TRUSTED_PROXIES, type TrustedProxies } from '../plugins/client-ip.js';
import { buildPipeline, createResponseCache, type ResponseCache, type StageDeps } from '../plugins/index.js';
import { createBreakerRegistry, type BreakerGeneration } from '../plugins/circuit-breaker.js';
import { createRateLimiter, type RateLimiter } from '../plugins/rate-limit/index.js';
import { passiveStage, type HealthGeneration, type HealthRegistry } from '../health/index.js';
import { buildGatewayTls } from './gateway-tls.js';
import { heldCredentials, patchedMaps, sameCredentials, type HeldCredentials } from './credentials.js';
import { changedRoutesInTurns, type Prepared } from './prepare.js';
import { forwardingOf, isPlain, routeUpstream, RouteUpstreams, type RouteUpstream, type ServingTable } from './serving-table.js';

export interface TableDeps {
  tokenStore: TokenStore;
  /** The introspection strategy's calls and cache (main.ts passes the process's one, built on its upstream pools). */
  introspector?: Introspector;
  /** JWKS sets of jwt servers with a jwks_uri (main.ts passes the process's one, built on its upstream pools). */
  jwks?: JwksCache;
  /** Seconds since epoch, passed to every authorizer (tests freeze it). */
  now?: () => number;
  logger?: AuthLogger;
  /** Where cb's breakers report their state. */
  registry?: Registry;
  /** rate_limit counters (main.ts passes the process's one); an in-process one of this builder's own when absent. */
  rateLimiter?: RateLimiter;
  /** basic_auth verdict caches, kept across snapshots; this builder's own when absent. */
  basicAuthChecker?: BasicAuthChecker;
  /** Upstream health checks (main.ts passes the process's one, probing through its pools); without it, health_check is not acted on. */
  health?: HealthRegistry;
  /** proxy_cache's store (main.ts passes the process's one, PROXY_CACHE_SIZE); a 64 MiB one of this builder's own when absent. */
  responseCache?: ResponseCache;
  /** openid_connect's provider client (main.ts passes the process's one, on its upstream pools). */
  oidc?: OidcProviders;
  /** TRUSTED_PROXIES (plugins/client-ip.ts); none when absent. */
  trustedProxies?: TrustedProxies;
}

/** What a later delta's table builds on: the content and what was built from it. */
export interface TableBasis {
  readonly content: SnapshotContent;
  /** Route keys and references of the content: a delta is checked by what it changes (compile/incremental.ts). */
  readonly index: ConfigIndex;
  readonly oauthServers: ReadonlyMap<string, CompiledOAuthServer>;
  readonly credentials: HeldCredentials;
}

/** A delta's place: the table and basis it applies to, and its changes. */
export interface DeltaBase {
  basis: TableBasis;
  table: ServingTable;
  changes: ContentChange[];
}

export interface BuiltTable {
  readonly table: ServingTable;
  readonly basis: TableBasis;
  /**
   * Once the table is swapped in: keeps the breakers and health checks its routes use and drops the rest, and lets
   * the OpenID provider client forget the issuers no route names any more. Never called for a table not swapped in.
   */
  commit(): void;
}

export interface TableBuilder {
  /**
   * The serving table of `content`: from nothing (`base` null, a full snapshot) or on `base` (a delta: only its
   * changes are compiled and checked, and only their routes get new upstreams and routing buckets). `prepared`: its
   * index, changed routes and routing table, made in turns beforehand (prepare.ts). Throws when the content is bad.
   */
  build(content: SnapshotContent, base: DeltaBase | null, prepared?: Prepared): BuiltTable;
}

/** What one build works with: the generations of the state that outlives snapshots it opened. */
interface Generations {
  breakers: BreakerGeneration;
  health: HealthGeneration | null;
}

/** The openid_connect configs of `routes`: the issuers the process's provider client keeps (OidcProviders.retain). */
const oidcConfigsOf = (routes: readonly CompiledRoute[]): CompiledOpenidConnect[] =>
  routes.flatMap((route) => route.plugins.flatMap((p) => (p.name === 'openid_connect' ? [p.config] : [])));

const sessionCookiesOf = (routes: readonly CompiledRoute[]): ReadonlySet<string> | null => {
  const names = oidcConfigsOf(routes).flatMap((c) => [c.cookieName, c.flowCookieName]);
  return names.length === 0 ? null : new Set(names);
};

export function createTableBuilder(deps: TableDeps): TableBuilder {
  const rateLimiter = deps.rateLimiter ?? createRateLimiter({ logger: deps.logger });
  const basicAuthChecker = deps.basicAuthChecker ?? createBasicAuthChecker();
  const responseCache = deps.responseCache ?? createResponseCache({ maxBytes: 64 * 1024 ** 2 });
  const breakerRegistry = createBreakerRegistry({ registry: deps.registry });
  /** The routes' plain upstreams (RouteUpstreams), for as long as each route object lives. */
  const plainUpstreams = new WeakMap<CompiledRoute, RouteUpstream>();

  const authorizerOf = (servers: ReadonlyMap<string, CompiledOAuthServer>): Authorizer =>
    createAuthorizer({ servers, tokenStore: deps.tokenStore, introspector: deps.introspector, jwks: deps.jwks, now: deps.now, logger: deps.logger });

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

  /** The forwarding state of a route with plugins or a health check, built with its table. */
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

  /** The upstreams of `routes` that are built with the table. */
  function builtUpstreams(routes: Iterable<CompiledRoute>, pipelineDeps: Omit<StageDeps, 'route'>, health: HealthGeneration | null): RouteUpstreams {
    const built = new Map<string, RouteUpstream>();
    for (const route of routes) if (!isPlain(route)) built.set(route.id, upstreamOf(route, pipelineDeps, health));
    return new RouteUpstreams(LayeredMap.of(built), plainUpstreams);
  }

  /** A build's result; `oidc`: the openid_connect configs to retain once swapped in, null when none can have gone. */
  function built(table: ServingTable, basis: TableBasis, { breakers, health }: Generations, oidc: readonly CompiledOpenidConnect[] | null): BuiltTable {
    return {
      table,
      basis,
      commit() {
        breakers.commit();
        health?.commit();
        if (oidc) deps.oidc?.retain(oidc);
      },
    };
  }

  /** Builds everything `content` needs from nothing (a full snapshot). */
  function full(content: SnapshotContent, generations: Generations, prepared?: Prepared): BuiltTable {
    // The CP sends only accepted definitions: anything rejected here means the whole snapshot is bad.
    const index = prepared?.index ?? indexConfig(content.defs);
    const { routes, oauthServers, ...credentialMaps } = prepared?.routed ?? indexRoutes(index);
    const authorizer = authorizerOf(oauthServers);
    const credentials = heldCredentials(credentialMaps, content.keyAuthHashKey, basicAuthChecker);
    const pipelineDeps = pipelineDepsOf(authorizer, credentials, generations.breakers);
    generations.breakers.releaseAll();
    generations.health?.releaseAll();
    const table: ServingTable = {
      version: content.version,
      hash: content.hash,
      routing: prepared?.routing ?? buildRoutingTable(routes),
      authorizer,
      upstreams: builtUpstreams(routes, pipelineDeps, generations.health),
      sessionCookies: sessionCookiesOf(routes),
      gatewayTls: buildGatewayTls(content.gatewayTls),
    };
    return built(table, { content, index, oauthServers, credentials }, generations, deps.oidc ? oidcConfigsOf(routes) : null);
  }

  /** Builds what a delta's `content` needs on top of `base` (its whole routing table too when `prepared` has it). */
  function delta(content: SnapshotContent, { basis: previous, table: current, changes }: DeltaBase, generations: Generations, prepared?: Prepared): BuiltTable {
    const { breakers, health } = generations;
    const index = prepared?.index ?? applyChanges(previous.index, changes);
    const { removed, added } = prepared?.moved ?? allTurns(changedRoutesInTurns(previous.index, index, changes));
    const { oauthServers, ...maps } = patchedMaps(previous, previous.index, index, changes);
    /** Every route of the new index, listed once at most. */
    let allRoutes: CompiledRoute[] | undefined;
    const routesNow = () => (allRoutes ??= (prepared?.routed ?? indexRoutes(index)).routes);
    // Unchanged servers and credentials keep the authorizer and its caches, and every route its upstream.
    const authReused = oauthServers === previous.oauthServers;
    const credentialsReused = sameCredentials(previous.credentials, maps, content.keyAuthHashKey);
    const authorizer = authReused ? current.authorizer : authorizerOf(oauthServers);
    const credentials = credentialsReused ? previous.credentials : heldCredentials(maps, content.keyAuthHashKey, basicAuthChecker);
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
      upstreams = builtUpstreams(routesNow(), pipelineDeps, health);
    }
    // Every route's cookie names again only when an openid_connect route came or went.
    const oidcMoved = oidcConfigsOf(removed).length > 0 || oidcConfigsOf(added).length > 0;
    const table: ServingTable = {
      version: content.version,
      hash: content.hash,
      routing: prepared?.routing ?? updateRoutingTable(current.routing, removed, added),
      authorizer,
      upstreams,
      sessionCookies: oidcMoved ? sessionCookiesOf(routesNow()) : current.sessionCookies,
      gatewayTls: content.gatewayTls === previous.content.gatewayTls ? current.gatewayTls : buildGatewayTls(content.gatewayTls),
    };
    const oidc = deps.oidc && oidcConfigsOf(removed).length > 0 ? oidcConfigsOf(routesNow()) : null;
    return built(table, { content, index, oauthServers, credentials }, generations, oidc);
  }

  return {
    build(content, base, prepared) {
      const generations: Generations = { breakers: breakerRegistry.begin(), health: deps.health?.begin() ?? null };
      return base ? delta(content, base, generations, prepared) : full(content, generations, prepared);
    },
  };
}
