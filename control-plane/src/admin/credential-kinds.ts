/**
 * The global credential kinds of the admin API: basic_auth users (Janus's `/credentials/basic_auth`,
 * `{username, password, groups?}` in) and key_auth credentials (`/credentials/key_auth`, `{username,
 * key, groups?}` in), both `{username, groups?}` out (groups: the consumer's, which the acl plugin
 * judges). The secret is checked (field-named 400s) and hashed before the write reaches the store,
 * so neither the store, a snapshot nor any response ever holds it; a hash in a body is ignored
 * (only the gateway makes hashes). A key_auth create without a key gets a generated
 * one, shown in that response only.
 */
import type { z } from 'zod';
import { GatehouseError } from '#proto/errors';
import type { BasicAuthCredential, KeyAuthCredential } from '#proto/definition/index';
import { passwordSchema } from '#proto/definition/basic-auth-credential-schema';
import { apiKeySchema } from '#proto/definition/key-auth-credential-schema';
import { parseOrThrow } from '#proto/definition/field-path';
import type { KeyObject } from 'node:crypto';
import { generateApiKey, hashApiKey, importHashKey } from '#proto/api-key';
import { hashPassword } from '#proto/password-hash';
import { storedBasicAuthCredentials, storedKeyAuthCredentials, type StoredKind } from '../store/definition-kinds.js';
import type { DefinitionKind, Prepared } from './definition-writes.js';

/** What the admin API shows of a credential: never the secret nor its hash. */
export interface CredentialView {
  username: string;
  groups?: string[];
}

interface SecretRules {
  /** The member of a write that holds the secret, and the stored member that holds its hash. */
  field: 'password' | 'key';
  hashField: 'password_hash' | 'key_hash';
  schema: z.ZodType<string>;
  hash(secret: string): Promise<string> | string;
  /** Makes a secret when a create gives none (revealed in that response only); absent: the secret is required. */
  generate?(): string;
}

function credentialKind<T extends { username: string; groups?: string[] }>(stored: StoredKind<T>, rules: SecretRules): DefinitionKind<T> {
  const { field, hashField } = rules;
  const hashed = async (rest: Record<string, unknown>, secret: string): Promise<Record<string, unknown>> => ({
    ...rest,
    [hashField]: await rules.hash(secret),
  });
  async function prepare(body: Record<string, unknown>, op: 'create' | 'update'): Promise<Prepared> {
    const { [field]: secret, [hashField]: _ignored, ...rest } = body;
    if (secret === undefined) {
      if (op === 'update') return { body: rest };
      if (!rules.generate) throw new GatehouseError('VALIDATION_FAILED', `${field} is required`, { field });
      const generated = rules.generate();
      return { body: await hashed(rest, generated), reveal: { [field]: generated } };
    }
    if (secret === null) throw new GatehouseError('VALIDATION_FAILED', `${field} cannot be removed`, { field });
    return { body: await hashed(rest, parseOrThrow(rules.schema, secret, [field])) };
  }
  return { ...stored, prepare, present: ({ username, groups }): CredentialView => ({ username, ...(groups && { groups }) }) };
}

export const basicAuthCredentialKind = credentialKind<BasicAuthCredential>(storedBasicAuthCredentials, {
  field: 'password',
  hashField: 'password_hash',
  schema: passwordSchema,
  hash: hashPassword,
});

/** The installation key every key_auth write hashes with (main.ts sets it at start: KEY_AUTH_HASH_KEY or DATA_DIR's). */
let keyAuthHashKey: KeyObject | null = null;

export function useKeyAuthHashKey(text: string): void {
  keyAuthHashKey = importHashKey(text);
}

export const keyAuthCredentialKind = credentialKind<KeyAuthCredential>(storedKeyAuthCredentials, {
  field: 'key',
  hashField: 'key_hash',
  schema: apiKeySchema,
  hash(key) {
    if (!keyAuthHashKey) throw new Error('no key_auth hash key: useKeyAuthHashKey was not called');
    return hashApiKey(key, keyAuthHashKey);
  },
  generate: generateApiKey,
});
