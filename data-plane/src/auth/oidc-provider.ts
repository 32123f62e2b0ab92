/**
 * openid_connect's provider side, one instance per process (main.ts): discovery documents, the code exchange and
 * ID token verification, through the proxy's upstream pools (json-call.ts) like the JWKS cache.
 *
 * - Discovery (`<issuer>/.well-known/openid-configuration`, ≤ 64 KiB, `timeout`): held an hour, refreshed in the
 *   background after that; at most one fetch per 10 s per issuer, whatever asks; a failed fetch keeps the last good
 *   document. No document → IDENTITY_PROVIDER_UNAVAILABLE (503). The document's `issuer` must be the configured one
 *   exactly, and its endpoints https (or http under the plugin's own rule: loopback or allow_http).
 * - ID tokens: signature with the issuer's JWKS (jwks-cache.ts, RS*, ES*), `iss` = issuer, `aud` ∋ client_id,
 *   `exp` required and passed, `nonce` the one the sign-in sent (30 s of clock skew).
 */
import { GatehouseError, isGatehouseError } from '#proto/errors';
import { compileJwks, type CompiledJwks } from '#proto/compile/jwks';
import { JWKS_ALGS } from '#proto/definition/types';
import { jwksUriProblem } from '#proto/definition/oauth-server-schema';
import type { CompiledOpenidConnect } from '#proto/plugins/index';
import type { Logger } from '#proto/logger';
import { callJson, getJsonDocument, fetchAtMostEvery, type CallPools, type FetchState } from './json-call.js';
import type { JwksCache } from './jwks-cache.js';
import type { FetchMetrics } from './fetch-metrics.js';
import { createJwtVerifier, type JwtVerifier } from './jwt-verifier.js';
import type { TokenGrant } from './token-grant.js';

export interface ProviderEndpoints {
  authorization: string;
  token: URL;
  endSession: string | undefined;
  jwks: CompiledJwks;
}

export interface OidcProviders {
  /** The issuer's endpoints: synchronous while a document is held. */
  endpoints(config: CompiledOpenidConnect): ProviderEndpoints | Promise<ProviderEndpoints>;
  /** Exchanges a code at the token endpoint (client_secret_basic, PKCE) and verifies the ID token: its claims. */
  signIn(config: CompiledOpenidConnect, code: string, verifier: string, redirectUri: string, nonce: string): Promise<TokenGrant>;
  /**
   * A new snapshot's openid_connect configs: the documents (and the JWKS sets) of issuers no longer configured are
   * forgotten, so the process holds only what its configuration names, however many issuers came and went.
   */
  retain(configs: readonly CompiledOpenidConnect[]): void;
}

const MAX_DOCUMENT_BYTES = 64 * 1024;
const MAX_TOKEN_RESPONSE_BYTES = 64 * 1024;
const DOCUMENT_TTL_MS = 3_600_000;
const COOLDOWN_MS = 10_000;
const LEEWAY_S = 30;

interface Held extends FetchState {
  endpoints?: ProviderEndpoints;
  fetchedAt: number;
  lastError?: string;
  verifier?: JwtVerifier;
}

const unavailable = (config: CompiledOpenidConnect, reason: string, cause?: unknown) =>
  new GatehouseError('IDENTITY_PROVIDER_UNAVAILABLE', `OpenID provider ${config.issuer}: ${reason}`, { cause });

function endpointsOf(config: CompiledOpenidConnect, doc: Record<string, unknown>): ProviderEndpoints {
  if (doc.issuer !== config.issuer) throw new Error(`discovery names issuer ${JSON.stringify(doc.issuer)}, not the configured one`);
  const url = (member: string, required: boolean): string | undefined => {
    const value = doc[member];
    if (value === undefined && !required) return undefined;
    const problem = typeof value === 'string' ? jwksUriProblem(value, config.allowHttp) : 'is missing';
    if (problem) throw new Error(`discovery ${member} ${problem}`);
    return value as string;
  };
  const jwksUri = url('jwks_uri', true)!;
  return {
    authorization: url('authorization_endpoint', true)!,
    token: new URL(url('token_endpoint', true)!),
    endSession: url('end_session_endpoint', false),
    jwks: compileJwks(`openid_connect ${config.issuer}`, {
      jwks_uri: jwksUri,
      algs: [...JWKS_ALGS],
      cache_ttl: '5m',
      timeout: `${config.timeoutMs}ms`,
      cooldown: '30s',
      max_stale: '24h',
      allow_http: config.allowHttp,
    }),
  };
}

export function createOidcProviders(options: {
  pools: CallPools;
  jwks: JwksCache;
  now?: () => number;
  logger?: Pick<Logger, 'warn' | 'info'>;
  metrics?: Pick<FetchMetrics, 'discoveryFetch'>;
}): OidcProviders {
  const now = options.now ?? Date.now;
  const held = new Map<string, Held>();

  async function load(config: CompiledOpenidConnect, entry: Held): Promise<void> {
    try {
      const fail = (reason: string, cause?: unknown) => unavailable(config, reason, cause);
      const doc = await getJsonDocument(
        options.pools,
        {
          origin: config.discoveryOrigin,
          path: config.discoveryPath,
          accept: 'application/json',
          timeoutMs: config.timeoutMs,
          maxBytes: MAX_DOCUMENT_BYTES,
          label: 'discovery',
        },
        fail,
      );
      entry.endpoints = endpointsOf(config, doc);
      entry.verifier = undefined;
      entry.fetchedAt = now();
      entry.lastError = undefined;
      options.metrics?.discoveryFetch('ok');
      options.logger?.info({ issuer: config.issuer }, 'OpenID provider discovered');
    } catch (err) {
      entry.lastError = isGatehouseError(err) ? err.message : unavailable(config, err instanceof Error ? err.message : String(err)).message;
      options.metrics?.discoveryFetch('failed');
      options.logger?.warn({ issuer: config.issuer, err: entry.lastError, serving: entry.endpoints !== undefined }, 'OpenID discovery failed');
    }
  }

  const refresh = (config: CompiledOpenidConnect, entry: Held, at: number) => fetchAtMostEvery(entry, COOLDOWN_MS, at, () => load(config, entry));

  const none = (config: CompiledOpenidConnect, entry: Held): never => {
    throw entry.lastError ? new GatehouseError('IDENTITY_PROVIDER_UNAVAILABLE', entry.lastError) : unavailable(config, 'no discovery document yet');
  };

  function entryOf(config: CompiledOpenidConnect): Held {
    let entry = held.get(config.discoveryKey);
    if (!entry) held.set(config.discoveryKey, (entry = { fetchedAt: -Infinity, attemptedAt: -Infinity }));
    return entry;
  }

  function endpoints(config: CompiledOpenidConnect): ProviderEndpoints | Promise<ProviderEndpoints> {
    const entry = entryOf(config);
    const at = now();
    if (entry.endpoints) {
      if (at - entry.fetchedAt >= DOCUMENT_TTL_MS) void refresh(config, entry, at);
      return entry.endpoints;
    }
    const pending = refresh(config, entry, at) ?? none(config, entry);
    return pending.then(() => entry.endpoints ?? none(config, entry));
  }

  function verifierOf(config: CompiledOpenidConnect, found: ProviderEndpoints): JwtVerifier {
    const entry = entryOf(config);
    // One per document (its JWKS) and client: a verdict never outlives the settings it was made under.
    if (entry.verifier && entry.endpoints === found) return entry.verifier;
    const verifier = createJwtVerifier({
      keys: [],
      lookup: { algorithms: JWKS_ALGS, keysFor: (alg, kid) => options.jwks.keysFor(found.jwks, alg, kid) },
      leeway: LEEWAY_S,
      issuer: config.issuer,
      audiences: [config.clientId],
      now: () => now() / 1000,
      cacheSize: 100,
    });
    if (entry.endpoints === found) entry.verifier = verifier;
    return verifier;
  }

  return {
    endpoints,
    retain(configs) {
      const wanted = new Set(configs.map((c) => c.discoveryKey));
      for (const key of held.keys()) if (!wanted.has(key)) held.delete(key);
      options.jwks.retain([...held.values()].flatMap((entry) => (entry.endpoints ? [entry.endpoints.jwks] : [])));
    },
    async signIn(config, code, codeVerifier, redirectUri, nonce) {
      const found = await endpoints(config);
      const body = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: codeVerifier }).toString();
      const response = await callJson(
        options.pools,
        {
          origin: found.token.origin,
          path: `${found.token.pathname}${found.token.search}`,
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', authorization: config.clientAuthorization },
          body,
          timeoutMs: config.timeoutMs,
          dialTimeoutMs: config.timeoutMs,
          insecureSkipVerify: false,
          maxBytes: MAX_TOKEN_RESPONSE_BYTES,
          label: 'token endpoint',
        },
        // A 4xx is the IdP refusing this code (used, expired, another verifier); anything else, the IdP failing.
        (reason, cause) =>
          /answered 4\d\d$/.test(reason)
            ? new GatehouseError('SIGN_IN_CALLBACK_INVALID', `code exchange refused: ${reason}`, { cause })
            : unavailable(config, `code exchange failed: ${reason}`, cause),
      );
      if (typeof response.id_token !== 'string') throw new GatehouseError('SIGN_IN_CALLBACK_INVALID', 'token endpoint answered without an id_token');
      let grant: TokenGrant;
      try {
        grant = await verifierOf(config, found).verify(response.id_token);
      } catch (err) {
        if (isGatehouseError(err) && err.code !== 'TOKEN_REJECTED') throw err;
        throw new GatehouseError('SIGN_IN_CALLBACK_INVALID', `ID token refused: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
      }
      if (!grant.claims.has('exp')) throw new GatehouseError('SIGN_IN_CALLBACK_INVALID', 'ID token refused: no exp');
      if (grant.claims.get('nonce') !== nonce) throw new GatehouseError('SIGN_IN_CALLBACK_INVALID', 'ID token refused: nonce differs from the sign-in');
      if (!grant.claims.has('sub')) throw new GatehouseError('SIGN_IN_CALLBACK_INVALID', 'ID token refused: no sub');
      return grant;
    },
  };
}
