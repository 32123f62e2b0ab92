/**
 * API keys of key_auth credentials: made by the control plane (32 random bytes, base64url) when a
 * write gives none, and stored only as a SHA-256 digest, `sha256$<digest, base64url>`:
 *
 * - A fast hash is right here, unlike for passwords (password-hash.ts uses scrypt): a generated key
 *   holds 256 bits of entropy and a user-given one at least MIN_API_KEY_LENGTH characters, so nobody
 *   can search the key space from a leaked digest, whatever the hash costs. A slow hash would only
 *   make every proxied request pay for it (a data plane hashes the presented key per request).
 * - The digest is deterministic (no salt), so the data plane finds the owner with one Map lookup on
 *   SHA-256(presented key), and two credentials with the same key are seen at write time.
 */
import { hash, randomBytes } from 'node:crypto';

/** A user-given key must be at least this long (a generated one has 43 characters). */
export const MIN_API_KEY_LENGTH = 16;
/** Bounds what a request header or query parameter makes a data plane hash. */
export const MAX_API_KEY_LENGTH = 256;
/** Printable ASCII without space: a key travels in a header value and a query parameter. */
export const API_KEY_PATTERN = /^[\x21-\x7e]+$/;

/** The stored form (and the CRD's pattern): 32 bytes of SHA-256 in base64url, no padding. */
export const API_KEY_HASH_PATTERN = /^sha256\$[A-Za-z0-9_-]{43}$/;

/** A new random key: 32 bytes from the CSPRNG, base64url (43 characters). */
export function generateApiKey(): string {
  return randomBytes(32).toString('base64url');
}

/** The stored form of `key` (a data plane's per-request lookup key too: one-shot crypto.hash, no hasher object). */
export function hashApiKey(key: string): string {
  return `sha256$${hash('sha256', key, 'base64url')}`;
}
