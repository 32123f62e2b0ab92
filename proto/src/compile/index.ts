/**
 * Compile definitions into the routing data both services use: the CP compiles every write
 * exactly as a DP will (so nothing a DP would reject is accepted), the DP builds its router
 * from the result. Pure: no I/O, no clock; the only module state are memos of frozen results
 * (target plans by template, target.ts), which give what compiling again would.
 */
import type { KeyObject } from 'node:crypto';
import { OAUTH_ENDPOINTS } from '../definition/types.js';
import { EMPTY_LIST, HTTP_TOKEN } from '../definition/proxy-schema.js';
import { GatehouseError, type ErrorCode } from '../errors.js';
import { fieldError } from '../definition/field-path.js';
import type {
  ApiDefinition,
  BasicAuthCredential,
  Definitions,
  JwtAlg,
  KeyAuthCredential,
  OAuth2PluginDefinition,
  OAuthEndpointName,
  OAuthServerDefinition,
  ProxyDefinition,
  TokenStrategy,
} from '../definition/types.js';
import { compileHostPattern, exactHosts } from './host-match.js';
import { compileIntrospection, type CompiledIntrospection } from './introspection.js';
import { compileJwtKeys, shortHmacKeyFields } from './jwt-keys.js';
import { compileJwks, type CompiledJwks } from './jwks.js';
import { compileListenPath } from './listen-path.js';
import { compileTarget, compileTargetHostPattern, fixedAuthority, hostHasPlaceholder } from './target.js';
import type { TargetPlan } from './target.js';
import { compilePlugins, type CompiledPlugin } from '../plugins/index.js';
import { parsePasswordHash, type PasswordHash } from '../password-hash.js';

export { compileListenPath } from './listen-path.js';
export type { CompiledIntrospection } from './introspection.js';
export type { CompiledJwks } from './jwks.js';
export { compileHostPattern, exactHosts, hostMatcher, normalizeHost } from './host-match.js';
export { MIN_HMAC_KEY_BYTES } from './jwt-keys.js';
export type { HostMatcher } from './host-match.js';
export { compileTarget, fixedAuthority, isServiceTarget, resolveTarget } from './target.js';
export type { ResolvedTarget, ServiceTarget, TargetPlan } from './target.js';
export { normalizePath, normalizePercentEncoding } from './normalize-path.js';

export interface ListenPathMatch {
  /** Captured `{name}` values. */
  params: Record<string, string>;
  /** L of docs/proxy.md "Proxy behaviour": the part of the request path matched by listen_path before `/*`. */
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
  /** The target's host_pattern, anchored; null without one (a placeholder in the host then fills one DNS label). */
  hostPattern: RegExp | null;
  /** The template parsed and validated once; `rewrite` resolves it per request. */
  plan: TargetPlan;
}

/** One header of proxy.match_headers: the request must carry `name` with one of `values` (routing/header-match.ts). */
export interface HeaderCondition {
  /** Lower case, as node names request headers. */
  name: string;
  values: readonly string[];
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
  /** null when the API routes on hosts/methods/headers only (matches every path). */
  listenPath: CompiledListenPath | null;
  /** proxy.match_headers, by name; [] = no header condition. */
  headers: readonly HeaderCondition[];
  proxy: ProxyDefinition;
  targets: CompiledTarget[];
  /** Configured conditions (hosts, methods, each header): the priority tie-break after prefix length. */
  conditionCount: number;
  /** Present when an enabled oauth2 plugin protects the route. */
  oauth2?: { serverName: string };
  /** Enabled plugins, compiled once, in execution order (proto/src/plugins/index.ts); [] for none. */
  plugins: readonly CompiledPlugin[];
}

export interface CompiledJwtKey {
  alg: JwtAlg;
  key: KeyObject;
  /** A JWKS key's `kid`: a token naming a kid is tried against that key only. */
  kid?: string;
}

export interface CompiledOAuthServer {
  definition: OAuthServerDefinition;
  routes: CompiledRoute[];
  /** jwt strategy only: keys imported once (node:crypto KeyObject), checked against their alg. */
  jwtKeys: CompiledJwtKey[];
  /** introspection strategy only: how to call the introspect endpoint. */
  introspection?: CompiledIntrospection;
  /** jwt strategy with a JWKS source only (jwtKeys then empty): where the data plane fetches its keys. */
  jwks?: CompiledJwks;
}

/** A definition left out of the configuration, with the field-named reason (the admin API's 400/409). */
export interface Rejection {
  kind: DefinitionKindName;
  name: string;
  error: GatehouseError;
}

export type DefinitionKindName = 'api' | 'oauth-server' | 'basic-auth-credential' | 'key-auth-credential';

/** Every definition of `defs` with its kind and name, in the order verdicts are given (servers, APIs, then the credentials). */
export function definitionsOf(defs: Definitions): Array<{ kind: DefinitionKindName; name: string; def: object }> {
  return [
    ...defs.oauthServers.map((def) => ({ kind: 'oauth-server' as const, name: def.name, def })),
    ...defs.apis.map((def) => ({ kind: 'api' as const, name: def.name, def })),
    ...(defs.basicAuthCredentials ?? []).map((def) => ({ kind: 'basic-auth-credential' as const, name: def.username, def })),
    ...(defs.keyAuthCredentials ?? []).map((def) => ({ kind: 'key-auth-credential' as const, name: def.username, def })),
  ];
}

export interface CompiledConfig {
  /** Active API routes and OAuth endpoint routes of the accepted definitions. */
  routes: CompiledRoute[];
  /** Routes of inactive APIs: never matched, but they keep their listen path (conflicts). */
  inactiveRoutes: CompiledRoute[];
  oauthServers: ReadonlyMap<string, CompiledOAuthServer>;
  /** basic_auth users by username, their hashes parsed once. */
  basicAuthUsers: ReadonlyMap<string, PasswordHash>;
  /** key_auth credentials: the username by key_hash (each key_hash is unique: API_KEY_TAKEN). */
  apiKeys: ReadonlyMap<string, string>;
  /** The groups of the basic_auth users and key_auth credentials that have any, by username. */
  basicAuthGroups: ReadonlyMap<string, readonly string[]>;
  keyAuthGroups: ReadonlyMap<string, readonly string[]>;
  /** Definitions left out, each with its reason; empty for a consistent configuration. */
  rejected: Rejection[];
}

export interface CompileOptions {
  /**
   * Which of two definitions keeps a contested name or route: the lower rank wins (ties: list
   * order). The Kubernetes store ranks by creation time (older wins, Gateway API style); the admin
   * API ranks the definition being written last, so the write is what gets refused.
   */
  rank?(kind: DefinitionKindName, name: string): number;
  /** Reuses each definition's own compile result (and route keys) from earlier compiles; see createCompileCache. */
  cache?: CompileCache;
}

/**
 * Each definition's own compile (or its error) and its routes' conflict keys, kept per definition
 * object: definitions are never mutated (every change builds a new object), so an unchanged
 * definition is never compiled again, and an admin write does not recompile the configuration; what remains of
 * a whole pass is names and route keys.
 */
export interface CompileCache {
  readonly built: WeakMap<object, { built: Built } | { error: unknown }>;
  /** False: an API's compiled route is not kept, only its verdict and conflict keys (see createCompileCache). */
  readonly keepsRoutes: boolean;
}

/**
 * `keepRoutes: false` is for a process that checks definitions but routes none (the control plane): an API's
 * compiled route (listen path, target plans: about 1.2 KB) is dropped once its conflict keys are taken, and
 * compiled again whenever `routes` is read.
 */
export function createCompileCache(options: { keepRoutes?: boolean } = {}): CompileCache {
  return { built: new WeakMap(), keepsRoutes: options.keepRoutes ?? true };
}

/** One definition's own compile (no cross-checks), through the cache when given. */
export function compileOne(kind: DefinitionKindName, def: object, cache?: CompileCache): { built: Built } | { error: unknown } {
  let result = cache?.built.get(def);
  if (result) return result;
  try {
    let built: Built;
    if (kind === 'oauth-server') {
      const server = compileOAuthServer(def as OAuthServerDefinition);
      built = withKeys({ routes: server.routes, server });
    } else if (kind === 'api') {
      const api = def as ApiDefinition;
      const routes = [compileApi(api)];
      const keys = conflictKeysOf({ routes });
      built = cache?.keepsRoutes === false ? new RoutesOnDemand(keys, api) : { routes, keys, api };
    } else if (kind === 'key-auth-credential') {
      const { key_hash: keyHash, groups } = def as KeyAuthCredential;
      built = withKeys({ routes: [], keyHash, groups });
    } else {
      const { password_hash, groups } = def as BasicAuthCredential;
      const passwordHash = parsePasswordHash(password_hash);
      if (!passwordHash) invalid('password_hash', 'has scrypt parameters out of bounds');
      built = withKeys({ routes: [], passwordHash, groups });
    }
    result = { built };
  } catch (error) {
    result = { error };
  }
  cache?.built.set(def, result);
  return result;
}

/**
 * The conflict keys of one definition's compile, each once: its routes' (routeConflictKey), and a key_auth
 * credential's key, which no two credentials may hold (a route's key always holds newlines, this one none). Computed
 * again from the same parts when asked (compile/incremental.ts keeps no copy per definition: 67 bytes an API).
 */
export function conflictKeysOf(built: Pick<Built, 'routes' | 'keyHash'>): string[] {
  if (built.keyHash !== undefined) return [`api-key ${built.keyHash}`];
  return built.routes.length === 1 ? [routeConflictKey(built.routes[0])] : [...new Set(built.routes.map(routeConflictKey))];
}

/** An API's compile in a cache that keeps no routes: its route compiled again when read (the getter is the class's, not one per API). */
class RoutesOnDemand implements Built {
  constructor(
    readonly keys: string[],
    readonly api: ApiDefinition,
  ) {}
  get routes(): CompiledRoute[] {
    return [compileApi(this.api)];
  }
}

const withKeys = (built: Omit<Built, 'keys'>): Built => ({ ...built, keys: conflictKeysOf(built) });

function invalid(field: string, message: string): never {
  throw fieldError(field, message);
}

/**
 * One Set per list of methods, shared by every route that lists the same ones in the same order (nothing
 * mutates a route's Set): a data plane keeps a route per API, and a Set of two methods is ~160 bytes.
 * Bounded like the target plans (oldest out first), since a method is any HTTP token.
 */
const methodSets = new Map<string, ReadonlySet<string>>();
const METHOD_SETS_MAX = 256;

function sharedMethods(listed: Set<string>): ReadonlySet<string> {
  const key = [...listed].join(' ');
  const known = methodSets.get(key);
  if (known !== undefined) return known;
  if (methodSets.size >= METHOD_SETS_MAX) methodSets.delete(methodSets.keys().next().value!);
  methodSets.set(key, listed);
  return listed;
}

interface CompiledProxy {
  listenPath: CompiledListenPath | null;
  methods: ReadonlySet<string> | null;
  headers: readonly HeaderCondition[];
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
  const methods = listed.size === 0 || listed.has('ALL') ? null : sharedMethods(listed);
  // Already in their one stored form (proxy-schema.ts): names lower-cased and sorted.
  const headers = proxy.match_headers ? Object.entries(proxy.match_headers).map(([name, values]) => ({ name, values })) : EMPTY_LIST;
  const targets = proxy.upstreams?.targets ?? [];
  if (targets.length === 0) {
    invalid(`${prefix}.upstreams.targets`, 'must contain at least one target');
  }
  const paramNames = listenPath?.paramNames ?? [];
  const compiledTargets = targets.map((t, i): CompiledTarget => {
    const weight = t.weight ?? 1;
    const field = `${prefix}.upstreams.targets[${i}]`;
    if (!Number.isInteger(weight) || weight < 0) invalid(`${field}.weight`, 'must be a non-negative integer');
    const plan = compileTarget(t.target, paramNames, `${field}.target`, lpField);
    if (t.host_pattern !== undefined && !hostHasPlaceholder(plan)) invalid(`${field}.host_pattern`, 'applies only to a target whose host has a placeholder');
    const hostPattern = t.host_pattern === undefined ? null : compileTargetHostPattern(t.host_pattern, `${field}.host_pattern`);
    return { template: t.target, weight, hostPattern, plan };
  });
  if (proxy.upstreams.health_check) {
    // A health check watches one host; a target whose host is a request's placeholder is a different one per request.
    const unchecked = compiledTargets.find((t) => !t.plan.service && fixedAuthority(t.plan) === null);
    if (unchecked) invalid(`${prefix}.upstreams.health_check`, `cannot check ${unchecked.template}: its host comes from the request`);
    // gRPC's health protocol is a gRPC call, which only an HTTP/2 upstream speaks.
    if (proxy.upstreams.health_check.active?.grpc && proxy.upstreams.protocol !== 'http2') {
      invalid(`${prefix}.upstreams.health_check.active.grpc`, 'needs proxy.upstreams.protocol "http2"');
    }
  }
  return { listenPath, methods, headers, targets: compiledTargets };
}

/**
 * Compile one API definition (active or not) into its route. Throws GatehouseError VALIDATION_FAILED
 * naming the field as the admin API shows it. Cross-references (oauth2 → server) are checked by
 * compileDefinitions, which sees the whole configuration.
 */
export function compileApi(api: ApiDefinition): CompiledRoute {
  const hosts = api.hosts?.length ? [...new Set(api.hosts.map((h, i) => compileHostPattern(h, `hosts[${i}]`)))] : EMPTY_LIST;
  const { listenPath, methods, headers, targets } = compileProxy(api.proxy, 'proxy');
  if (!listenPath && hosts.length === 0 && !methods && headers.length === 0) {
    invalid('proxy.listen_path', 'is required (or at least one of hosts, proxy.methods, proxy.match_headers)');
  }
  const oauth2 = api.plugins?.find((p): p is OAuth2PluginDefinition => p.name === 'oauth2' && p.enabled);
  // gRPC-Web is turned into gRPC, which only an HTTP/2 upstream speaks.
  const grpcWeb = api.plugins?.findIndex((p) => p.name === 'grpc_web' && p.enabled) ?? -1;
  if (grpcWeb !== -1 && api.proxy.upstreams.protocol !== 'http2') invalid(`plugins[${grpcWeb}]`, 'grpc_web needs proxy.upstreams.protocol "http2"');
  // acl judges the consumer key_auth or basic_auth found: without either there is none, and every request would be refused.
  const acl = api.plugins?.findIndex((p) => p.name === 'acl' && p.enabled) ?? -1;
  if (acl !== -1 && !api.plugins!.some((p) => (p.name === 'key_auth' || p.name === 'basic_auth') && p.enabled)) {
    invalid(`plugins[${acl}]`, 'acl needs key_auth or basic_auth enabled on the API (there is no consumer to authorize without one)');
  }
  // Without a host of its own, redirect names one of the API's exact hosts, never a Host only the client chose.
  const redirect = api.plugins?.findIndex((p) => p.name === 'redirect' && p.enabled && (p.config as { host?: string } | undefined)?.host === undefined) ?? -1;
  if (redirect !== -1 && exactHosts(hosts).length === 0) {
    invalid(
      `plugins[${redirect}].config.host`,
      'is required when the API lists no exact host in hosts (the Location would name whatever Host the client sent)',
    );
  }
  return {
    id: `api:${api.name}`,
    kind: 'api',
    name: api.name,
    hosts,
    methods,
    listenPath,
    headers,
    proxy: api.proxy,
    targets,
    conditionCount: (hosts.length > 0 ? 1 : 0) + (methods ? 1 : 0) + headers.length,
    ...(oauth2 ? { oauth2: { serverName: oauth2.config.server_name } } : {}),
    plugins: compilePlugins(api.plugins ?? []),
  };
}

/** The fields of an OAuth server's HS keys shorter than 32 bytes (RFC 7518 §3.2), e.g. `token_strategy.settings[0].key`. */
export function shortHmacKeysOf(server: OAuthServerDefinition): string[] {
  const strategy = server.token_strategy;
  return strategy?.name === 'jwt' && Array.isArray(strategy.settings) ? shortHmacKeyFields(strategy.settings, 'token_strategy.settings') : [];
}

/** Compile an OAuth server: one route per endpoint present (never oauth2-protected), jwt keys imported. */
export function compileOAuthServer(server: OAuthServerDefinition): CompiledOAuthServer {
  const routes = OAUTH_ENDPOINTS.flatMap((endpoint): CompiledRoute[] => {
    const proxy = server.oauth_endpoints?.[endpoint];
    if (!proxy) return [];
    const prefix = `oauth_endpoints.${endpoint}`;
    if (proxy.listen_path === undefined) invalid(`${prefix}.listen_path`, 'is required');
    const { listenPath, methods, headers, targets } = compileProxy(proxy, prefix);
    return [
      {
        id: `oauth:${server.name}:${endpoint}`,
        kind: 'oauth-endpoint',
        name: server.name,
        endpoint,
        hosts: EMPTY_LIST,
        methods,
        listenPath,
        headers,
        proxy,
        targets,
        conditionCount: (methods ? 1 : 0) + headers.length,
        plugins: [],
      },
    ];
  });
  const strategy = server.token_strategy;
  if (strategy.name === 'jwt') {
    const { settings } = strategy;
    return Array.isArray(settings)
      ? { definition: server, routes, jwtKeys: compileJwtKeys(settings, 'token_strategy.settings') }
      : { definition: server, routes, jwtKeys: [], jwks: compileJwks(server.name, settings) };
  }
  const introspect = server.oauth_endpoints.introspect;
  if (strategy.name === 'introspection' && introspect) {
    return { definition: server, routes, jwtKeys: [], introspection: compileIntrospection(server.name, introspect, strategy.settings, strategy) };
  }
  return { definition: server, routes, jwtKeys: [] };
}

/** One definition's own compile: what compileOne gives and a CompileCache keeps. */
export interface Built {
  /** Active and inactive routes (an inactive API keeps its listen path). */
  readonly routes: CompiledRoute[];
  /** routeConflictKey of each route, each once. */
  keys: string[];
  api?: ApiDefinition;
  server?: CompiledOAuthServer;
  passwordHash?: PasswordHash;
  /** key_auth credentials: the key's stored digest. */
  keyHash?: string;
  /** Credentials: the consumer's groups, when it has any. */
  groups?: readonly string[];
}

interface Candidate {
  kind: DefinitionKindName;
  name: string;
  rank: number;
  built: Built;
}

/** The 409 when a definition's conflict key (a route's, or an API key's) is taken, by the kind of the refused definition. */
const TAKEN: Record<DefinitionKindName, { code: ErrorCode; message: string }> = {
  api: { code: 'API_LISTEN_PATH_TAKEN', message: 'api listen path is already registered' },
  'oauth-server': { code: 'API_LISTEN_PATH_TAKEN', message: 'oauth endpoint listen path is already registered' },
  'basic-auth-credential': { code: 'API_LISTEN_PATH_TAKEN', message: '' },
  'key-auth-credential': { code: 'API_KEY_TAKEN', message: 'api key is already registered (by another key_auth credential)' },
};

export function takenError(kind: DefinitionKindName): GatehouseError {
  return new GatehouseError(TAKEN[kind].code, TAKEN[kind].message);
}

const kindWording: Record<DefinitionKindName, string> = {
  api: 'api',
  'oauth-server': 'oauth server',
  'basic-auth-credential': 'basic_auth user',
  'key-auth-credential': 'key_auth credential',
};

/** The credentials of accepted definitions, as a data plane looks them up. */
export interface CredentialMaps {
  basicAuthUsers: Map<string, PasswordHash>;
  apiKeys: Map<string, string>;
  /** The groups of the basic_auth users that have any, by username. */
  basicAuthGroups: Map<string, readonly string[]>;
  /** The groups of the key_auth credentials that have any, by username. */
  keyAuthGroups: Map<string, readonly string[]>;
}

export const emptyCredentialMaps = (): CredentialMaps => ({
  basicAuthUsers: new Map(),
  apiKeys: new Map(),
  basicAuthGroups: new Map(),
  keyAuthGroups: new Map(),
});

/** Adds one accepted definition's credential (if it is one) to the maps. */
export function addCredential(maps: CredentialMaps, name: string, built: { passwordHash?: PasswordHash; keyHash?: string; groups?: readonly string[] }): void {
  if (built.passwordHash) maps.basicAuthUsers.set(name, built.passwordHash);
  if (built.keyHash) maps.apiKeys.set(built.keyHash, name);
  if (built.groups) (built.keyHash ? maps.keyAuthGroups : maps.basicAuthGroups).set(name, built.groups);
}

/**
 * Whole-configuration compile with a verdict per definition: each one is compiled on its own (a
 * bad one never blocks the others), then, in rank order, names must be unique and no two
 * definitions may share a route key (routeConflictKey); last, every oauth2 plugin must name an
 * accepted server. Inactive APIs are compiled and keep their routes for the conflict check, but
 * only active ones are routed.
 */
export function compileDefinitions(defs: Definitions, options: CompileOptions = {}): CompiledConfig {
  const rankOf = options.rank ?? (() => 0);
  const rejected: Rejection[] = [];
  const reject = (c: { kind: DefinitionKindName; name: string }, error: unknown) => {
    if (!(error instanceof GatehouseError)) throw error;
    rejected.push({ kind: c.kind, name: c.name, error });
  };

  const candidates: Candidate[] = [];
  const attempt = (kind: DefinitionKindName, name: string, def: object) => {
    const result = compileOne(kind, def, options.cache);
    if ('built' in result) {
      candidates.push({ built: result.built, kind, name, rank: rankOf(kind, name) });
    } else reject({ kind, name }, result.error);
  };
  for (const { kind, name, def } of definitionsOf(defs)) attempt(kind, name, def);
  // Stable: equal ranks keep list order (servers first, as the router and the old rule had them).
  candidates.sort((a, b) => a.rank - b.rank);

  const names = new Set<string>();
  const routeOwners = new Map<string, Candidate>();
  const survivors = candidates.filter((c) => {
    const nameKey = `${c.kind}:${c.name}`;
    if (names.has(nameKey)) {
      reject(c, fieldError(c.kind.endsWith('-credential') ? 'username' : 'name', `: ${kindWording[c.kind]} "${c.name}" is defined more than once`));
      return false;
    }
    names.add(nameKey);
    for (const key of c.built.keys) {
      if (routeOwners.has(key)) {
        reject(c, takenError(c.kind));
        return false;
      }
    }
    for (const key of c.built.keys) routeOwners.set(key, c);
    return true;
  });

  const oauthServers = new Map<string, CompiledOAuthServer>();
  const credentials = emptyCredentialMaps();
  for (const c of survivors) {
    if (c.built.server) oauthServers.set(c.name, c.built.server);
    addCredential(credentials, c.name, c.built);
  }
  const routed: Built[] = [];
  for (const c of survivors) {
    const { api } = c.built;
    if (!api) continue;
    try {
      checkPluginReferences(api, (name) => oauthServers.get(name)?.definition.token_strategy.name);
    } catch (err) {
      reject(c, err);
      continue;
    }
    routed.push(c.built);
  }
  // Gathered when first read: a cache that keeps no routes (the control plane's) compiles them again then.
  let routes: CompiledRoute[] | undefined;
  let inactiveRoutes: CompiledRoute[] | undefined;
  const routesOf = (active: boolean) => routed.flatMap((b) => (b.api!.active === active ? b.routes : EMPTY_LIST));
  return {
    get routes() {
      return (routes ??= [...routesOf(true), ...[...oauthServers.values()].flatMap((server) => server.routes)]);
    },
    get inactiveRoutes() {
      return (inactiveRoutes ??= routesOf(false));
    },
    oauthServers,
    ...credentials,
    rejected,
  };
}

/** For a configuration that must be whole (a data plane applying a snapshot): the first rejection is thrown. */
export function compileAllOrThrow(defs: Definitions): CompiledConfig {
  const compiled = compileDefinitions(defs);
  if (compiled.rejected.length > 0) {
    const { kind, name, error } = compiled.rejected[0];
    throw new GatehouseError(error.code, `${kind} "${name}": ${error.message}`, { field: error.field, cause: error });
  }
  return compiled;
}

/** Why `scopes` and `claims_to_headers` cannot go with a `storage` server (also incremental.ts's message). */
export const STORAGE_SEES_NO_CLAIMS = 'a stored token carries no scopes or claims';

/**
 * Every oauth2 plugin, enabled or not, must name an existing OAuth server; `scopes` and `claims_to_headers` need one
 * whose strategy sees the token's contents (a `storage` server only knows that a token was issued). `strategyOf`
 * gives the token strategy of an accepted server, undefined for none.
 */
export function checkPluginReferences(api: ApiDefinition, strategyOf: (server: string) => TokenStrategy['name'] | undefined): void {
  (api.plugins ?? []).forEach((p, i) => {
    if (p.name !== 'oauth2') return;
    const serverName = p.config?.server_name;
    const strategy = strategyOf(serverName);
    if (strategy === undefined) invalid(`plugins[${i}].config.server_name`, `: oauth server "${serverName}" not found`);
    if (strategy !== 'storage') return;
    for (const field of ['scopes', 'claims_to_headers'] as const) {
      if (p.config[field] !== undefined) {
        invalid(
          `plugins[${i}].config.${field}`,
          `needs an oauth server with the jwt or introspection strategy ("${serverName}" is storage): ${STORAGE_SEES_NO_CLAIMS}`,
        );
      }
    }
  });
}

/**
 * Two routes with the same key cannot be told apart by a request (same listen_path, hosts, methods
 * and header conditions, as order-insensitive sets): the admin API answers 409 `api listen path is
 * already registered`. Routes that differ only by their header conditions coexist.
 */
export function routeConflictKey(route: CompiledRoute): string {
  // One line per part, host patterns and methods space-separated: neither contains whitespace
  // (hostSchema, HTTP tokens), so the last two newlines split the key however a listen_path reads, and
  // the key names exactly one triple. A template, not JSON.stringify of sorted copies: every definition
  // of a data plane's full snapshot gets one.
  const hosts = route.hosts.length === 0 ? '' : route.hosts.length === 1 ? route.hosts[0] : [...route.hosts].sort().join(' ');
  const methods = route.methods ? [...route.methods].sort().join(' ') : 'ALL';
  // Joined, not a template: a template of five parts is a tree of cons strings (~100 bytes an API more on a
  // data plane, which keeps every key); join makes one flat string.
  const key = [route.listenPath?.source ?? '', hosts, methods].join('\n');
  // Header conditions (already in one sorted form) as a fourth line of JSON, which holds no raw newline
  // and starts with `[`, never an HTTP token: a route without them keeps its three-line key, and no
  // three-line key equals a four-line one.
  return route.headers.length === 0 ? key : `${key}\n${JSON.stringify(route.headers)}`;
}
