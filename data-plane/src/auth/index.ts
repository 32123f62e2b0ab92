/**
 * Bearer-token enforcement (docs/oauth2.md "OAuth 2.0") for one applied snapshot.
 */
import { pino } from 'pino';
import { GatehouseError } from '#proto/errors';
import type { CompiledJwks, CompiledOAuthServer, CompiledRoute } from '#proto/compile/index';
import type { Logger } from '#proto/logger';
import { createJwtVerifier, type JwtVerifier } from './jwt-verifier.js';
import { createTokenObserver } from './token-observer.js';
import type { Introspector } from './introspector.js';
import type { JwksCache } from './jwks-cache.js';
import type { TokenStore } from './token-store.js';
import { EMPTY_GRANT, type TokenGrant } from './token-grant.js';

export type { TokenStore } from './token-store.js';
export { createIntrospector, type Introspector } from './introspector.js';
export { createJwksCache, type JwksCache } from './jwks-cache.js';
export { createTokenStore, createMemoryTokenStore, createRedisTokenStore } from './token-store.js';
export { observedResponse } from './observed-response.js';
export type { TokenGrant } from './token-grant.js';

/** Follows one request/response pair through an OAuth endpoint route (storage strategy). */
export interface EndpointObserver {
  /** Request body chunks as they stream upstream (the observer keeps a bounded copy). */
  requestChunk(chunk: Buffer): void;
  response(status: number, headers: Record<string, string | string[] | undefined>): void;
  /** Response body chunks as they stream to the client (bounded copy). */
  responseChunk(chunk: Buffer): void;
  /** Once both bodies ended: stores, replaces or removes tokens. Never throws. */
  finish(): Promise<void>;
}

export interface Authorizer {
  /**
   * Returns the token's grant when the request may pass and that is known at once (a cached verification), undefined
   * for a route without oauth2, a promise of the grant when the answer must be waited for (verification,
   * introspection, token store: whose tokens grant nothing, EMPTY_GRANT).
   * A refusal is a GatehouseError AUTH_HEADER_MISSING, BEARER_MALFORMED or TOKEN_REJECTED: thrown when known at
   * once, else the promise's rejection. Callers handle both (the oauth2 plugin does).
   */
  check(route: CompiledRoute, authorization: string | undefined): TokenGrant | Promise<TokenGrant> | undefined;
  /** An observer for token/revoke endpoint routes of storage servers, else null. */
  observe(route: CompiledRoute): EndpointObserver | null;
}

export type AuthLogger = Pick<Logger, 'info' | 'warn' | 'debug'>;

const BEARER_ONE_SPACE = /^bearer \S+$/i;

/**
 * The bearer token of an Authorization header value, or the error its shape calls for (docs/proxy.md "Proxy behaviour" order):
 * absent or not `<scheme> <token>` → AUTH_HEADER_MISSING; scheme other than Bearer → BEARER_MALFORMED.
 * `Bearer` with no token (Node trims `Bearer ` to `Bearer`) is not `<scheme> <token>` either: a 400
 * AUTH_HEADER_MISSING, as Janus answers it, never a token lookup.
 */
export function parseAuthorization(value: string | undefined): string {
  // The usual shape, `Bearer <token>` with one space, is decided by one regex test without trim or captures (whatever
  // it accepts, the general parse below accepts with the same token; a property test holds the two equal).
  if (value !== undefined && BEARER_ONE_SPACE.test(value)) return value.slice(7);
  const m = value === undefined ? null : /^(\S+) +(\S+)$/.exec(value.trim());
  if (!m) throw new GatehouseError('AUTH_HEADER_MISSING', 'authorization field missing');
  const [, scheme, token] = m;
  if (scheme.toLowerCase() !== 'bearer') throw new GatehouseError('BEARER_MALFORMED', 'bearer token malformed');
  return token;
}

/** Built once per applied snapshot; keys were imported by compile, tokenStore outlives snapshots. */
export function createAuthorizer(deps: {
  servers: ReadonlyMap<string, CompiledOAuthServer>;
  tokenStore: TokenStore;
  /** The process's introspector (it outlives snapshots, as its cache does); needed by introspection servers only. */
  introspector?: Introspector;
  /** The process's JWKS sets (they outlive snapshots); needed by jwt servers with a jwks_uri only. */
  jwks?: JwksCache;
  /** Seconds since epoch; injectable for tests. */
  now?: () => number;
  logger?: AuthLogger;
}): Authorizer {
  const { servers, tokenStore } = deps;
  const now = deps.now ?? (() => Date.now() / 1000);
  const logger: AuthLogger = deps.logger ?? pino({ enabled: false });

  const verifiers = new Map<string, JwtVerifier>();
  const jwksConfigs: CompiledJwks[] = [];
  for (const [name, server] of servers) {
    const strategy = server.definition.token_strategy;
    if (strategy.name !== 'jwt') continue;
    const { jwks } = server;
    const lookup = jwks && {
      algorithms: jwks.algs,
      keysFor: (alg: string, kid: string | undefined) => {
        if (!deps.jwks) throw new GatehouseError('JWKS_UNAVAILABLE', 'no JWKS cache configured');
        return deps.jwks.keysFor(jwks, alg, kid);
      },
    };
    if (jwks) jwksConfigs.push(jwks);
    verifiers.set(
      name,
      createJwtVerifier({ keys: server.jwtKeys, lookup, leeway: strategy.leeway ?? 0, issuer: strategy.issuer, audiences: strategy.audiences, now }),
    );
  }
  // Fetched now, so the first tokens find their keys.
  deps.jwks?.retain(jwksConfigs);

  async function checkStored(serverName: string, token: string): Promise<TokenGrant> {
    let stored: boolean;
    try {
      stored = await tokenStore.has(serverName, token);
    } catch (err) {
      logger.warn({ server: serverName, err }, 'token store unavailable, request refused');
      throw new GatehouseError('TOKEN_REJECTED', 'access token not authorized: token store unavailable', { cause: err });
    }
    if (!stored) throw new GatehouseError('TOKEN_REJECTED', 'access token not authorized: unknown or expired token');
    return EMPTY_GRANT;
  }

  return {
    check(route, authorization) {
      if (route.kind !== 'api' || !route.oauth2) return;
      const token = parseAuthorization(authorization);
      const serverName = route.oauth2.serverName;
      const server = servers.get(serverName);
      // Fail closed: a reference to a server the snapshot lacks protects nothing by accident.
      if (!server) throw new GatehouseError('TOKEN_REJECTED', `access token not authorized: oauth server ${serverName} missing`);
      const verifier = verifiers.get(serverName);
      if (verifier) return verifier.verify(token);
      if (server.introspection) {
        if (!deps.introspector) throw new GatehouseError('TOKEN_INTROSPECTION_UNAVAILABLE', 'no introspector configured');
        return deps.introspector.check(server.introspection, token);
      }
      return checkStored(serverName, token);
    },

    observe(route) {
      if (route.kind !== 'oauth-endpoint') return null;
      if (route.endpoint !== 'token' && route.endpoint !== 'revoke') return null;
      const strategy = servers.get(route.name)?.definition.token_strategy;
      if (strategy?.name !== 'storage') return null;
      return createTokenObserver({
        server: route.name,
        endpoint: route.endpoint,
        store: tokenStore,
        defaultTtl: strategy.settings?.default_ttl,
        logger,
      });
    },
  };
}
