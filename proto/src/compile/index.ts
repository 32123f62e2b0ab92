/**
 * Compile definitions into the routing data both services use: the CP compiles every write
 * exactly as a DP will (so nothing a DP would reject is accepted), the DP builds its router
 * from the result. Pure: no I/O, no clock, no module state.
 * OWNER: compile/routing helper. Exported names/types are a contract; extend, don't rename.
 */
import type { KeyObject } from 'node:crypto';
import type {
  ApiDefinition,
  Definitions,
  JwtAlg,
  OAuthEndpointName,
  OAuthServerDefinition,
  ProxyDefinition,
} from '../definition/types.js';

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
  match(path: string): ListenPathMatch | null;
}

export interface CompiledTarget {
  /** The target URL template as defined, e.g. `http://{service}:9000/x`. */
  template: string;
  weight: number;
}

export interface CompiledRoute {
  /** Unique in a snapshot: `api:<name>` or `oauth:<server>:<endpoint>`. */
  id: string;
  kind: 'api' | 'oauth-endpoint';
  /** API name, or OAuth server name for endpoint routes. */
  name: string;
  endpoint?: OAuthEndpointName;
  /** Lower-cased host patterns; empty = any host. */
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
  oauthServers: ReadonlyMap<string, CompiledOAuthServer>;
}

export function compileApi(api: ApiDefinition): CompiledRoute {
  throw new Error('not implemented');
}

export function compileOAuthServer(server: OAuthServerDefinition): CompiledOAuthServer {
  throw new Error('not implemented');
}

/** Whole-configuration compile: every definition plus cross-references (oauth2 → existing server). */
export function compileDefinitions(defs: Definitions): CompiledConfig {
  throw new Error('not implemented');
}
