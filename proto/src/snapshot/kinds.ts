/**
 * One codec per definition kind (apis, oauth_servers and the credential kinds): where its list lives in
 * Definitions, how a definition is named, encoded and decoded. Snapshots, hashes and deltas all go over
 * KIND_KEYS in this one order.
 */
import { parseApiDefinition, parseBasicAuthCredential, parseKeyAuthCredential, parseOAuthServer } from '../definition/index.js';
import { isPlainObject } from '../definition/field-path.js';
import type * as wire from '../wire.js';
import type { GatewayListenerTls } from './gateway-tls.js';
import type { ApiDefinition, BasicAuthCredential, Definitions, KeyAuthCredential, OAuthServerDefinition } from '../definition/types.js';
import {
  apiFromMessage,
  apiMessage,
  apiToMessage,
  decodeAll,
  memoMessage,
  oauthServerMessage,
  serverFromMessage,
  serverToMessage,
  type DefinitionList,
  type SnapshotMessage,
} from './messages.js';

/** A version's content as both sides hold it. */
export interface SnapshotContent {
  version: number;
  /** contentHash (hash.ts): the definitions' hash, with the key below when there is one. */
  hash: string;
  defs: Definitions;
  /** The key_auth installation key (api-key.ts): present exactly when defs has key_auth credentials. */
  keyAuthHashKey?: string;
  /** The Gateway API HTTPS listeners, with their keys (gateway-tls.ts): present exactly when there are any. */
  gatewayTls?: readonly GatewayListenerTls[];
}

/** What a delta changed, per definition (compile/incremental.ts DefinitionChange): `def` absent = removed. */
export interface ContentChange {
  kind: 'api' | 'oauth-server' | 'basic-auth-credential' | 'key-auth-credential';
  name: string;
  def?: object;
}

export interface KindCodec<D extends object> {
  kind: ContentChange['kind'];
  /** Left out of a snapshot, and of the decoded Definitions, when there are none. */
  optional?: boolean;
  /** Its line is left out of the content hash when there are none (a kind added after the hash was defined). */
  unhashedWhenEmpty?: boolean;
  /** The Definitions member holding the list. */
  field: keyof Definitions;
  list(defs: Definitions): readonly D[];
  withList(defs: Definitions, list: D[]): Definitions;
  nameOf(def: D): string;
  /** The memoised message (what goes on the wire). */
  toMessage(def: D): object;
  /** A fresh message (only hashed, not kept). */
  toRawMessage(def: D): object;
  /** Messages → validated definitions, yielding after every `turn` of them; throws with the message's index. */
  decode(items: unknown, decode?: SnapshotMessage['decodeDefinition'], turn?: number): Generator<void, D[]>;
}

/**
 * A global credential kind: `{username, <hash field>, groups?}`, the same on the wire but for `groups`: only
 * when set in the canonical message (credentials without keep their hash), and the wire's `[]` back to absent.
 */
function credentialCodec<D extends { username: string; groups?: string[] }>(
  kind: ContentChange['kind'],
  list: DefinitionList,
  field: 'basicAuthCredentials' | 'keyAuthCredentials',
  secretOf: (c: D) => object,
  parse: (raw: unknown) => D,
): KindCodec<D> {
  const toMessage = (c: D): object => ({ username: c.username, ...secretOf(c), ...(c.groups && { groups: [...c.groups] }) });
  const fromMessage = (m: unknown): unknown => {
    if (!isPlainObject(m) || !Array.isArray(m.groups) || m.groups.length > 0) return m;
    const { groups: _none, ...rest } = m;
    return rest;
  };
  return {
    kind,
    optional: true,
    field,
    list: (defs) => (defs[field] ?? []) as unknown as D[],
    withList: (defs, items) => ({ ...defs, [field]: items }),
    nameOf: (c) => c.username,
    toMessage: (c) => memoMessage(c, toMessage),
    toRawMessage: toMessage,
    decode: (items, decode, turn) => decodeAll(items, list, fromMessage, parse, (c) => c.username, decode, turn),
  };
}

export const KIND_CODECS = {
  apis: {
    kind: 'api',
    field: 'apis',
    list: (defs) => defs.apis,
    withList: (defs, apis) => ({ ...defs, apis }),
    nameOf: (api) => api.name,
    toMessage: apiMessage,
    toRawMessage: apiToMessage,
    decode: (items, decode, turn) => decodeAll(items, 'apis', apiFromMessage, parseApiDefinition, undefined, decode, turn),
  } satisfies KindCodec<ApiDefinition>,
  oauth_servers: {
    kind: 'oauth-server',
    field: 'oauthServers',
    list: (defs) => defs.oauthServers,
    withList: (defs, oauthServers) => ({ ...defs, oauthServers }),
    nameOf: (server) => server.name,
    toMessage: oauthServerMessage,
    toRawMessage: serverToMessage,
    decode: (items, decode, turn) => decodeAll(items, 'oauth_servers', serverFromMessage, parseOAuthServer, undefined, decode, turn),
  } satisfies KindCodec<OAuthServerDefinition>,
  basic_auth_credentials: credentialCodec<BasicAuthCredential>(
    'basic-auth-credential',
    'basic_auth_credentials',
    'basicAuthCredentials',
    (c): Pick<wire.BasicAuthCredential, 'password_hash'> => ({ password_hash: c.password_hash }),
    parseBasicAuthCredential,
  ),
  key_auth_credentials: {
    ...credentialCodec<KeyAuthCredential>(
      'key-auth-credential',
      'key_auth_credentials',
      'keyAuthCredentials',
      (c): Pick<wire.KeyAuthCredential, 'key_hash'> => ({ key_hash: c.key_hash }),
      parseKeyAuthCredential,
    ),
    unhashedWhenEmpty: true,
  },
};

export type KindKey = keyof typeof KIND_CODECS;
export const KIND_KEYS = Object.keys(KIND_CODECS) as KindKey[];
export const KIND_INDEX = Object.fromEntries(KIND_KEYS.map((key, i) => [KIND_CODECS[key].kind, i])) as Record<ContentChange['kind'], number>;
