/**
 * basic_auth users (Janus's `/credentials/basic_auth`): global, checked by every API whose
 * basic_auth plugin is enabled. Stored form `{username, password_hash}`: the plaintext password
 * exists only in the admin request that sets it (passwordSchema) and is hashed before it reaches
 * the store (proto/src/password-hash.ts); nothing ever returns the hash.
 */
import { z } from 'zod';
import { PASSWORD_HASH_PATTERN, parsePasswordHash } from '../password-hash.js';
import { parseOrThrow } from './field-path.js';
import { notDotSegment } from './name.js';
import type { BasicAuthCredential } from './types.js';

const USERNAME = /^[A-Za-z0-9._@+-]{1,128}$/;

/** Usernames appear in admin URL paths and never hold `:` (RFC 7617 splits user-pass on the first one). */
export const usernameSchema = notDotSegment(z.string().min(1, 'is required').regex(USERNAME, 'must be 1-128 characters of A-Z a-z 0-9 . _ @ + -'));

export const MIN_PASSWORD_LENGTH = 8;
/** Bounds the work a write (and a data plane's decoding) does on one password. */
export const MAX_PASSWORD_LENGTH = 256;

export const passwordSchema = z
  .string()
  .min(MIN_PASSWORD_LENGTH, `must be at least ${MIN_PASSWORD_LENGTH} characters`)
  .max(MAX_PASSWORD_LENGTH, `must be at most ${MAX_PASSWORD_LENGTH} characters`);

/** The stored form (and a BasicAuthCredential custom resource's spec). */
export const credentialSchema = z.object({
  username: usernameSchema,
  password_hash: z
    .string()
    .regex(PASSWORD_HASH_PATTERN, 'must be an scrypt hash "scrypt$N$r$p$salt$key"')
    .refine((h) => parsePasswordHash(h) !== null, 'has scrypt parameters out of bounds'),
});

export function parseBasicAuthCredential(input: unknown): BasicAuthCredential {
  return parseOrThrow(credentialSchema, input);
}
