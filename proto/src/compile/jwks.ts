/**
 * The JWKS source of a jwt strategy: its settings compiled once per snapshot (where to fetch, the algs
 * allowed, times in ms, a key that changes with any of them), and a fetched JWK Set (RFC 7517 §5) turned
 * into verification keys. Pure; the data plane fetches (data-plane/src/auth/jwks-cache.ts).
 *
 * | JWK                                            | outcome                                     |
 * |------------------------------------------------|---------------------------------------------|
 * | `kty: "oct"`, or any private member (d, p, k…) | the whole set refused: a JWKS is public keys |
 * | `use` other than `sig`; `key_ops` without `verify` | ignored                                  |
 * | kty other than RSA / EC, EC curve other than P-256 / P-384 | ignored                          |
 * | `alg` not one of the algs its kty allows, or not in `algs` | ignored                          |
 * | RSA shorter than 2048 bits, key material not importable | ignored                             |
 * | RSA without `alg`                              | one key per RS* alg in `algs`                |
 * | EC without `alg`                               | ES256 (P-256) or ES384 (P-384), if in `algs` |
 */
import { createHash, createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { parseDuration, tryParseDurationUpTo } from '../duration.js';
import type { JwksAlg, JwksSettings, JwtAlg } from '../definition/types.js';
import { publicKeyProblem } from './jwt-keys.js';
import type { CompiledJwtKey } from './index.js';

export interface CompiledJwks {
  serverName: string;
  uri: string;
  origin: string;
  /** Path plus query. */
  path: string;
  algs: readonly JwksAlg[];
  cacheTtlMs: number;
  timeoutMs: number;
  cooldownMs: number;
  maxStaleMs: number;
  /** Same settings, same key: a fetched set is shared by the servers (and snapshots) that have them. */
  cacheKey: string;
}

/** The most keys a set may hold (IdPs publish a handful; rotation overlaps two or three). */
export const MAX_JWKS_KEYS = 100;
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const EC_ALG: Record<string, JwtAlg> = { 'P-256': 'ES256', 'P-384': 'ES384' };

export function compileJwks(serverName: string, s: JwksSettings): CompiledJwks {
  const url = new URL(s.jwks_uri);
  const compiled = {
    serverName,
    uri: url.href,
    origin: url.origin,
    path: `${url.pathname || '/'}${url.search}`,
    algs: Object.freeze([...s.algs]),
    cacheTtlMs: tryParseDurationUpTo(s.cache_ttl, Infinity)!,
    timeoutMs: parseDuration(s.timeout),
    cooldownMs: parseDuration(s.cooldown),
    maxStaleMs: tryParseDurationUpTo(s.max_stale, Infinity)!,
  };
  // Not the server name: two servers with one JWKS share one fetched set.
  const { serverName: _, ...shared } = compiled;
  const cacheKey = createHash('sha256').update(JSON.stringify(shared)).digest('base64url');
  return Object.freeze({ ...compiled, cacheKey });
}

/** A JWK left out of a set, and why (see the table above). */
export interface IgnoredJwk {
  /** `keys[i]`, its place in the set. */
  key: string;
  kid?: string;
  reason: string;
  /**
   * True when the key is meant for verifying one of the allowed algs but cannot be used (material not
   * importable, RSA too short, wrong curve): the IdP or the settings are wrong, not merely the key another's.
   */
  broken: boolean;
}

export interface ParsedJwks {
  keys: CompiledJwtKey[];
  ignored: IgnoredJwk[];
}

/** A JWK Set's verification keys for `algs`; throws an Error whose message says why the whole set is refused. */
export function parseJwks(body: unknown, algs: readonly JwtAlg[]): ParsedJwks {
  const set = body as { keys?: unknown } | null;
  if (typeof set !== 'object' || set === null || Array.isArray(set) || !Array.isArray(set.keys)) {
    throw new Error('JWKS is not a JSON object with a "keys" array');
  }
  if (set.keys.length > MAX_JWKS_KEYS) throw new Error(`JWKS holds more than ${MAX_JWKS_KEYS} keys`);
  const keys: CompiledJwtKey[] = [];
  const ignored: IgnoredJwk[] = [];
  set.keys.forEach((jwk: unknown, i) => {
    if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) throw new Error(`JWKS keys[${i}] is not a JSON object`);
    const k = jwk as Record<string, unknown>;
    if (k.kty === 'oct') throw new Error(`JWKS keys[${i}] is a symmetric (oct) key: a JWKS carries public keys only`);
    const secret = PRIVATE_MEMBERS.find((m) => Object.hasOwn(k, m));
    if (secret) throw new Error(`JWKS keys[${i}] holds private key material ("${secret}"): a JWKS carries public keys only`);
    const usable = verificationKeys(k, algs);
    if (Array.isArray(usable)) keys.push(...usable);
    else ignored.push({ key: `keys[${i}]`, ...(typeof k.kid === 'string' ? { kid: k.kid } : {}), ...usable });
  });
  return { keys, ignored };
}

type Refusal = Pick<IgnoredJwk, 'reason' | 'broken'>;

/** The JWK's verification keys, or why it has none. */
function verificationKeys(k: Record<string, unknown>, allowed: readonly JwtAlg[]): CompiledJwtKey[] | Refusal {
  const skip = (reason: string): Refusal => ({ reason, broken: false });
  if (k.use !== undefined && k.use !== 'sig') return skip(`use is ${JSON.stringify(k.use)}, not "sig"`);
  if (k.key_ops !== undefined && !(Array.isArray(k.key_ops) && k.key_ops.includes('verify'))) return skip('key_ops lacks "verify"');
  const forKty: JwtAlg[] = k.kty === 'RSA' ? ['RS256', 'RS384', 'RS512'] : k.kty === 'EC' && typeof k.crv === 'string' && EC_ALG[k.crv] ? [EC_ALG[k.crv]!] : [];
  if (forKty.length === 0)
    return skip(k.kty === 'EC' ? `EC curve ${JSON.stringify(k.crv)} is not P-256 or P-384` : `kty ${JSON.stringify(k.kty)} is not RSA or EC`);
  const algs = forKty.filter((a) => allowed.includes(a) && (k.alg === undefined || k.alg === a));
  if (algs.length === 0)
    return skip(k.alg === undefined ? `none of its algs (${forKty.join(', ')}) is allowed` : `alg ${JSON.stringify(k.alg)} is not allowed for this key`);
  let key: KeyObject;
  try {
    // Only the public members: nothing else of the JWK reaches the import.
    const jwk = k.kty === 'RSA' ? { kty: 'RSA', n: k.n, e: k.e } : { kty: 'EC', crv: k.crv, x: k.x, y: k.y };
    key = createPublicKey({ key: jwk as JsonWebKey, format: 'jwk' });
  } catch (err) {
    return { reason: `key material not importable: ${(err as Error).message}`, broken: true };
  }
  const problem = publicKeyProblem(key, algs[0]!);
  if (problem !== undefined) return { reason: problem, broken: true };
  const kid = typeof k.kid === 'string' ? k.kid : undefined;
  return algs.map((alg) => ({ alg, key, ...(kid === undefined ? {} : { kid }) }));
}
