/**
 * The kinds of definition the store holds, described once: how each is listed, parsed and named,
 * and the errors its name gives. The admin writes (admin/definition-writes.ts) add their write
 * rules to these; the Kubernetes store adds the custom resource each is kept in.
 */
import type { ErrorCode } from '#proto/errors';
import {
  parseApiDefinition,
  parseBasicAuthCredential,
  parseKeyAuthCredential,
  parseOAuthServer,
  type ApiDefinition,
  type BasicAuthCredential,
  type Definitions,
  type KeyAuthCredential,
  type OAuthServerDefinition,
} from '#proto/definition/index';
import { MIN_HMAC_KEY_BYTES, shortHmacKeysOf, type DefinitionKindName } from '#proto/compile/index';
import { fieldError } from '#proto/definition/field-path';
import { refuseRedacted } from '#proto/definition/secret-fields';

export interface ErrorReply {
  code: ErrorCode;
  message: string;
}

export interface StoredKind<T> {
  list(defs: Definitions): T[];
  withList(defs: Definitions, items: T[]): Definitions;
  /** Parses and normalises; a REDACTED secret (secret-fields.ts) is refused here, wherever the definition comes from. */
  parse(raw: unknown): T;
  /** The member that names a definition (unique, in the admin path, never renamed): `name`, or `username`. */
  nameField: string;
  nameOf(item: T): string;
  notFound: ErrorReply;
  nameTaken: ErrorReply;
  /** How compileDefinitions names this kind in its verdicts. */
  compileKind: DefinitionKindName;
}

export const storedApis: StoredKind<ApiDefinition> = {
  list: (defs) => defs.apis,
  withList: (defs, apis) => ({ ...defs, apis }),
  parse: (raw) => refuseRedacted('api', parseApiDefinition(raw)),
  nameField: 'name',
  nameOf: (api) => api.name,
  notFound: { code: 'API_NOT_FOUND', message: 'api definition not found' },
  nameTaken: { code: 'API_NAME_TAKEN', message: 'api name is already registered' },
  compileKind: 'api',
};

export const storedOAuthServers: StoredKind<OAuthServerDefinition> = {
  list: (defs) => defs.oauthServers,
  withList: (defs, oauthServers) => ({ ...defs, oauthServers }),
  parse: (raw) => refuseRedacted('oauth-server', parseOAuthServer(raw)),
  nameField: 'name',
  nameOf: (server) => server.name,
  notFound: { code: 'OAUTH_SERVER_NOT_FOUND', message: 'oauth server not found' },
  nameTaken: { code: 'OAUTH_SERVER_NAME_TAKEN', message: 'oauth server name is already registered' },
  compileKind: 'oauth-server',
};

/** A global credential kind: named by `username`, listed in an optional member of Definitions. */
function storedCredentials<T extends { username: string }>(
  member: 'basicAuthCredentials' | 'keyAuthCredentials',
  parse: (raw: unknown) => T,
  errors: Pick<StoredKind<T>, 'notFound' | 'nameTaken' | 'compileKind'>,
): StoredKind<T> {
  return {
    list: (defs) => (defs[member] ?? []) as unknown as T[],
    withList: (defs, items) => ({ ...defs, [member]: items }),
    parse: (raw) => refuseRedacted(errors.compileKind, parse(raw)),
    nameField: 'username',
    nameOf: (credential) => credential.username,
    ...errors,
  };
}

export const storedBasicAuthCredentials = storedCredentials<BasicAuthCredential>('basicAuthCredentials', parseBasicAuthCredential, {
  notFound: { code: 'BASIC_AUTH_USER_NOT_FOUND', message: 'user not found' },
  nameTaken: { code: 'BASIC_AUTH_USER_TAKEN', message: 'user already exists' },
  compileKind: 'basic-auth-credential',
});

export const storedKeyAuthCredentials = storedCredentials<KeyAuthCredential>('keyAuthCredentials', parseKeyAuthCredential, {
  notFound: { code: 'KEY_AUTH_CREDENTIAL_NOT_FOUND', message: 'key_auth credential not found' },
  nameTaken: { code: 'KEY_AUTH_CREDENTIAL_TAKEN', message: 'key_auth credential already exists' },
  compileKind: 'key-auth-credential',
});

let allowShortHmacKeys = false;

/** Set once at start (main.ts): ALLOW_SHORT_HMAC_KEYS=true accepts HS keys shorter than 32 bytes in admin writes and custom resources. */
export function acceptShortHmacKeys(allow: boolean): void {
  allowShortHmacKeys = allow;
}

/**
 * Throws when `server` holds an HS key shorter than 32 bytes (RFC 7518 §3.2), unless ALLOW_SHORT_HMAC_KEYS.
 * Admin writes and OAuthServer custom resources are held to it (a stored file is not: it only warns at start);
 * data planes compile what their control plane accepted.
 */
export function checkHmacKeyLengths(server: OAuthServerDefinition): void {
  if (allowShortHmacKeys) return;
  const [field] = shortHmacKeysOf(server);
  if (field === undefined) return;
  throw fieldError(
    field,
    `is shorter than ${MIN_HMAC_KEY_BYTES} bytes: an HS256/384/512 key needs at least ${MIN_HMAC_KEY_BYTES} (RFC 7518 §3.2), e.g. openssl rand -base64 32; ` +
      'ALLOW_SHORT_HMAC_KEYS=true on the control plane accepts shorter ones during a migration',
  );
}
