/**
 * API keys of key_auth credentials: made by the control plane (32 random bytes, base64url) when a
 * write gives none, and stored only as a keyed digest, `hmac-sha256$<HMAC-SHA256(installation key, key), base64url>`:
 *
 * - Keyed, so a leaked store, export or custom resource alone does not let anyone test guesses of a
 *   key: that needs the installation key too (KEY_AUTH_HASH_KEY, or the one the control plane made in
 *   DATA_DIR), which reaches data planes only in their authenticated snapshot stream, as JWT secrets do.
 * - A fast MAC is right here, unlike for passwords (password-hash.ts uses scrypt): a generated key
 *   holds 256 bits of entropy and a user-given one at least MIN_API_KEY_LENGTH characters, and a data
 *   plane computes it per request.
 * - Deterministic (no salt), so the data plane finds the owner with one Map lookup on the presented
 *   key's digest, and two credentials with the same key are seen at write time.
 * - `sha256$<SHA-256(key)>`, the earlier unkeyed form, is still verified (re-hashing needs the keys,
 *   which are not stored); every write through the admin API stores the keyed form.
 */
import { createHmac, createSecretKey, hash, randomBytes, type KeyObject } from 'node:crypto';

/** A user-given key must be at least this long (a generated one has 43 characters). */
export const MIN_API_KEY_LENGTH = 16;
/** Bounds what a request header or query parameter makes a data plane hash. */
export const MAX_API_KEY_LENGTH = 256;
/** Printable ASCII without space: a key travels in a header value and a query parameter. */
export const API_KEY_PATTERN = /^[\x21-\x7e]+$/;

export const HMAC_PREFIX = 'hmac-sha256$';
export const LEGACY_PREFIX = 'sha256$';

/** The stored forms (and the CRD's pattern): 32 bytes of HMAC-SHA256 or (legacy) SHA-256 in base64url, no padding. */
export const API_KEY_HASH_PATTERN = /^(hmac-sha256|sha256)\$[A-Za-z0-9_-]{43}$/;

/** The installation key's least length in bytes (RFC 2104: no shorter than the hash's output). */
export const MIN_HASH_KEY_BYTES = 32;
/** Bounds what a snapshot makes a data plane import. */
const MAX_HASH_KEY_BYTES = 1024;

/** A new random key: 32 bytes from the CSPRNG, base64url (43 characters). */
export function generateApiKey(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The installation key from its text form (KEY_AUTH_HASH_KEY, the generated file, a snapshot's
 * `key_auth_hash_key`): the bytes of the text as given, at least MIN_HASH_KEY_BYTES of them. Imported
 * once, so each request's HMAC reuses the KeyObject.
 */
export function importHashKey(text: string): KeyObject {
  const bytes = Buffer.byteLength(text);
  if (bytes < MIN_HASH_KEY_BYTES || bytes > MAX_HASH_KEY_BYTES) {
    throw new Error(`the key_auth hash key must be ${MIN_HASH_KEY_BYTES} to ${MAX_HASH_KEY_BYTES} bytes, got ${bytes}`);
  }
  return createSecretKey(Buffer.from(text));
}

/** The stored form of `key` under the installation key (a data plane's per-request lookup key too). */
export function hashApiKey(key: string, hashKey: KeyObject): string {
  return HMAC_PREFIX + createHmac('sha256', hashKey).update(key).digest('base64url');
}

/** The earlier unkeyed form, still verified: one-shot crypto.hash. */
export function legacyHashApiKey(key: string): string {
  return LEGACY_PREFIX + hash('sha256', key, 'base64url');
}

export const isLegacyApiKeyHash = (keyHash: string): boolean => keyHash.startsWith(LEGACY_PREFIX);
