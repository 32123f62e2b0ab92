/**
 * Bearer-token enforcement (SPEC §5) for one applied snapshot.
 * OWNER: auth helper. Exported names/types are a contract; extend, don't rename.
 */
import type { CompiledOAuthServer, CompiledRoute } from '#proto/compile/index';
import type { TokenStore } from './token-store.js';

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
   * Resolves when the request may pass; rejects with GatehouseError AUTH_HEADER_MISSING,
   * BEARER_MALFORMED or TOKEN_REJECTED. Routes without oauth2 resolve at once.
   */
  check(route: CompiledRoute, authorization: string | undefined): Promise<void>;
  /** An observer for token/revoke endpoint routes of storage servers, else null. */
  observe(route: CompiledRoute): EndpointObserver | null;
}

/** Built once per applied snapshot; keys were imported by compile, tokenStore outlives snapshots. */
export function createAuthorizer(deps: {
  servers: ReadonlyMap<string, CompiledOAuthServer>;
  tokenStore: TokenStore;
  /** Seconds since epoch; injectable for tests. */
  now?: () => number;
}): Authorizer {
  throw new Error('not implemented');
}
