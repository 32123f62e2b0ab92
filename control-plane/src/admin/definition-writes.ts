/**
 * The admin writes as pure functions: current Definitions + request → candidate Definitions,
 * checked exactly as a data plane will see them (compileDefinitions) plus the admin-only rules
 * (unique names, no two routes with the same listen_path + hosts + methods, no dangling oauth2
 * references). Run inside the store's update(), so every check sees the latest state and a
 * rejected write leaves the store untouched.
 */
import { GatehouseError } from '#proto/errors';
import { mergePatch, type ApiDefinition, type Definitions, type OAuthServerDefinition } from '#proto/definition/index';
import { isPlainObject } from '#proto/definition/field-path';
import { keepRedactedSecrets } from '#proto/definition/secret-fields';
import { compileDefinitions, type DefinitionKindName } from '#proto/compile/index';
import {
  applyChanges,
  ChangeRejected,
  configIndexOf,
  definitionIn,
  knownConfigIndex,
  rememberConfigIndex,
  type DefinitionChange,
} from '#proto/compile/incremental';
import { deriveDefinitions } from '#proto/snapshot/codec';
import { checkHmacKeyLengths, storedApis, storedOAuthServers, type StoredKind } from '../store/definition-kinds.js';
import { compileCache } from '../store/compile-cache.js';

export interface WriteResult<T> {
  defs: Definitions;
  value: T;
}

/** A library or parser failure on user input is a validation failure of that input. */
/** PUT/PATCH may repeat the name but never rename: the path names the resource. */
function requireSameName(patch: Record<string, unknown>, name: string, field: string): void {
  if (field in patch && patch[field] !== name) {
    throw new GatehouseError('VALIDATION_FAILED', `${field} in the body ("${String(patch[field])}") must match the name in the path ("${name}")`, {
      field,
    });
  }
}

export function requireObject(body: unknown): Record<string, unknown> {
  if (!isPlainObject(body)) throw new GatehouseError('VALIDATION_FAILED', 'request body must be a JSON object');
  return body;
}

/** What differs between the kinds of definition the admin API writes (the store's kinds plus these); the write rules are shared. */
export interface DefinitionKind<T> extends StoredKind<T> {
  /** Rejects a delete the rest of the configuration still depends on. */
  checkDelete?(defs: Definitions, name: string): void;
  /**
   * Turns a POST or PUT/PATCH body into what `parse` (or the merge patch) reads, before the write
   * (credentials: the secret is checked and hashed, off the store's queue). Absent = as is.
   */
  prepare?(body: Record<string, unknown>, op: 'create' | 'update'): Promise<Prepared>;
  /** What the admin API shows of a definition (basic_auth users: never the hash). Absent = all of it. */
  present?(item: T): unknown;
}

/** A prepared body, and what the response to this write shows once besides the stored definition (a generated API key). */
export interface Prepared {
  body: Record<string, unknown>;
  reveal?: Record<string, unknown>;
}

export const apiKind: DefinitionKind<ApiDefinition> = {
  ...storedApis,
  prepare: async (body, op) => ({ body: op === 'update' ? foldHostsAlias(body) : body }),
};

/**
 * `proxy.hosts` is an input alias of `hosts` (folded into it on parse). In a merge patch it must act
 * as `hosts` would, replacing the stored list: merged as it stands it would land beside the stored
 * `hosts` and be added to them, so a Janus-style client could never change or drop a host. A
 * malformed alias is left where it is, for validation to name `proxy.hosts`.
 */
export function foldHostsAlias(patch: Record<string, unknown>): Record<string, unknown> {
  const proxy = patch.proxy;
  if (proxy === null || typeof proxy !== 'object' || Array.isArray(proxy) || !('hosts' in proxy)) return patch;
  const { hosts: alias, ...rest } = proxy as Record<string, unknown>;
  const hosts = patch.hosts;
  const isList = (v: unknown) => v === undefined || v === null || Array.isArray(v);
  if (alias === undefined || !isList(alias) || !isList(hosts)) return patch;
  // A `null` alias removes like any merge-patch null: it adds nothing, and the patch's `hosts` (or none) replaces the stored ones.
  return { ...patch, hosts: [...((hosts as unknown[] | null | undefined) ?? []), ...((alias as unknown[] | null) ?? [])], proxy: rest };
}

export const oauthServerKind: DefinitionKind<OAuthServerDefinition> = {
  ...storedOAuthServers,
  checkDelete(defs, name) {
    const user = defs.apis.find((a) => a.plugins.some((p) => p.name === 'oauth2' && p.config.server_name === name));
    if (user) {
      throw new GatehouseError('OAUTH_SERVER_IN_USE', `oauth server is referenced by the oauth2 plugin of api "${user.name}"`);
    }
  },
};

/**
 * Indexes (and compiles) `defs` for the writes to come. Called at start, before the CP listens, so that the first
 * admin write does not build it on its own path.
 */
export function indexForWrites(defs: Definitions): void {
  configIndexOf(defs, compileCache);
}

/**
 * Checks the candidate as compiling it whole with the written definition ranked last would: when it
 * collides with anything (name, or a route with the same listen_path + hosts + methods, inactive APIs
 * included: they can be activated later by a PUT that changes nothing else) it is the one refused.
 * Through the index of the current configuration, that costs what the write changes (the property
 * test in proto/src/snapshot/delta.property.test.ts checks both ways agree). Other definitions'
 * verdicts are not this write's business (the Kubernetes store may hold CRs that were rejected before).
 */
let checkServices: (api: ApiDefinition) => void = () => {};

/** Set once at start (main.ts): refuses an API whose Kubernetes Service targets this control plane cannot resolve. */
export function requireResolvableServices(check: (api: ApiDefinition) => void): void {
  checkServices = check;
}

/** Throws when `api` names a Kubernetes Service this control plane cannot resolve (requireResolvableServices). */
export const checkResolvableServices = (api: ApiDefinition): void => checkServices(api);

function check<T>(current: Definitions, candidate: Definitions, kind: DefinitionKind<T>, name: string, written: T, before?: T): Definitions {
  if (kind.compileKind === 'api') checkServices(written as ApiDefinition);
  if (kind.compileKind === 'oauth-server') checkHmacKeyLengths(written as OAuthServerDefinition);
  // The store's hash and the snapshot builder's delta of the candidate then cost what this write changes (codec.ts).
  deriveDefinitions(current, candidate, [{ kind: kind.compileKind, before: before as object | undefined, after: written as object }]);
  const index = configIndexOf(current, compileCache);
  if (index) {
    try {
      rememberConfigIndex(candidate, applyChanges(index, [{ kind: kind.compileKind, name, def: written as object }], compileCache));
      return candidate;
    } catch (err) {
      throw err instanceof ChangeRejected ? err.error : err;
    }
  }
  const isOwn = (k: DefinitionKindName, n: string) => k === kind.compileKind && n === name;
  const compiled = compileDefinitions(candidate, { rank: (k, n) => (isOwn(k, n) ? 1 : 0), cache: compileCache });
  const own = compiled.rejected.find((r) => isOwn(r.kind, r.name));
  if (own) throw own.error;
  return candidate;
}

/** After a delete, the next write's index is derived too (nothing to check: deletes are checked by checkDelete). */
function indexAfter(current: Definitions, next: Definitions, change: DefinitionChange): void {
  const index = knownConfigIndex(current);
  if (!index) return;
  try {
    rememberConfigIndex(next, applyChanges(index, [change], compileCache));
  } catch (err) {
    if (!(err instanceof GatehouseError)) throw err;
  }
}

/**
 * By name through the index when this version has one (every version an admin write made; a read does
 * not build one), so a write does not scan the list.
 */
function lookup<T>(kind: DefinitionKind<T>, defs: Definitions, name: string): T | undefined {
  const index = knownConfigIndex(defs);
  return index ? (definitionIn(index, kind.compileKind, name) as T | undefined) : kind.list(defs).find((d) => kind.nameOf(d) === name);
}

export function findDefinition<T>(kind: DefinitionKind<T>, defs: Definitions, name: string): T {
  const found = lookup(kind, defs, name);
  if (!found) throw new GatehouseError(kind.notFound.code, kind.notFound.message);
  return found;
}

export function createDefinition<T>(kind: DefinitionKind<T>, defs: Definitions, body: unknown): WriteResult<T> {
  const created = kind.parse(requireObject(body));
  const list = kind.list(defs);
  const name = kind.nameOf(created);
  if (lookup(kind, defs, name) !== undefined) throw new GatehouseError(kind.nameTaken.code, kind.nameTaken.message);
  // concat: one exact-size copy of the list (a spread costs about 2.5 times as much at 50,000 APIs).
  return { defs: check(defs, kind.withList(defs, list.concat([created])), kind, name, created), value: created };
}

/** PUT and PATCH: RFC 7396 merge patch onto the stored definition (a REDACTED secret keeps the stored one), then full validation. */
export function updateDefinition<T>(kind: DefinitionKind<T>, defs: Definitions, name: string, body: unknown): WriteResult<T> {
  const stored = findDefinition(kind, defs, name);
  const patch = requireObject(body);
  requireSameName(patch, name, kind.nameField);
  const updated = kind.parse(keepRedactedSecrets(kind.compileKind, mergePatch(stored, patch), stored));
  // A copy of the pointers with one replaced (indexOf compares pointers: ~50 times cheaper than comparing names).
  const list = kind.list(defs).slice();
  const at = list.indexOf(stored);
  if (at < 0) throw new Error(`${kind.compileKind} "${name}" found but not in its list`);
  list[at] = updated;
  const candidate = kind.withList(defs, list);
  return { defs: check(defs, candidate, kind, name, updated, stored), value: updated };
}

export function deleteDefinition<T>(kind: DefinitionKind<T>, defs: Definitions, name: string): Definitions {
  const before = findDefinition(kind, defs, name);
  kind.checkDelete?.(defs, name);
  const next = kind.withList(
    defs,
    kind.list(defs).filter((d) => kind.nameOf(d) !== name),
  );
  deriveDefinitions(defs, next, [{ kind: kind.compileKind, before: before as object }]);
  indexAfter(defs, next, { kind: kind.compileKind, name });
  return next;
}
