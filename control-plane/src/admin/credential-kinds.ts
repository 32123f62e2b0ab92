/**
 * basic_auth users as a definition kind of the admin API (Janus's `/credentials/basic_auth`):
 * `{username, password}` in, `{username}` out. The password is checked (field-named 400s) and
 * hashed with scrypt before the write reaches the store, so neither the store, a snapshot nor any
 * response ever holds it; a `password_hash` in a body is ignored (only the gateway makes hashes).
 */
import { GatehouseError } from '#proto/errors';
import type { BasicAuthCredential } from '#proto/definition/index';
import { passwordSchema } from '#proto/definition/basic-auth-credential-schema';
import { parseOrThrow } from '#proto/definition/field-path';
import { hashPassword } from '#proto/password-hash';
import { storedBasicAuthCredentials } from '../store/definition-kinds.js';
import type { DefinitionKind } from './definition-writes.js';

/** What the admin API shows of a user: never the password nor its hash. */
export interface BasicAuthUserView {
  username: string;
}

async function prepare(body: Record<string, unknown>, op: 'create' | 'update'): Promise<Record<string, unknown>> {
  const { password, password_hash: _ignored, ...rest } = body;
  if (password === undefined) {
    if (op === 'create') throw new GatehouseError('VALIDATION_FAILED', 'password is required', { field: 'password' });
    return rest;
  }
  if (password === null) throw new GatehouseError('VALIDATION_FAILED', 'password cannot be removed', { field: 'password' });
  return { ...rest, password_hash: await hashPassword(parseOrThrow(passwordSchema, password, ['password'])) };
}

export const basicAuthCredentialKind: DefinitionKind<BasicAuthCredential> = {
  ...storedBasicAuthCredentials,
  prepare,
  present: (credential): BasicAuthUserView => ({ username: credential.username }),
};
