/**
 * jwt token strategy (docs/oauth2.md "OAuth 2.0"): signature with the server's own keys (or its JWKS's) and algs only, then exp/nbf with leeway,
 * and `iss` / `aud` when the server names an issuer / audiences (jose's own checks).
 * One verifier per OAuth server per authorizer (a new one whenever a snapshot changes any OAuth server, see
 * table/build.ts): its key imports and its cache die with it, so a verdict made under a server's old issuer,
 * audiences, keys or leeway is never reused. The cache holds the token's grant (token-grant.ts), not a route's
 * verdict: scopes and claim headers are the route's plugin's to judge on every request.
 */
import { hash as digest, webcrypto } from 'node:crypto';
import { GatehouseError, isGatehouseError } from '#proto/errors';
import type { CompiledJwtKey } from '#proto/compile/index';
import type { JwtAlg } from '#proto/definition/types';
import { DeadlineCache } from './deadline-cache.js';
import { grantOf, type TokenGrant } from './token-grant.js';

export interface JwtVerifier {
  /**
   * Returns the token's grant when it is known valid (a cached verification), a promise of it when it must be
   * verified; a refusal is a GatehouseError TOKEN_REJECTED, thrown or rejected. No promise on the cached path: the
   * proxy then goes on in the same tick (see proxy/dispatch.ts withPlugins).
   */
  verify(token: string): TokenGrant | Promise<TokenGrant>;
  /** Successful verifications currently remembered (metrics, tests). */
  cachedCount(): number;
}

export interface JwtVerifierOptions {
  keys: readonly CompiledJwtKey[];
  /**
   * A JWKS source instead of `keys`: the keys for a token's alg and kid, looked up per verification (jwks-cache.ts;
   * it may wait for a fetch, or fail with JWKS_UNAVAILABLE), with `algorithms` the algs accepted.
   */
  lookup?: {
    algorithms: readonly JwtAlg[];
    keysFor(alg: string, kid: string | undefined): readonly CompiledJwtKey[] | Promise<readonly CompiledJwtKey[]>;
  };
  /** Seconds of clock skew tolerated on exp and nbf. */
  leeway: number;
  /** The `iss` required, exactly; undefined: not checked. */
  issuer?: string;
  /** `aud` must hold one of these; undefined: not checked. */
  audiences?: readonly string[];
  /** Seconds since epoch (fractions allowed); injectable so tests freeze time instead of sleeping. */
  now?: () => number;
  /** Successful verifications remembered, least recently used dropped first. */
  cacheSize?: number;
  /** Seconds a cached success is trusted at most (it never outlives the token's exp either). */
  cacheMaxAge?: number;
}

const DEFAULT_CACHE_SIZE = 10_000;
const DEFAULT_CACHE_MAX_AGE = 300;
/** Longer headers are not tokens anyone issued; refusing them bounds parse and hash work. */
export const MAX_TOKEN_LENGTH = 8192;

const HASHES: Record<JwtAlg, string> = {
  HS256: 'SHA-256',
  HS384: 'SHA-384',
  HS512: 'SHA-512',
  RS256: 'SHA-256',
  RS384: 'SHA-384',
  RS512: 'SHA-512',
  ES256: 'SHA-256',
  ES384: 'SHA-384',
};

type Jose = typeof import('jose');
type JWTPayload = import('jose').JWTPayload;

/**
 * jose is imported when the first verifier is made, not with this module: a data plane whose
 * configuration has no jwt server never loads it (importing jose is a noticeable share of a start). A token that
 * arrives before the import has finished waits for it.
 */
let jose: Jose | undefined;
let joseLoading: Promise<Jose> | undefined;
const loadJose = (): Promise<Jose> => (joseLoading ??= import('jose').then((loaded) => (jose = loaded)));

/** The one place a jose (or key import) failure becomes a Gatehouse error; the reason goes to the message for logs. */
function tokenRejected(err: unknown): GatehouseError {
  if (isGatehouseError(err)) return err;
  const reason =
    jose && err instanceof jose.errors.JWTClaimValidationFailed
      ? `${err.code} (${err.claim})`
      : jose && err instanceof jose.errors.JOSEError
        ? err.code
        : err instanceof Error
          ? err.message
          : String(err);
  return rejection(reason, err);
}

function rejection(reason: string, cause?: unknown): GatehouseError {
  return new GatehouseError('TOKEN_REJECTED', `access token not authorized: ${reason}`, { cause });
}

/** WebCrypto keys for jose, so verification does no key conversion per request. */
function importForAlg({ alg, key }: CompiledJwtKey): Promise<webcrypto.CryptoKey> {
  const hash = HASHES[alg];
  if (alg.startsWith('HS')) {
    return webcrypto.subtle.importKey('raw', key.export(), { name: 'HMAC', hash }, false, ['verify']);
  }
  const spki = key.export({ type: 'spki', format: 'der' });
  const algorithm = alg.startsWith('RS') ? { name: 'RSASSA-PKCS1-v1_5', hash } : { name: 'ECDSA', namedCurve: alg === 'ES256' ? 'P-256' : 'P-384' };
  return webcrypto.subtle.importKey('spki', spki, algorithm, false, ['verify']);
}

export function createJwtVerifier(options: JwtVerifierOptions): JwtVerifier {
  // A failed import surfaces as the rejection of each token that needs it.
  loadJose().catch(() => {});
  const now = options.now ?? (() => Date.now() / 1000);
  const cacheSize = options.cacheSize ?? DEFAULT_CACHE_SIZE;
  const cacheMaxAge = options.cacheMaxAge ?? DEFAULT_CACHE_MAX_AGE;
  const algorithms: string[] = options.lookup ? [...options.lookup.algorithms] : [...new Set(options.keys.map((k) => k.alg))];
  // Weak: a JWKS refetch brings new key objects, the old ones go with their set.
  const imported = new WeakMap<CompiledJwtKey, Promise<webcrypto.CryptoKey>>();
  /** sha256(token), latin1 string → the grant of a success that stands until the deadline (seconds since epoch). */
  const cache = new DeadlineCache<TokenGrant>(cacheSize);
  const claimChecks = {
    ...(options.issuer !== undefined && { issuer: options.issuer }),
    ...(options.audiences !== undefined && { audience: [...options.audiences] }),
  };

  const cryptoKey = (k: CompiledJwtKey) => {
    let p = imported.get(k);
    if (!p) {
      p = importForAlg(k);
      imported.set(k, p);
    }
    return p;
  };

  function remember(id: string, at: number, exp: number | undefined, grant: TokenGrant): void {
    const until = Math.min(exp ?? Infinity, at + cacheMaxAge);
    if (until > at) cache.set(id, grant, until);
  }

  async function verifyUncached(token: string, at: number): Promise<JWTPayload> {
    const { decodeProtectedHeader, jwtVerify, errors: joseErrors } = jose ?? (await loadJose());
    const { alg, kid } = decodeProtectedHeader(token);
    // Only keys declared for the token's own alg are tried: `none`, unlisted algs and an HMAC token against an
    // RSA/EC server find no key at all (and ask no JWKS for one); jose re-checks alg and key type below.
    if (typeof alg !== 'string' || !algorithms.includes(alg)) throw new joseErrors.JOSEAlgNotAllowed(`alg ${String(alg)} is not accepted`);
    const candidates = options.lookup
      ? await options.lookup.keysFor(alg, typeof kid === 'string' ? kid : undefined)
      : options.keys.filter((k) => k.alg === alg);
    if (candidates.length === 0) throw new joseErrors.JWKSNoMatchingKey(`no key for kid ${JSON.stringify(kid)}`);
    let lastError: unknown;
    for (const candidate of candidates) {
      try {
        const { payload } = await jwtVerify(token, await cryptoKey(candidate), {
          algorithms,
          clockTolerance: options.leeway,
          currentDate: new Date(at * 1000),
          ...claimChecks,
        });
        return payload;
      } catch (err) {
        // A claim failure means this key's signature matched: another key (rotation) cannot change the verdict.
        if (err instanceof joseErrors.JWTClaimValidationFailed) throw err;
        lastError = err;
      }
    }
    throw lastError;
  }

  async function verifyAndRemember(token: string, id: string, at: number): Promise<TokenGrant> {
    let payload: JWTPayload;
    try {
      payload = await verifyUncached(token, at);
    } catch (err) {
      throw tokenRejected(err);
    }
    const grant = grantOf(payload);
    remember(id, at, payload.exp, grant);
    return grant;
  }

  return {
    verify(token) {
      if (token.length === 0 || token.length > MAX_TOKEN_LENGTH) {
        // jose's code for a malformed token (JWTInvalid), without waiting for jose.
        throw rejection('ERR_JWT_INVALID');
      }
      const at = now();
      // One-shot sha256 with 'binary' (latin1) output, 32 one-byte characters: the shortest key string, and the
      // cheapest digest + Map lookup of those tried (base64, sha512-256, blake2, createHash).
      const id = digest('sha256', token, 'binary');
      return cache.get(id, at) ?? verifyAndRemember(token, id, at);
    },
    cachedCount: () => cache.size,
  };
}
