/**
 * basic_auth verification (plugin: data-plane/src/plugins/basic-auth.ts). One checker per data
 * plane (made by the snapshot holder, so its caches outlive snapshots); each snapshot binds it to
 * its users (compile's basicAuthUsers: username → parsed scrypt hash).
 *
 * - scrypt runs asynchronously on libuv's thread pool, never on the event loop; the derived key is
 *   compared in constant time (proto/src/password-hash.ts).
 * - An unknown user is verified against a random hash with the same parameters, so the answer
 *   takes as long as for a known user (no user enumeration by timing).
 * - Verdicts are cached in two bounded LRUs (positive and negative), keyed by a SHA-256 of a
 *   per-process random secret, the stored hash, username and password: a password change or a new
 *   user changes the key, so a cached verdict is never stale, and the keys are worthless outside
 *   this process. A deleted user is refused before any cache is read.
 * - Negative caching: a client repeating the same wrong credentials costs one scrypt, not one per
 *   request. Distinct wrong passwords each cost one scrypt; at most `maxPending` run or wait at a
 *   time, and at most `maxPendingPerUser` for one user name (every unknown name counts as one), so
 *   a flood cannot hold the thread pool (shared with DNS lookups and file I/O), nor queue without
 *   bound, nor, aimed at one user, crowd out the others. Beyond those bounds a fresh check is not
 *   made: the answer is BUSY (503 with Retry-After), never a rejection, since the password was not
 *   looked at. Users whose verdict is cached are not affected: their checks never reach scrypt, and
 *   negatives live in their own LRU, so a flood of wrong passwords cannot evict them.
 */
import { hash as sha, randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { MAX_PASSWORD_LENGTH } from '#proto/definition/basic-auth-credential-schema';
import { SCRYPT_PARAMS, verifyPassword, type PasswordHash } from '#proto/password-hash';

export interface BasicAuthCheckerOptions {
  /** Successful verifications remembered (default 10 000). */
  maxPositive?: number;
  /** Failed verifications remembered (default 10 000). */
  maxNegative?: number;
  /** scrypt runs in flight or queued at most (default 32); beyond, a fresh check is BUSY. */
  maxPending?: number;
  /** Of those, at most this many for one user name (default 8; unknown names share one count). */
  maxPendingPerUser?: number;
}

/** The verdict of a check that was not made: too many scrypt runs pending (answer 503, not 401). */
export const BUSY = Symbol('basic_auth check busy');

export type BasicAuthVerdict = string | null | typeof BUSY | Promise<string | null>;

export interface BasicAuthChecker {
  /**
   * The username when `authorization` is `Basic <base64(user:password)>` of one of `users`, else null: at
   * once when the verdict is known (malformed or cached), BUSY when too many checks are pending, a
   * promise when scrypt must run.
   */
  check(users: ReadonlyMap<string, PasswordHash>, authorization: string | undefined): BasicAuthVerdict;
}

/** The credentials of an `Authorization: Basic …` value, or null when it is not one. */
export function parseBasicAuthorization(value: string | undefined): { username: string; password: string } | null {
  // base64 of the longest credentials we accept (username ≤ 128, password ≤ 256 UTF-16 units ≤ 768 bytes).
  if (value === undefined || value.length > 1400) return null;
  const m = /^Basic +([A-Za-z0-9+/]+={0,2})$/i.exec(value.trim());
  if (!m) return null;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0) return null;
  return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
}

export function createBasicAuthChecker(options: BasicAuthCheckerOptions = {}): BasicAuthChecker {
  const positive = new LRUCache<string, true>({ max: options.maxPositive ?? 10_000 });
  const negative = new LRUCache<string, true>({ max: options.maxNegative ?? 10_000 });
  const maxPending = options.maxPending ?? 32;
  const maxPendingPerUser = options.maxPendingPerUser ?? 8;
  /** Pending scrypt runs per known user name; UNKNOWN_USER counts every unknown one. */
  const pendingOf = new Map<string, number>();
  const UNKNOWN_USER = '\0unknown';
  const cacheKeySecret = randomBytes(32);
  // Never matches: no password derives a random key.
  const unknownUser: PasswordHash = { ...SCRYPT_PARAMS, salt: randomBytes(16), key: randomBytes(32) };
  let pending = 0;

  /**
   * The cache key of `password` for `username` with `hash`: SHA-256 (one-shot) of the secret and
   * the stored hash (fixed length, base64, kept per stored hash), then username and password after
   * NUL separators (neither a username nor a Basic user-id holds NUL or ':'), so distinct inputs
   * never share a key. Not an HMAC: its object would be most of basic_auth's cached-verdict cost. What HMAC adds over a
   * secret-prefixed hash is resistance to length extension, which needs a known digest: these
   * keys never leave the process.
   */
  const prefixes = new WeakMap<PasswordHash, string>();
  function cacheKey(hash: PasswordHash, username: string, password: string): string {
    let prefix = prefixes.get(hash);
    if (prefix === undefined) {
      prefix = Buffer.concat([cacheKeySecret, hash.salt, hash.key]).toString('base64');
      prefixes.set(hash, prefix);
    }
    return sha('sha256', `${prefix}\0${username}\0${password}`, 'base64');
  }

  async function verify(username: string, password: string, hash: PasswordHash, known: boolean, key: string): Promise<string | null> {
    const counted = known ? username : UNKNOWN_USER;
    pending++;
    pendingOf.set(counted, (pendingOf.get(counted) ?? 0) + 1);
    let ok: boolean;
    try {
      ok = (await verifyPassword(password, hash)) && known;
    } finally {
      pending--;
      const left = pendingOf.get(counted)! - 1;
      if (left === 0) pendingOf.delete(counted);
      else pendingOf.set(counted, left);
    }
    (ok ? positive : negative).set(key, true);
    return ok ? username : null;
  }

  return {
    // Not async: a cached verdict (every request of a client after its first) is returned as a
    // plain value, so the plugin's hook stays synchronous: an async one would cost three promises
    // and their microtask hops per request.
    check(users, authorization) {
      const credentials = parseBasicAuthorization(authorization);
      if (!credentials || credentials.password.length === 0 || credentials.password.length > MAX_PASSWORD_LENGTH) return null;
      const { username, password } = credentials;
      const stored = users.get(username);
      const hash = stored ?? unknownUser;
      const key = cacheKey(hash, username, password);
      if (stored && positive.has(key)) return username;
      if (negative.has(key)) return null;
      if (pending >= maxPending || (pendingOf.get(stored ? username : UNKNOWN_USER) ?? 0) >= maxPendingPerUser) return BUSY;
      return verify(username, password, hash, stored !== undefined, key);
    },
  };
}
