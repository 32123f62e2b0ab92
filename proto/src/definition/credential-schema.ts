/**
 * What the global credential kinds (basic_auth users, key_auth credentials) share: the username
 * that names one (in admin URL paths, the snapshot and a data plane's maps) and the stored form,
 * `{username, <secret's hash>}`, where the secret itself exists only in the admin request that sets it.
 */
import { z } from 'zod';
import { parseOrThrow } from './field-path.js';
import { notDotSegment } from './name.js';

const USERNAME = /^[A-Za-z0-9._@+-]{1,128}$/;

/** Usernames appear in admin URL paths and never hold `:` (RFC 7617 splits user-pass on the first one). */
export const usernameSchema = notDotSegment(z.string().min(1, 'is required').regex(USERNAME, 'must be 1-128 characters of A-Z a-z 0-9 . _ @ + -'));

/** The stored form of a credential kind (and its custom resource's spec): the username and the named hash. */
export function storedCredentialSchema<F extends string>(hashField: F, hash: z.ZodType<string>) {
  return z.object({ username: usernameSchema, [hashField]: hash } as { username: typeof usernameSchema } & Record<F, z.ZodType<string>>);
}

/** The parser of a stored credential kind. */
export function credentialParser<T>(schema: z.ZodType): (input: unknown) => T {
  return (input) => parseOrThrow(schema, input) as T;
}
