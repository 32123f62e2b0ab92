/** The runtime side of a plugin: once per route and snapshot, its hooks closed over its compiled config. */
import type { CompiledRoute } from '#proto/compile/index';
import type { BasicAuthVerdict } from '../auth/basic-credentials.js';
import type { Authorizer } from '../auth/index.js';
import type { OidcProviders } from '../auth/oidc-provider.js';
import type { BreakerGeneration } from './circuit-breaker.js';
import type { TrustedProxies } from './client-ip.js';
import type { PluginStage } from './pipeline.js';
import type { ResponseCache } from './proxy-cache/index.js';
import type { RateLimiter } from './rate-limit/rate-limiter.js';

/** What a stage may use besides its config: per snapshot, never per request. */
export interface StageDeps {
  route: CompiledRoute;
  authorizer: Authorizer;
  /** Counters of rate_limit, kept across snapshots (made by main.ts). */
  rateLimiter: RateLimiter;
  /** cb's circuit breakers, kept across snapshots while route, target and config are unchanged. */
  breakers: BreakerGeneration;
  /** basic_auth: the username when the Authorization header names one of this snapshot's users with the right password, else null (a promise only while scrypt runs; BUSY when the check was not made). */
  basicAuth(authorization: string | undefined): BasicAuthVerdict;
  /** key_auth: the username of this snapshot's credential holding `key`, or undefined. */
  apiKeyOwner(key: string): string | undefined;
  /** basic_auth and key_auth: the groups of this snapshot's users and credentials that have any, by username. */
  basicAuthGroups: ReadonlyMap<string, readonly string[]>;
  keyAuthGroups: ReadonlyMap<string, readonly string[]>;
  /** proxy_cache's store: the process's one (PROXY_CACHE_SIZE), kept across snapshots. */
  responseCache: ResponseCache;
  /** openid_connect's discovery, code exchange and ID token checks (main.ts passes the process's one); undefined: its routes answer 503. */
  oidc?: OidcProviders;
  /** TRUSTED_PROXIES (client-ip.ts): whose forwarded headers name the client, its scheme and host. */
  trustedProxies: TrustedProxies;
}

export interface PluginRuntime<Compiled> {
  stage(config: Compiled, deps: StageDeps): PluginStage;
}
