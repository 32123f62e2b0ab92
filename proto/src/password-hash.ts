/**
 * Password hashes of basic_auth users: scrypt (RFC 7914, node:crypto) with a random salt, the
 * parameters stored with the hash so they can be raised later without invalidating old hashes:
 *
 *   scrypt$<N>$<r>$<p>$<salt, base64url>$<derived key, base64url>
 *
 * The control plane hashes (admin writes); data planes verify. Both run scrypt asynchronously, on
 * libuv's thread pool, never on the event loop. Stored parameters are bounded (N a power of two up
 * to 2^17, r ≤ 16, p ≤ 16, at most 64 MiB of memory and N·r·p ≤ 2^20 per verification), so a hash from a store file,
 * a custom resource or a snapshot cannot make a data plane spend unbounded memory or time.
 */
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

export interface PasswordHash {
  N: number;
  r: number;
  p: number;
  salt: Buffer;
  key: Buffer;
}

/**
 * What new hashes use: the scrypt paper's parameters for interactive logins (16 MiB, a few tens of
 * ms per verification), which keep a data plane's thread pool usable under load.
 */
export const SCRYPT_PARAMS = { N: 2 ** 14, r: 8, p: 1 } as const;
const SALT_BYTES = 16;
const KEY_BYTES = 32;
const MAX_N = 2 ** 17;
const MAX_R = 16;
const MAX_P = 16;
const MAX_MEMORY = 64 * 1024 * 1024;
/** N·r·p, scrypt's time cost: at most that of OWASP's N=2^16, r=8, p=2 (which fits MAX_MEMORY; their N=2^17 needs 128 MiB). */
const MAX_WORK = 2 ** 20;

/** The shape of a stored hash (the CRD's pattern too); bounds are checked by parsePasswordHash. */
export const PASSWORD_HASH_PATTERN = /^scrypt\$[0-9]{1,7}\$[0-9]{1,2}\$[0-9]{1,2}\$[A-Za-z0-9_-]{16,88}\$[A-Za-z0-9_-]{43,88}$/;

function memoryOf(N: number, r: number, p: number): number {
  return 128 * N * r + 128 * r * p;
}

function scryptAsync(password: string, salt: Buffer, keyLength: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(password, salt, keyLength, options, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

/** The stored form, or null when it is not one this gateway accepts (shape or bounds). */
export function parsePasswordHash(text: string): PasswordHash | null {
  if (!PASSWORD_HASH_PATTERN.test(text)) return null;
  const [, n, r, p, salt, key] = text.split('$');
  const parsed = { N: Number(n), r: Number(r), p: Number(p), salt: Buffer.from(salt, 'base64url'), key: Buffer.from(key, 'base64url') };
  const powerOfTwo = parsed.N >= 2 && (parsed.N & (parsed.N - 1)) === 0;
  if (!powerOfTwo || parsed.N > MAX_N || parsed.r < 1 || parsed.r > MAX_R || parsed.p < 1 || parsed.p > MAX_P) return null;
  if (
    128 * parsed.N * parsed.r > MAX_MEMORY ||
    parsed.N * parsed.r * parsed.p > MAX_WORK ||
    parsed.salt.length < 12 ||
    parsed.key.length < 32 ||
    parsed.key.length > 64
  )
    return null;
  return parsed;
}

/** A new hash of `password` with a fresh random salt. */
export async function hashPassword(password: string): Promise<string> {
  const { N, r, p } = SCRYPT_PARAMS;
  const salt = randomBytes(SALT_BYTES);
  const key = await scryptAsync(password, salt, KEY_BYTES, { N, r, p, maxmem: memoryOf(N, r, p) + 1024 * 1024 });
  return ['scrypt', N, r, p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** True when `password` derives `hash`'s key; the keys are compared in constant time. */
export async function verifyPassword(password: string, hash: PasswordHash): Promise<boolean> {
  const { N, r, p, salt, key } = hash;
  const derived = await scryptAsync(password, salt, key.length, { N, r, p, maxmem: memoryOf(N, r, p) + 1024 * 1024 });
  return timingSafeEqual(derived, key);
}
