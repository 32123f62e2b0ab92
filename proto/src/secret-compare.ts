/**
 * Constant-time comparison of secrets (admin passwords, DP join tokens, token fingerprints).
 * Both sides are hashed first, so the digests have equal length and neither the length nor the
 * content of the expected secret leaks through timing (crypto.timingSafeEqual needs equal lengths).
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** SHA-256 of a secret: what is kept in memory and compared. */
export function secretDigest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** True when `given` (anything a client sent) is the secret whose digest is `expected`. */
export function sameSecret(given: unknown, expected: Buffer): boolean {
  return timingSafeEqual(secretDigest(typeof given === 'string' ? given : ''), expected);
}

/**
 * True when `given` equals any of the expected secrets. Every candidate is compared (no early
 * exit), so timing does not reveal which one matched or how many there are to try.
 */
export function matchesAnySecret(given: unknown, expected: readonly Buffer[]): boolean {
  let matched = false;
  for (const digest of expected) matched = sameSecret(given, digest) || matched;
  return matched;
}
