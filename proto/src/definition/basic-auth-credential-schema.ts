/**
 * basic_auth users (Janus's `/credentials/basic_auth`): global, checked by every API whose
 * basic_auth plugin is enabled. Stored form `{username, password_hash}`: the plaintext password
 * exists only in the admin request that sets it (passwordSchema) and is hashed before it reaches
 * the store (proto/src/password-hash.ts); nothing ever returns the hash.
 */
import { z } from 'zod';
import { PASSWORD_HASH_PATTERN, parsePasswordHash } from '../password-hash.js';
import { credentialParser, storedCredentialSchema } from './credential-schema.js';
import type { BasicAuthCredential } from './types.js';

export { usernameSchema } from './credential-schema.js';

export const MIN_PASSWORD_LENGTH = 8;
/** Bounds the work a write (and a data plane's decoding) does on one password. */
export const MAX_PASSWORD_LENGTH = 256;

export const passwordSchema = z
  .string()
  .min(MIN_PASSWORD_LENGTH, `must be at least ${MIN_PASSWORD_LENGTH} characters`)
  .max(MAX_PASSWORD_LENGTH, `must be at most ${MAX_PASSWORD_LENGTH} characters`);

/** The stored form (and a BasicAuthCredential custom resource's spec). */
export const credentialSchema = storedCredentialSchema(
  'password_hash',
  z
    .string()
    .regex(PASSWORD_HASH_PATTERN, 'must be an scrypt hash "scrypt$N$r$p$salt$key"')
    .refine((h) => parsePasswordHash(h) !== null, 'has scrypt parameters out of bounds'),
);

export const parseBasicAuthCredential = credentialParser<BasicAuthCredential>(credentialSchema);
