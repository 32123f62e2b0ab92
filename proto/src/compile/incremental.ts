/**
 * A whole configuration (every definition accepted, as the store holds and a data plane applies it)
 * indexed so that a change is checked by what it changes: its definitions are compiled (through the
 * CompileCache), their route keys looked up in the index of route keys, their oauth2 references in
 * the servers, and a removed server in the count of APIs naming it. The verdicts are compileDefinitions'
 * own (same compile, same route keys, same messages); the property test in
 * proto/src/snapshot/delta.property.test.ts checks the two agree. One message differs: a server turned `storage`
 * under an API whose oauth2 plugin sets scopes or claims_to_headers is refused as the server's change (it is the
 * one that broke the API), where compileDefinitions leaves the API out.
 */
import { GatehouseError } from '../errors.js';
import { fieldError } from '../definition/field-path.js';
import type { ApiDefinition, Definitions, OAuthServerDefinition } from '../definition/types.js';
import {
  addCredential,
  emptyCredentialMaps,
  checkPluginReferences,
  STORAGE_SEES_NO_CLAIMS,
  compileOne,
  definitionsOf,
  takenError,
  type CredentialMaps,
  type CompileCache,
  type CompiledOAuthServer,
  type Built,
  type CompiledRoute,
  type DefinitionKindName,
} from './index.js';
import { allTurns } from '../turns.js';
import { LayeredMap } from '../layered-map.js';
import { EMPTY_LIST } from '../definition/proxy-schema.js';

/** One definition of a kind, or its removal (`def` absent). */
export interface DefinitionChange {
  kind: DefinitionKindName;
  name: string;
  def?: object;
}

interface Entry {
  kind: DefinitionKindName;
  name: string;
  def: object;
  /** Its compile (the cache's own object when there is one: nothing copied per definition). */
  built: Built;
  /** Servers named by this API's oauth2 plugins (enabled or not). */
  refs: readonly string[];
}

/** Persistent maps: a change makes new versions sharing the old ones' entries (layered-map.ts), never a copy of the whole. */
export interface ConfigIndex {
  /** By `<kind>:<name>`. */
  readonly entries: LayeredMap<string, Entry>;
  /** Route conflict key → `<kind>:<name>` of the definition that owns it. */
  readonly routeOwners: LayeredMap<string, string>;
  /** Server name → how many APIs name it in an oauth2 plugin. */
  readonly serverRefs: LayeredMap<string, number>;
}

const entryKey = (kind: DefinitionKindName, name: string) => `${kind}:${name}`;

/** The OAuth servers an API's oauth2 plugins (enabled or not) name. */
export function oauth2Refs(def: object): readonly string[] {
  const refs = ((def as ApiDefinition).plugins ?? []).flatMap((p) => (p.name === 'oauth2' ? [String(p.config?.server_name)] : []));
  // The shared empty list when none (most APIs): a data plane keeps one per API.
  return refs.length === 0 ? EMPTY_LIST : refs;
}

/** One definition compiled on its own (cached), and its conflict keys; throws its error. */
function entryOf(change: Required<DefinitionChange>, cache?: CompileCache): { entry: Entry; keys: readonly string[] } {
  const { kind, name, def } = change;
  const result = compileOne(kind, def, cache);
  if ('error' in result) {
    if (!(result.error instanceof GatehouseError)) throw result.error;
    throw named(change, result.error);
  }
  return { entry: { kind, name, def, built: result.built, refs: kind === 'api' ? oauth2Refs(def) : [] }, keys: result.built.keys };
}

const EMPTY: ConfigIndex = { entries: LayeredMap.of(), routeOwners: LayeredMap.of(), serverRefs: LayeredMap.of() };

/**
 * The changes applyChanges makes to one of the index's maps, read through: nothing is written to the
 * index until all of them are accepted. Over an empty map (a data plane's full snapshot, a store's
 * first index) a read is one Map lookup and the result takes the changes Map over instead of copying
 * it: otherwise the drafts' lookups and copies would be a large share of indexing a whole configuration.
 */
class Draft<V extends NonNullable<unknown>> {
  readonly changes = new Map<string, V | undefined>();
  /** Whether a removal was written (only then can the changes hold an undefined value). */
  private removed = false;
  constructor(readonly from: LayeredMap<string, V>) {}
  get(key: string): V | undefined {
    const value = this.changes.get(key);
    if (value !== undefined || this.from.size === 0) return value;
    return this.changes.has(key) ? undefined : this.from.get(key);
  }
  has(key: string): boolean {
    return this.get(key) !== undefined;
  }
  set(key: string, value: V | undefined): void {
    if (value === undefined) this.removed = true;
    this.changes.set(key, value);
  }
  result(): LayeredMap<string, V> {
    if (this.changes.size === 0) return this.from;
    if (this.from.size === 0 && !this.removed) return LayeredMap.of(this.changes as Map<string, V>);
    return this.from.with(this.changes);
  }
}

/**
 * The index of a whole configuration, built from nothing (one full pass, each definition through the
 * cache). Throws the first rejection when the configuration is not whole.
 */
export function indexConfig(defs: Definitions, cache?: CompileCache): ConfigIndex {
  return applyChanges(EMPTY, definitionsOf(defs), cache);
}

/**
 * The index of each whole configuration this process has indexed or derived, per Definitions object
 * (never mutated). Whoever makes the next configuration from the current one (an admin write, the
 * Kubernetes store's pass over a few changed CRs) derives its index with applyChanges and remembers
 * it, so only a configuration nobody derived is indexed from nothing. null = not whole.
 */
const indexes = new WeakMap<Definitions, ConfigIndex | null>();

/** The remembered index of `defs`, else one built now (a full pass, remembered). */
export function configIndexOf(defs: Definitions, cache?: CompileCache): ConfigIndex | null {
  let index = indexes.get(defs);
  if (index === undefined) {
    try {
      index = indexConfig(defs, cache);
    } catch (err) {
      if (!(err instanceof GatehouseError)) throw err;
      index = null;
    }
    indexes.set(defs, index);
  }
  return index;
}

/** The remembered index of `defs` only (undefined: none was built or derived). */
export function knownConfigIndex(defs: Definitions): ConfigIndex | null | undefined {
  return indexes.get(defs);
}

export function rememberConfigIndex(defs: Definitions, index: ConfigIndex): void {
  indexes.set(defs, index);
}

/**
 * The index after `changes` (each name at most once), or the rejection that keeps the result from
 * being whole: a definition that does not compile, takes a route key another one holds, names a
 * missing server, or a server removed while an API still names it. The index given is not modified.
 */
export function applyChanges(index: ConfigIndex, changes: readonly DefinitionChange[], cache?: CompileCache): ConfigIndex {
  return allTurns(applyChangesInTurns(index, changes, cache));
}

/**
 * indexConfig in turns of `turn` definitions (applyChanges' passes yield between them, each definition compiled
 * in the first): a serving data plane's full snapshot (snapshot-holder.ts applyInTurns).
 */
export function indexConfigInTurns(defs: Definitions, turn: number): Generator<void, ConfigIndex> {
  return applyChangesInTurns(EMPTY, definitionsOf(defs), undefined, turn);
}

/** applyChanges, yielding after every `turn` changes of its passes over them (a serving data plane's large delta, snapshot-holder.ts). */
export function* applyChangesInTurns(
  index: ConfigIndex,
  changes: readonly DefinitionChange[],
  cache?: CompileCache,
  turn = Infinity,
): Generator<void, ConfigIndex> {
  // Read and written through drafts, so that a rejection (a throw below) leaves `index` as it was at no cost.
  const entries = new Draft(index.entries);
  const routeOwners = new Draft(index.routeOwners);
  const serverRefs = new Draft(index.serverRefs);
  const count = (server: string, by: number) => serverRefs.set(server, (serverRefs.get(server) ?? 0) + by);
  // First take out what is replaced or removed, so that changes may swap route keys among themselves
  // (nothing to take out of an empty index: a full snapshot's or a store's first).
  let done = 0;
  for (const { kind, name } of index.entries.size === 0 ? [] : changes) {
    if (++done % turn === 0) yield;
    const old = entries.get(entryKey(kind, name));
    if (!old) continue;
    for (const key of old.built.keys) routeOwners.set(key, undefined);
    for (const server of old.refs) count(server, -1);
    entries.set(entryKey(kind, name), undefined);
  }
  const added: Entry[] = [];
  for (const change of changes) {
    if (++done % turn === 0) yield;
    if (!change.def) continue;
    const key = entryKey(change.kind, change.name);
    // Taken out above when replaced, so only a second change of the same name finds one (indexConfig's lists).
    if (entries.has(key)) throw new GatehouseError('VALIDATION_FAILED', `${change.kind} "${change.name}" is defined more than once`);
    const { entry, keys } = entryOf(change as Required<DefinitionChange>, cache);
    for (const routeKey of keys) {
      if (routeOwners.has(routeKey)) throw named(entry, takenError(entry.kind));
    }
    for (const routeKey of keys) routeOwners.set(routeKey, key);
    for (const server of entry.refs) count(server, 1);
    entries.set(key, entry);
    added.push(entry);
  }
  const strategyOf = (name: string) => (entries.get(entryKey('oauth-server', name))?.def as OAuthServerDefinition | undefined)?.token_strategy.name;
  for (const entry of added) {
    if (++done % turn === 0) yield;
    try {
      if (entry.kind === 'api') checkPluginReferences(entry.def as ApiDefinition, strategyOf);
    } catch (err) {
      throw named(entry, err as GatehouseError);
    }
  }
  for (const { kind, name } of changes) {
    if (kind !== 'oauth-server' || (serverRefs.get(name) ?? 0) === 0) continue;
    const strategy = strategyOf(name);
    // A server that became `storage` may leave an API's scopes or claims_to_headers with nothing to read them from.
    const becameStorage =
      strategy === 'storage' && (index.entries.get(entryKey(kind, name))?.def as OAuthServerDefinition | undefined)?.token_strategy.name !== 'storage';
    if (strategy !== undefined && !becameStorage) continue;
    // O(n), on these (rare) changes only.
    for (const user of entries.result().values()) {
      if (!user.refs.includes(name)) continue;
      try {
        checkPluginReferences(user.def as ApiDefinition, strategyOf);
      } catch (err) {
        if (!becameStorage) throw named(user, err as GatehouseError);
        // The server's write is the one refused: the API was fine until then.
        const field = (err as GatehouseError).field?.replace(/^plugins\[\d+\]\.config\./, '');
        throw named(
          { kind, name },
          fieldError('token_strategy.name', `cannot be "storage" while the oauth2 plugin of api "${user.name}" sets ${field}: ${STORAGE_SEES_NO_CLAIMS}`),
        );
      }
    }
  }
  return { entries: entries.result(), routeOwners: routeOwners.result(), serverRefs: serverRefs.result() };
}

/** The definition of `kind` named `name` in the configuration the index describes (the same object). */
export function definitionIn(index: ConfigIndex, kind: DefinitionKindName, name: string): object | undefined {
  return index.entries.get(entryKey(kind, name))?.def;
}

/** The rejection as compileDefinitions reports it, with which definition it is about. */
export class ChangeRejected extends GatehouseError {
  constructor(
    readonly kind: DefinitionKindName,
    readonly definitionName: string,
    readonly error: GatehouseError,
  ) {
    super(error.code, `${kind} "${definitionName}": ${error.message}`, { field: error.field, cause: error });
  }
}

function named(entry: Pick<Entry, 'kind' | 'name'>, error: GatehouseError): ChangeRejected {
  return new ChangeRejected(entry.kind, entry.name, error);
}

/** What the data plane routes: active API routes, then the servers' endpoint routes; and the credentials. */
export function indexRoutes(index: ConfigIndex): IndexedRoutes {
  return allTurns(indexRoutesInTurns(index));
}

export type IndexedRoutes = { routes: CompiledRoute[]; oauthServers: Map<string, CompiledOAuthServer> } & CredentialMaps;

/** indexRoutes, yielding after every `turn` entries (snapshot-holder.ts applies a full snapshot in turns). */
export function* indexRoutesInTurns(index: ConfigIndex, turn = Infinity): Generator<void, IndexedRoutes> {
  const routes: CompiledRoute[] = [];
  const serverRoutes: CompiledRoute[] = [];
  const oauthServers = new Map<string, CompiledOAuthServer>();
  const credentials = emptyCredentialMaps();
  let done = 0;
  for (const entry of index.entries.values()) {
    if (++done % turn === 0) yield;
    if (entry.kind === 'api') {
      if ((entry.def as ApiDefinition).active) routes.push(...entry.built.routes);
    } else if (entry.built.server) {
      oauthServers.set(entry.name, entry.built.server);
      serverRoutes.push(...entry.built.server.routes);
    } else {
      addCredential(credentials, entry.name, entry.built);
    }
  }
  return { routes: [...routes, ...serverRoutes], oauthServers, ...credentials };
}
