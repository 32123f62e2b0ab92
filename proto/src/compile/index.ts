/**
 * Compile definitions into the routing data both services use: the CP compiles every write
 * exactly as a DP will (so nothing a DP would reject is accepted), the DP builds its router
 * from the result. Pure: no I/O, no clock, no module state.
 */
import type { KeyObject } from 'node:crypto';
import { OAUTH_ENDPOINTS } from '../definition/types.js';
import { HTTP_TOKEN } from '../definition/proxy-schema.js';
import { fieldError } from '../definition/field-path.js';
import type {
  ApiDefinition,
  Definitions,
  JwtAlg,
  OAuthEndpointName,
  OAuthServerDefinition,
  ProxyDefinition,
} from '../definition/types.js';
import { compileHostPattern } from './host-match.js';
import { compileJwtKeys } from './jwt-keys.js';
import { compileListenPath } from './listen-path.js';
import { compileTarget } from './target.js';
import type { TargetPlan } from './target.js';

export { compileListenPath } from './listen-path.js';
export { compileHostPattern, hostMatcher, normalizeHost } from './host-match.js';
export type { HostMatcher } from './host-match.js';
export { compileTarget, resolveTarget } from './target.js';
export type { ResolvedTarget, TargetPlan } from './target.js';
export { normalizePath, normalizePercentEncoding } from './normalize-path.js';

export interface ListenPathMatch {
  /** Captured `{name}` values. */
  params: Record<string, string>;
  /** L of SPEC §4: the part of the request path matched by listen_path before `/*`. */
  matched: string;
}

export interface CompiledListenPath {
  source: string;
  /** Literal characters before the first `{param}` or `/*`: the router's trie key and priority. */
  literalPrefix: string;
  /** True when listen_path ends in `/*`. */
  wildcard: boolean;
  paramNames: string[];
  /**
   * One item per `/`-section after the leading `/` (the final `/*` excluded): the literal the
   * request's segment at that position must equal, or null where the section holds a parameter.
   * `/api/{id}/res/*` → `['api', null, 'res']`. The router indexes on it.
   */
  readonly segments: readonly (string | null)[];
  match(path: string): ListenPathMatch | null;
}

export interface CompiledTarget {
  /** The target URL template as defined, e.g. `http://{service}:9000/x`. */
  template: string;
  weight: number;
  /** The template parsed and validated once; `rewrite` resolves it per request. */
  plan: TargetPlan;
}

export interface CompiledRoute {
  /** Unique in a snapshot: `api:<name>` or `oauth:<server>:<endpoint>`. */
  id: string;
  kind: 'api' | 'oauth-endpoint';
  /** API name, or OAuth server name for endpoint routes. */
  name: string;
  endpoint?: OAuthEndpointName;
  /** Lower-cased host patterns, each once; empty = any host. */
  hosts: string[];
  /** Upper-cased methods; null = any method (ALL). */
  methods: ReadonlySet<string> | null;
  /** null when the API routes on hosts/methods only (matches every path). */
  listenPath: CompiledListenPath | null;
  proxy: ProxyDefinition;
  targets: CompiledTarget[];
  /** Number of configured conditions among hosts and methods: the priority tie-break after prefix length. */
  conditionCount: number;
  /** Present when an enabled oauth2 plugin protects the route. */
  oauth2?: { serverName: string };
}

export interface CompiledJwtKey {
  alg: JwtAlg;
  key: KeyObject;
}

export interface CompiledOAuthServer {
  definition: OAuthServerDefinition;
  routes: CompiledRoute[];
  /** jwt strategy only: keys imported once (node:crypto KeyObject), checked against their alg. */
  jwtKeys: CompiledJwtKey[];
}

export interface CompiledConfig {
  /** Active API routes and OAuth endpoint routes. */
  routes: CompiledRoute[];
  /** Routes of inactive APIs: never matched, but the admin API checks them for listen-path conflicts. */
  inactiveRoutes: CompiledRoute[];
  oauthServers: ReadonlyMap<string, CompiledOAuthServer>;
}

function invalid(field: string, message: string): never {
  throw fieldError(field, message);
}

interface CompiledProxy {
  listenPath: CompiledListenPath | null;
  methods: ReadonlySet<string> | null;
  targets: CompiledTarget[];
}

/** `prefix` is how the admin API names the proxy object: `proxy` or `oauth_endpoints.token`. */
function compileProxy(proxy: ProxyDefinition, prefix: string): CompiledProxy {
  const lpField = `${prefix}.listen_path`;
  const listenPath = proxy.listen_path === undefined ? null : compileListenPath(proxy.listen_path, lpField);
  const listed = new Set<string>();
  (proxy.methods ?? []).forEach((m, i) => {
    const upper = typeof m === 'string' ? m.toUpperCase() : '';
    if (!HTTP_TOKEN.test(upper)) invalid(`${prefix}.methods[${i}]`, 'is not an HTTP method');
    listed.add(upper);
  });
  const methods = listed.size === 0 || listed.has('ALL') ? null : listed;
  const targets = proxy.upstreams?.targets ?? [];
  if (targets.length === 0) {
    invalid(`${prefix}.upstreams.targets`, 'must contain at least one target');
  }
  const paramNames = listenPath?.paramNames ?? [];
  const compiledTargets = targets.map((t, i): CompiledTarget => {
    const weight = t.weight ?? 1;
    const field = `${prefix}.upstreams.targets[${i}]`;
    if (!Number.isInteger(weight) || weight < 0) invalid(`${field}.weight`, 'must be a non-negative integer');
    return { template: t.target, weight, plan: compileTarget(t.target, paramNames, `${field}.target`, lpField) };
  });
  return { listenPath, methods, targets: compiledTargets };
}

/**
 * Compile one API definition (active or not) into its route. Throws GatehouseError VALIDATION_FAILED
 * naming the field as the admin API shows it. Cross-references (oauth2 → server) are checked by
 * compileDefinitions, which sees the whole configuration.
 */
export function compileApi(api: ApiDefinition): CompiledRoute {
  const hosts = [...new Set((api.hosts ?? []).map((h, i) => compileHostPattern(h, `hosts[${i}]`)))];
  const { listenPath, methods, targets } = compileProxy(api.proxy, 'proxy');
  if (!listenPath && hosts.length === 0 && !methods) {
    invalid('proxy.listen_path', 'is required (or at least one of hosts, proxy.methods)');
  }
  const oauth2 = api.plugins?.find((p) => p.name === 'oauth2' && p.enabled);
  return {
    id: `api:${api.name}`,
    kind: 'api',
    name: api.name,
    hosts,
    methods,
    listenPath,
    proxy: api.proxy,
    targets,
    conditionCount: (hosts.length > 0 ? 1 : 0) + (methods ? 1 : 0),
    ...(oauth2 ? { oauth2: { serverName: oauth2.config.server_name } } : {}),
  };
}

/** Compile an OAuth server: one route per endpoint present (never oauth2-protected), jwt keys imported. */
export function compileOAuthServer(server: OAuthServerDefinition): CompiledOAuthServer {
  const routes = OAUTH_ENDPOINTS.flatMap((endpoint): CompiledRoute[] => {
    const proxy = server.oauth_endpoints?.[endpoint];
    if (!proxy) return [];
    const prefix = `oauth_endpoints.${endpoint}`;
    if (proxy.listen_path === undefined) invalid(`${prefix}.listen_path`, 'is required');
    const { listenPath, methods, targets } = compileProxy(proxy, prefix);
    return [
      {
        id: `oauth:${server.name}:${endpoint}`,
        kind: 'oauth-endpoint',
        name: server.name,
        endpoint,
        hosts: [],
        methods,
        listenPath,
        proxy,
        targets,
        conditionCount: methods ? 1 : 0,
      },
    ];
  });
  const strategy = server.token_strategy;
  const jwtKeys = strategy.name === 'jwt' ? compileJwtKeys(strategy.settings, 'token_strategy.settings') : [];
  return { definition: server, routes, jwtKeys };
}

/**
 * Whole-configuration compile: every definition plus cross-references (oauth2 → existing server).
 * Inactive APIs are compiled too (validation is complete); their routes go to inactiveRoutes, never routes.
 */
export function compileDefinitions(defs: Definitions): CompiledConfig {
  const oauthServers = new Map<string, CompiledOAuthServer>();
  for (const server of defs.oauthServers) {
    if (oauthServers.has(server.name)) invalid('name', `: oauth server "${server.name}" is defined more than once`);
    oauthServers.set(server.name, compileOAuthServer(server));
  }
  const routes: CompiledRoute[] = [];
  const inactiveRoutes: CompiledRoute[] = [];
  const apiNames = new Set<string>();
  for (const api of defs.apis) {
    if (apiNames.has(api.name)) invalid('name', `: api "${api.name}" is defined more than once`);
    apiNames.add(api.name);
    const route = compileApi(api);
    checkPluginReferences(api, oauthServers);
    (api.active ? routes : inactiveRoutes).push(route);
  }
  for (const server of oauthServers.values()) routes.push(...server.routes);
  return { routes, inactiveRoutes, oauthServers };
}

/** Every oauth2 plugin, enabled or not, must name an existing OAuth server. */
export function checkPluginReferences(api: ApiDefinition, servers: { has(name: string): boolean }): void {
  (api.plugins ?? []).forEach((p, i) => {
    if (p.name !== 'oauth2') return;
    const field = `plugins[${i}].config.server_name`;
    const serverName = p.config?.server_name;
    if (!servers.has(serverName)) invalid(field, `: oauth server "${serverName}" not found`);
  });
}

/**
 * Two routes with the same key cannot be told apart by a request (same listen_path, hosts and
 * methods, as order-insensitive sets): the admin API answers 409 `api listen path is already registered`.
 */
export function routeConflictKey(route: CompiledRoute): string {
  return JSON.stringify([
    route.listenPath?.source ?? null,
    [...route.hosts].sort(),
    route.methods ? [...route.methods].sort() : ['ALL'],
  ]);
}
