/**
 * What the global credential kinds (basic_auth users, key_auth credentials) share: the username
 * that names one (in admin URL paths, the snapshot and a data plane's maps) and the stored form,
 * `{username, <secret's hash>, groups?}`, where the secret itself exists only in the admin request that
 * sets it and `groups` (the consumer's groups, which the acl plugin authorizes by) only when given.
 */
import { z } from 'zod';
import { parseOrThrow } from './field-path.js';
import { notDotSegment } from './name.js';

const USERNAME = /^[A-Za-z0-9._@+-]{1,128}$/;

/** Usernames appear in admin URL paths and never hold `:` (RFC 7617 splits user-pass on the first one). */
export const usernameSchema = notDotSegment(z.string().min(1, 'is required').regex(USERNAME, 'must be 1-128 characters of A-Z a-z 0-9 . _ @ + -'));

export const MAX_GROUP_LENGTH = 64;
const GROUP = new RegExp(`^[a-z0-9._-]{1,${MAX_GROUP_LENGTH}}$`);

/** A consumer group's name (a credential's `groups`, the acl plugin's lists): stored lower-cased, compared as stored. */
export const groupNameSchema = z
  .string()
  .transform((name) => name.toLowerCase())
  .pipe(z.string().regex(GROUP, `must be 1-${MAX_GROUP_LENGTH} characters of a-z 0-9 . _ - (any case)`));

/** A list of group names (non-empty unless `mayBeEmpty`), stored deduplicated and sorted (so the same groups are one stored form). */
export function groupListSchema(max: number, mayBeEmpty = false) {
  const list = z.array(groupNameSchema).max(max, `must have at most ${max} groups`);
  return (mayBeEmpty ? list : list.min(1, 'must not be empty')).transform((groups) => [...new Set(groups)].sort());
}

/** At most this many groups per credential: X-Consumer-Groups carries them all. */
export const MAX_CREDENTIAL_GROUPS = 32;

/** The stored form of a credential kind (and its custom resource's spec): the username, the named hash and the groups, if any. */
export function storedCredentialSchema<F extends string>(hashField: F, hash: z.ZodType<string>) {
  return z.object({ username: usernameSchema, [hashField]: hash, groups: groupListSchema(MAX_CREDENTIAL_GROUPS).optional() } as {
    username: typeof usernameSchema;
    groups: z.ZodOptional<ReturnType<typeof groupListSchema>>;
  } & Record<F, z.ZodType<string>>);
}

/** The parser of a stored credential kind. */
export function credentialParser<T>(schema: z.ZodType): (input: unknown) => T {
  return (input) => parseOrThrow(schema, input) as T;
}
