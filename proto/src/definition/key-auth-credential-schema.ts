/**
 * key_auth credentials (admin `/credentials/key_auth`): global, checked by every API whose key_auth
 * plugin is enabled. Stored form `{username, key_hash}`: the key itself exists only in the admin
 * request that sets it (or the response that reveals a generated one, once) and is hashed before it
 * reaches the store (proto/src/api-key.ts: keyed with the installation key); nothing ever returns the hash.
 */
import { z } from 'zod';
import { API_KEY_HASH_PATTERN, API_KEY_PATTERN, MAX_API_KEY_LENGTH, MIN_API_KEY_LENGTH } from '../api-key.js';
import { credentialParser, storedCredentialSchema } from './credential-schema.js';
import type { KeyAuthCredential } from './types.js';

/** A key a write gives (a generated one always passes). */
export const apiKeySchema = z
  .string()
  .min(MIN_API_KEY_LENGTH, `must be at least ${MIN_API_KEY_LENGTH} characters`)
  .max(MAX_API_KEY_LENGTH, `must be at most ${MAX_API_KEY_LENGTH} characters`)
  .regex(API_KEY_PATTERN, 'must be printable ASCII without spaces');

const KEY_HASH_FORM = 'must be a keyed digest "hmac-sha256$<43 base64url characters>" (or the earlier unkeyed "sha256$<43 base64url characters>")';

/** The stored form (and a KeyAuthCredential custom resource's spec). */
export const keyAuthCredentialSchema = storedCredentialSchema('key_hash', z.string().regex(API_KEY_HASH_PATTERN, KEY_HASH_FORM));

export const parseKeyAuthCredential = credentialParser<KeyAuthCredential>(keyAuthCredentialSchema);
