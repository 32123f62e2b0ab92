/**
 * The snapshot's global credentials (basic_auth users, key_auth keys, their groups) and OAuth servers as a table
 * holds them, and a delta's changes made to them: only the maps a delta touches are new, so a table built on a
 * delta that leaves them alone keeps its authorizer and pipelines (build.ts).
 */
import type { CompiledOAuthServer } from '#proto/compile/index';
import type { ConfigIndex } from '#proto/compile/incremental';
import type { PasswordHash } from '#proto/password-hash';
import type { ContentChange } from '#proto/snapshot/codec';
import type { BasicAuthChecker } from '../auth/basic-credentials.js';
import { apiKeyLookup } from '../auth/api-keys.js';
import type { StageDeps } from '../plugins/index.js';

/** The snapshot's global credentials and the stage dependencies that check them (rebuilt only when they change). */
export interface HeldCredentials extends Pick<StageDeps, 'basicAuth' | 'apiKeyOwner' | 'basicAuthGroups' | 'keyAuthGroups'> {
  /** basic_auth users: username → scrypt hash. */
  basicAuthUsers: ReadonlyMap<string, PasswordHash>;
  /** key_auth credentials: key_hash → username. */
  apiKeys: ReadonlyMap<string, string>;
  /** The snapshot's key_auth installation key (SnapshotContent.keyAuthHashKey). */
  keyAuthHashKey: string | undefined;
}

export type CredentialMaps = Omit<HeldCredentials, 'basicAuth' | 'apiKeyOwner' | 'keyAuthHashKey'>;

export function heldCredentials(
  { basicAuthUsers, apiKeys, basicAuthGroups, keyAuthGroups }: CredentialMaps,
  keyAuthHashKey: string | undefined,
  checker: BasicAuthChecker,
): HeldCredentials {
  return {
    basicAuthUsers,
    apiKeys,
    basicAuthGroups,
    keyAuthGroups,
    keyAuthHashKey,
    basicAuth: (authorization) => checker.check(basicAuthUsers, authorization),
    apiKeyOwner: apiKeyLookup(apiKeys, keyAuthHashKey),
  };
}

type IndexEntry = NonNullable<ReturnType<ConfigIndex['entries']['get']>>;

/** A delta's OAuth servers and credential maps: each the held one (the same object) when the delta left it alone. */
export interface PatchedMaps extends CredentialMaps {
  oauthServers: ReadonlyMap<string, CompiledOAuthServer>;
}

/** The held OAuth servers and credential maps with `changes` made (`before` and `after`: the index without and with them). */
export function patchedMaps(
  held: { oauthServers: ReadonlyMap<string, CompiledOAuthServer>; credentials: CredentialMaps },
  before: ConfigIndex,
  after: ConfigIndex,
  changes: readonly ContentChange[],
): PatchedMaps {
  /**
   * `map` with the changes of `kind` made: each changed definition's entry (keyed by `keyOf`) taken
   * out as it was, then put in as it is, in two passes, so that changes may swap keys among themselves.
   */
  const patched = <V>(
    map: ReadonlyMap<string, V>,
    kind: ContentChange['kind'],
    entryValue: (e: IndexEntry | undefined) => V | undefined,
    keyOf: (name: string, value: V) => string,
    valueFor: (name: string, value: V) => V,
  ) => {
    const mine = changes.filter((c) => c.kind === kind);
    if (mine.length === 0) return map;
    const next = new Map(map);
    for (const { name } of mine) {
      const was = entryValue(before.entries.get(`${kind}:${name}`));
      if (was !== undefined) next.delete(keyOf(name, was));
    }
    for (const { name } of mine) {
      const is = entryValue(after.entries.get(`${kind}:${name}`));
      if (is !== undefined) next.set(keyOf(name, is), valueFor(name, is));
    }
    return next;
  };
  const byName = (name: string) => name;
  const itself = <V>(_name: string, value: V) => value;
  const groupsOf = (kind: ContentChange['kind'], map: ReadonlyMap<string, readonly string[]>) => patched(map, kind, (e) => e?.built.groups, byName, itself);
  return {
    oauthServers: patched(held.oauthServers, 'oauth-server', (e) => e?.built.server, byName, itself),
    basicAuthUsers: patched(held.credentials.basicAuthUsers, 'basic-auth-credential', (e) => e?.built.passwordHash, byName, itself),
    apiKeys: patched(
      held.credentials.apiKeys,
      'key-auth-credential',
      (e) => e?.built.keyHash,
      (_name, keyHash) => keyHash,
      (name) => name,
    ),
    basicAuthGroups: groupsOf('basic-auth-credential', held.credentials.basicAuthGroups),
    keyAuthGroups: groupsOf('key-auth-credential', held.credentials.keyAuthGroups),
  };
}

/** Whether the patched credentials are the held ones: the same maps and installation key. */
export const sameCredentials = (held: HeldCredentials, maps: CredentialMaps, keyAuthHashKey: string | undefined): boolean =>
  maps.basicAuthUsers === held.basicAuthUsers &&
  maps.apiKeys === held.apiKeys &&
  keyAuthHashKey === held.keyAuthHashKey &&
  maps.basicAuthGroups === held.basicAuthGroups &&
  maps.keyAuthGroups === held.keyAuthGroups;
