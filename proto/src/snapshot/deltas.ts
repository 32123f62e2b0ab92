/**
 * Deltas between two versions of the content: toDeltaMessage on the control plane, applyDeltaMessage on the
 * data plane, which patches the held lists instead of copying them (ListVersion).
 */
import { GatehouseError } from '../errors.js';
import type { Definitions } from '../definition/types.js';
import { LayeredMap } from '../layered-map.js';
import { allTurns } from '../turns.js';
import type * as wire from '../wire.js';
import { canonicalGatewayTls, gatewayTlsFromMessage, sameGatewayTls } from './gateway-tls.js';
import { contentHash, definitionHash, definitionsHashInTurns, deriveDefinitions, editsFrom, type DefinitionEdit } from './hash.js';
import { KIND_CODECS, KIND_KEYS, type ContentChange, type KindCodec, type KindKey, type SnapshotContent } from './kinds.js';
import type { DefinitionList } from './messages.js';

/** SnapshotDelta as plain object (wire.ts): `base` → `version`, upserts by kind (as in SnapshotMessage), removals by name. */
export interface DeltaMessage extends Omit<wire.SnapshotDelta, DefinitionList | 'key_auth_hash_key' | 'gateway_tls'> {
  /** The key_auth installation key of the content after applying: only when it has key_auth credentials. */
  key_auth_hash_key?: string;
  /** The Gateway HTTPS listeners after applying, only when they changed (`listeners: []`: none left); absent or null = the base's. */
  gateway_tls?: wire.GatewayTls | null;
  apis: unknown[];
  oauth_servers: unknown[];
  basic_auth_credentials: unknown[];
  key_auth_credentials: unknown[];
}

/** One kind's changes from `before` to `after`: definitions added or changed (by content), names removed. */
function diffKind<D extends object>(codec: KindCodec<D>, before: Definitions, after: Definitions): { upserts: object[]; removed: string[] } {
  const previous = new Map(codec.list(before).map((d) => [codec.nameOf(d), d]));
  const upserts: object[] = [];
  for (const def of codec.list(after)) {
    const name = codec.nameOf(def);
    const old = previous.get(name);
    previous.delete(name);
    if (old === def) continue;
    if (old === undefined || definitionHash(old, codec.toRawMessage) !== definitionHash(def, codec.toRawMessage)) upserts.push(codec.toMessage(def));
  }
  return { upserts, removed: [...previous.keys()].sort() };
}

/** One kind's changes as deriveDefinitions recorded them (same result as diffKind, in O(edits)). */
function editsOfKind<D extends object>(codec: KindCodec<D>, edits: readonly DefinitionEdit[]): { upserts: object[]; removed: string[] } {
  const upserts: object[] = [];
  const removed: string[] = [];
  for (const { kind, before, after } of edits as readonly { kind: string; before?: D; after?: D }[]) {
    if (kind !== codec.kind) continue;
    if (before && (!after || codec.nameOf(before) !== codec.nameOf(after))) removed.push(codec.nameOf(before));
    if (after && (!before || definitionHash(before, codec.toRawMessage) !== definitionHash(after, codec.toRawMessage))) upserts.push(codec.toMessage(after));
  }
  return { upserts, removed: removed.sort() };
}

/** The delta that turns `base` into `next` (both as the CP's store holds them). */
export function toDeltaMessage(base: SnapshotContent, next: SnapshotContent): DeltaMessage {
  const delta = {
    base_version: base.version,
    base_hash: base.hash,
    version: next.version,
    hash: next.hash,
    ...(next.keyAuthHashKey && { key_auth_hash_key: next.keyAuthHashKey }),
    ...(!sameGatewayTls(base.gatewayTls, next.gatewayTls) && { gateway_tls: { listeners: canonicalGatewayTls(next.gatewayTls ?? []) ?? [] } }),
  } as DeltaMessage;
  const edits = editsFrom(base.defs, next.defs);
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    // The same lists (a data plane holding the current content under another version): nothing to compare.
    const { upserts, removed } =
      base.defs === next.defs ? { upserts: [], removed: [] } : edits ? editsOfKind(codec, edits) : diffKind(codec, base.defs, next.defs);
    delta[key] = upserts;
    delta[`removed_${key}`] = removed;
  }
  return delta;
}

/** Number of definitions a delta adds, changes or removes. */
export function deltaSize(delta: DeltaMessage): number {
  return KIND_KEYS.reduce((n, key) => n + (delta[key]?.length ?? 0) + (delta[`removed_${key}`]?.length ?? 0), 0);
}

/**
 * A kind's list as deltas leave it, made without copying it: `base` with `patch` over it (position →
 * definition; positions from base.length on are additions), `length` long, and `positions` (name →
 * position) to find what a delta replaces or removes without a pass over the list. A copy of the list
 * per delta (pointers only) would grow with the configuration and be most of what a data plane's old
 * generation grows by under back-to-back pushes. The array is made when first read (the
 * snapshot cache's save) and kept; the patch is folded into a new base once it outgrows √length, so
 * a delta costs O(√n) amortised.
 */
class ListVersion<D extends object> {
  private array: readonly D[] | undefined;
  constructor(
    readonly base: readonly D[],
    readonly patch: ReadonlyMap<number, D>,
    readonly length: number,
    readonly positions: LayeredMap<string, number>,
  ) {
    if (patch.size === 0 && length === base.length) this.array = base;
  }

  at(i: number): D {
    return this.patch.get(i) ?? this.base[i];
  }

  toArray(): readonly D[] {
    return (this.array ??= Array.from({ length: this.length }, (_, i) => this.at(i)));
  }
}

const NO_PATCH: ReadonlyMap<number, never> = new Map<number, never>();

/** Per list object (never modified, like the lists): its version, built by prepareForDeltas, else on first use. */
const listVersions = new WeakMap<readonly object[], ListVersion<object>>();

/** Per Definitions made by applyDeltaMessage: each kind's version (its lists are made only when read). */
const deltaVersions = new WeakMap<Definitions, Partial<Record<KindKey, ListVersion<object>>>>();

function versionOf<D extends object>(key: KindKey, defs: Definitions): ListVersion<D> {
  const made = deltaVersions.get(defs)?.[key];
  if (made) return made as ListVersion<D>;
  const codec = KIND_CODECS[key] as KindCodec<D>;
  const list = codec.list(defs);
  let version = listVersions.get(list) as ListVersion<D> | undefined;
  if (!version)
    listVersions.set(list, (version = new ListVersion(list, NO_PATCH, list.length, LayeredMap.of(new Map(list.map((def, i) => [codec.nameOf(def), i]))))));
  return version;
}

/**
 * `from` with the `removed` names taken out and `upserts` put in, and the edits that makes:
 * replacements in place, a removal filled by the last element and additions at the end. Order does
 * not matter to the hash; definitions untouched keep their objects.
 */
function patchList<D extends object>(
  codec: KindCodec<D>,
  from: ListVersion<D>,
  removed: ReadonlySet<string>,
  upserts: D[],
  edits: DefinitionEdit[],
): ListVersion<D> {
  if (removed.size === 0 && upserts.length === 0) return from;
  const patch = new Map(from.patch);
  const at = (i: number) => patch.get(i) ?? from.base[i];
  let length = from.length;
  const moved = new Map<string, number | undefined>();
  const where = (name: string) => (moved.has(name) ? moved.get(name) : from.positions.get(name));
  for (const after of upserts) {
    const name = codec.nameOf(after);
    const i = where(name);
    if (i === undefined) {
      edits.push({ kind: codec.kind, after });
      moved.set(name, length);
      patch.set(length++, after);
    } else {
      edits.push({ kind: codec.kind, before: at(i), after });
      patch.set(i, after);
    }
  }
  for (const name of removed) {
    const i = where(name);
    if (i === undefined) continue;
    edits.push({ kind: codec.kind, before: at(i) });
    const last = at(--length);
    patch.delete(length);
    if (i < length) {
      patch.set(i, last);
      moved.set(codec.nameOf(last), i);
    }
    moved.set(name, undefined);
  }
  const next = new ListVersion(from.base, patch, length, from.positions.with(moved));
  return patch.size <= Math.max(64, Math.sqrt(length)) ? next : new ListVersion(next.toArray(), NO_PATCH, length, next.positions);
}

/** Definitions whose lists are `versions`' arrays, each made when first read. */
function definitionsOf(versions: Partial<Record<KindKey, ListVersion<object>>>): Definitions {
  const defs = {} as Definitions;
  for (const key of KIND_KEYS) {
    const version = versions[key];
    if (!version) continue;
    const { field } = KIND_CODECS[key];
    Object.defineProperty(defs, field, {
      enumerable: true,
      configurable: true,
      get() {
        const value = version.toArray();
        // From then on a plain member, as an object literal's.
        Object.defineProperty(defs, field, { value, enumerable: true, configurable: true, writable: true });
        return value;
      },
    });
  }
  deltaVersions.set(defs, versions);
  return defs;
}

/**
 * Builds now what the first delta on `defs` would otherwise build on its path: each list's positions
 * (a pass over every list).
 */
export function prepareForDeltas(defs: Definitions): void {
  for (const key of KIND_KEYS) versionOf(key, defs);
}

/**
 * Applies a delta to the content it was taken from. Throws VALIDATION_FAILED when `base` is not the
 * delta's base (version and hash), an upsert does not validate, or the result's hash is not the
 * delta's. Unchanged definitions keep their objects, so everything memoised on them still holds.
 */
export function applyDeltaMessage(base: SnapshotContent, delta: DeltaMessage): SnapshotContent & { changes: ContentChange[] } {
  return allTurns(applyDeltaMessageInTurns(base, delta));
}

/** applyDeltaMessage, yielding after every `turn` definitions decoded or hashed (a serving data plane's large delta). */
export function* applyDeltaMessageInTurns(
  base: SnapshotContent,
  delta: DeltaMessage,
  turn = Infinity,
): Generator<void, SnapshotContent & { changes: ContentChange[] }> {
  const version = Number(delta.version);
  if (Number(delta.base_version) !== base.version || delta.base_hash !== base.hash) {
    throw new GatehouseError(
      'VALIDATION_FAILED',
      `delta base is version ${Number(delta.base_version)} (${JSON.stringify(delta.base_hash)}), held is version ${base.version} (${JSON.stringify(base.hash)})`,
    );
  }
  const versions: Partial<Record<KindKey, ListVersion<object>>> = {};
  const changes: ContentChange[] = [];
  const edits: DefinitionEdit[] = [];
  for (const key of KIND_KEYS) {
    const codec = KIND_CODECS[key] as KindCodec<object>;
    const removed = delta[`removed_${key}`] ?? [];
    if (!Array.isArray(removed)) throw new GatehouseError('VALIDATION_FAILED', `delta removed_${key} must be an array`);
    const upserts = yield* codec.decode(delta[key] ?? [], undefined, turn);
    const upserted = new Set(upserts.map((d) => codec.nameOf(d)));
    const removedNames = new Set(removed.map(String).filter((name) => !upserted.has(name)));
    for (const name of removedNames) changes.push({ kind: codec.kind, name });
    for (const def of upserts) changes.push({ kind: codec.kind, name: codec.nameOf(def), def });
    const list = patchList(codec, versionOf(key, base.defs), removedNames, upserts, edits);
    if (!codec.optional || list.length > 0) versions[key] = list;
  }
  const defs = definitionsOf(versions);
  deriveDefinitions(base.defs, defs, edits);
  const key = delta.key_auth_hash_key || undefined;
  const gatewayTls = delta.gateway_tls ? gatewayTlsFromMessage(delta.gateway_tls) : base.gatewayTls;
  const hash = contentHash(yield* definitionsHashInTurns(defs, turn), key, gatewayTls);
  if (hash !== delta.hash) {
    throw new GatehouseError(
      'VALIDATION_FAILED',
      `snapshot hash mismatch after delta ${base.version} → ${version}: message says ${JSON.stringify(delta.hash)}, content is ${hash}`,
    );
  }
  return { version, hash, defs, changes, ...(key && { keyAuthHashKey: key }), ...(gatewayTls && { gatewayTls }) };
}
