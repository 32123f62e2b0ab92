/**
 * Which CRs are accepted: each CR's verdict (parse + compileDefinitions, older CRs winning contested
 * names and routes) and the accepted definitions, as a StoreState whose revision moves only with the
 * content hash. A pass over the CRs the informers touched takes what they change when ranks cannot
 * decide it; otherwise the full pass ranks and compiles the whole cache.
 */
import { GatehouseError } from '#proto/errors';
import type { Definitions } from '#proto/definition/index';
import { compileDefinitions, compileOne, type DefinitionKindName } from '#proto/compile/index';
import { applyChanges, configIndexOf, oauth2Refs, rememberConfigIndex, type ConfigIndex, type DefinitionChange } from '#proto/compile/incremental';
import { definitionsHash, deriveDefinitions, type DefinitionEdit } from '#proto/snapshot/codec';
import { compileCache } from '../compile-cache.js';
import type { StoredKind } from '../definition-kinds.js';
import type { StoreState } from '../index.js';
import type { ParseCache } from './informers.js';
import { KINDS, type AnyKind, type CustomResource, type ResourceVerdict } from './kinds.js';

const FIRST_REVISION = 1;
const HISTORY = 1024;

export interface VerdictDeps {
  parsed: ParseCache;
  /** Every CR in the informers' caches. */
  all(): Array<{ kind: AnyKind; obj: CustomResource }>;
  /** After every pass, with the uids whose verdict changed. */
  changed(uids: ReadonlySet<string>): void;
  /** The state's content changed (a new revision); `rejected` CRs are left out of it. */
  published(state: StoreState, rejected: number): void;
}

/**
 * What the CRs refused because of another CR (a taken name or route, a missing OAuth server) stand on:
 * their uids, names, route keys and the servers they name. A change that touches any of it may change
 * who wins, which the CRs' ages decide: the full pass, which ranks them, takes it.
 */
interface Blockers {
  uids: Set<string>;
  names: Set<string>;
  routeKeys: Set<string>;
  servers: Set<string>;
}

const noBlockers = (): Blockers => ({ uids: new Set(), names: new Set(), routeKeys: new Set(), servers: new Set() });

export class Verdicts {
  state: StoreState = Object.freeze({ revision: FIRST_REVISION, defs: { apis: [], oauthServers: [] }, hash: definitionsHash({ apis: [], oauthServers: [] }) });
  /** Every CR's verdict, by uid. */
  verdicts = new Map<string, ResourceVerdict>();
  /** Accepted verdicts by `<CR kind>:<name>`, for the writes. */
  private acceptedByName = new Map<string, ResourceVerdict>();
  /** Per CR uid: the generation last accepted and the revision that first carried it. */
  private readonly since = new Map<string, { generation: number; revision: number }>();
  private readonly hashes = new Map<number, string>([[this.state.revision, this.state.hash]]);
  /** `<compile kind>:<name>` → uid of the CR holding that name (a CR whose spec parses holds its name, as in the full pass). */
  private readonly nameOwners = new Map<string, string>();
  /** uid → the definition object an accepted CR contributes to state.defs. */
  private readonly acceptedDefs = new Map<string, object>();
  private blockers = noBlockers();

  constructor(private readonly deps: VerdictDeps) {}

  /** The metadata.name of the accepted CR of `kind` holding the definition `name`. */
  acceptedName(kind: AnyKind, name: string): string | undefined {
    return this.acceptedByName.get(`${kind.resource.kind}:${name}`)?.metadataName;
  }

  hashOfRevision(revision: number): string | undefined {
    return this.hashes.get(revision);
  }

  revisionOfHash(hash: string): number | undefined {
    let found: number | undefined;
    for (const [revision, h] of this.hashes) if (h === hash) found = revision;
    return found;
  }

  /**
   * The touched CRs (null: deleted) applied to the current state, in what they change: a status update
   * changes a verdict's status only; a spec change, creation or deletion is checked against the index of
   * the accepted configuration (compile/incremental.ts, as admin writes are) and edits the definition
   * lists in place, so the hash and the data planes' delta cost what changed. That is the full pass's
   * result unless ranks decide (a CR refused because of another, before or after the change, and the
   * change touches what it stands on: see Blockers) or the index is not at hand: false then, and
   * nothing changed.
   */
  pass(touched: ReadonlyMap<string, { kind: AnyKind; obj: CustomResource | null }>): boolean {
    const statusOnly: Array<[ResourceVerdict, CustomResource]> = [];
    const next: Array<{ uid: string; kind: AnyKind; verdict: ResourceVerdict | null; value: unknown }> = [];
    const changes: DefinitionChange[] = [];
    const edits: DefinitionEdit[] = [];
    const claims = new Map<string, string>();
    for (const [uid, { kind, obj }] of touched) {
      const prev = this.verdicts.get(uid);
      if (obj && prev && prev.generation === generationOf(obj)) {
        if (prev.status !== obj.status) statusOnly.push([prev, obj]);
        continue;
      }
      const prevDef = this.acceptedDefs.get(uid);
      if (this.blocks(kind, uid, prev?.name, routeKeysOf(kind.compileKind, prevDef))) return false;
      const removeOld = () => {
        changes.push({ kind: kind.compileKind, name: prev!.name });
        edits.push({ kind: kind.compileKind, before: prevDef });
      };
      if (!obj) {
        if (prevDef) removeOld();
        next.push({ uid, kind, verdict: null, value: null });
        continue;
      }
      const { value, error } = this.deps.parsed.parse(kind, obj);
      const verdict = verdictOf(kind, obj, value, error);
      if (!error) {
        const key = `${kind.compileKind}:${verdict.name}`;
        const owner = claims.get(key) ?? this.nameOwners.get(key);
        if (owner !== undefined && owner !== uid) return false;
        claims.set(key, uid);
        const own = compileOne(kind.compileKind, value as object, compileCache);
        if ('error' in own) {
          if (!(own.error instanceof GatehouseError)) throw own.error;
          verdict.error = own.error;
        }
        if (this.blocks(kind, uid, verdict.name, routeKeysOf(kind.compileKind, value as object))) return false;
      }
      const sameName = prev?.name === verdict.name;
      if (prevDef && (verdict.error || !sameName)) removeOld();
      if (!verdict.error) {
        changes.push({ kind: kind.compileKind, name: verdict.name, def: value as object });
        edits.push({ kind: kind.compileKind, before: prevDef && sameName ? prevDef : undefined, after: value as object });
      }
      next.push({ uid, kind, verdict, value });
    }

    const defs = this.edited(changes, edits);
    if (!defs) return false;
    // Accepted: from here on nothing fails.
    const changed = new Set<string>();
    for (const [verdict, obj] of statusOnly) {
      verdict.status = obj.status;
      changed.add(verdict.uid);
    }
    const hashChanged = defs !== this.state.defs && this.setDefs(defs);
    for (const { uid, kind, verdict, value } of next) {
      changed.add(uid);
      this.record(uid, kind, verdict, value);
    }
    this.deps.changed(changed);
    if (hashChanged) this.deps.published(this.state, 0);
    return true;
  }

  /** The accepted definitions with `edits` made, checked against the configuration's index; undefined when that cannot say. */
  private edited(changes: DefinitionChange[], edits: DefinitionEdit[]): Definitions | undefined {
    if (changes.length === 0) return this.state.defs;
    const index = configIndexOf(this.state.defs, compileCache);
    if (!index) return undefined;
    let nextIndex: ConfigIndex;
    try {
      nextIndex = applyChanges(index, changes, compileCache);
    } catch (err) {
      if (err instanceof GatehouseError) return undefined;
      throw err;
    }
    const defs = withEdits(this.state.defs, edits);
    if (!defs) return undefined;
    deriveDefinitions(this.state.defs, defs, edits);
    rememberConfigIndex(defs, nextIndex);
    return defs;
  }

  /** A pass's new verdict for one CR (null: deleted) in the books. */
  private record(uid: string, kind: AnyKind, verdict: ResourceVerdict | null, value: unknown): void {
    const prev = this.verdicts.get(uid);
    if (prev) {
      const key = `${kind.compileKind}:${prev.name}`;
      if (this.nameOwners.get(key) === uid) this.nameOwners.delete(key);
      if (this.acceptedByName.get(`${kind.resource.kind}:${prev.name}`) === prev) this.acceptedByName.delete(`${kind.resource.kind}:${prev.name}`);
    }
    if (!verdict) {
      this.forget(uid);
      return;
    }
    if (value !== null) this.nameOwners.set(`${kind.compileKind}:${verdict.name}`, uid);
    if (verdict.error) {
      this.since.delete(uid);
      this.acceptedDefs.delete(uid);
    } else {
      this.accept(verdict);
      this.acceptedDefs.set(uid, value as object);
      this.acceptedByName.set(`${kind.resource.kind}:${verdict.name}`, verdict);
    }
    this.verdicts.set(uid, verdict);
  }

  /** The full pass: every CR in the caches ranked (older first), parsed and compiled together. */
  rebuild(): void {
    const { owners, values, next, nameTaken, compiled, defs } = this.rankAndCompile();
    const rejected = new Set<string>();
    const blocked = noBlockers();
    for (const r of compiled.rejected) {
      const key = `${r.kind}:${r.name}`;
      rejected.add(key);
      owners.get(key)!.error = r.error;
      // Refused for its own compile: nothing another CR does changes that.
      if (!('error' in compileOne(r.kind, values.get(key)!, compileCache))) block(blocked, r.kind, owners.get(key)!, values.get(key)!);
    }
    for (const v of nameTaken) block(blocked, v.kind.compileKind, v.verdict, v.value);
    this.blockers = blocked;
    let accepted: Definitions = { apis: [], oauthServers: [] };
    for (const kind of KINDS as readonly StoredKind<unknown>[]) {
      accepted = kind.withList(
        accepted,
        kind.list(defs).filter((d) => !rejected.has(`${kind.compileKind}:${kind.nameOf(d)}`)),
      );
    }
    const hashChanged = this.setDefs(accepted);

    const changed = new Set<string>();
    this.acceptedByName = new Map();
    this.nameOwners.clear();
    this.acceptedDefs.clear();
    for (const [key, verdict] of owners) {
      this.nameOwners.set(key, verdict.uid);
      if (!verdict.error) this.acceptedDefs.set(verdict.uid, values.get(key)!);
    }
    for (const v of next.values()) {
      if (v.error) this.since.delete(v.uid);
      else {
        this.accept(v);
        this.acceptedByName.set(`${v.resource.kind}:${v.name}`, v);
      }
      if (!sameVerdict(this.verdicts.get(v.uid), v)) changed.add(v.uid);
    }
    for (const uid of [...this.verdicts.keys()]) if (!next.has(uid)) changed.add(uid);
    for (const uid of [...this.since.keys()]) if (!next.has(uid)) this.since.delete(uid);
    this.deps.parsed.keepOnly(next);
    this.verdicts = next;
    this.deps.changed(changed);
    if (hashChanged) this.deps.published(this.state, compiled.rejected.length + nameTaken.length);
    // The next CR change (and admin write) is checked against this index: built now, not on that write's path
    // (indexConfig grows with the CRs).
    const built = this.state.defs;
    setImmediate(() => configIndexOf(built, compileCache));
  }

  /** Every CR parsed in rank order: the first of a name holds it, the rest are NameTaken; the holders compiled together. */
  private rankAndCompile() {
    const entries = this.deps.all().map((e) => ({ ...e, key: rankKey(e.kind, e.obj) }));
    entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const owners = new Map<string, ResourceVerdict>();
    let defs: Definitions = { apis: [], oauthServers: [] };
    for (const kind of KINDS) defs = (kind as StoredKind<unknown>).withList(defs, []);
    const ranks = new Map<string, number>();
    const next = new Map<string, ResourceVerdict>();
    const values = new Map<string, object>();
    const nameTaken: Array<{ kind: AnyKind; verdict: ResourceVerdict; value: object }> = [];
    entries.forEach(({ kind, obj }, index) => {
      const { value, error } = this.deps.parsed.parse(kind, obj);
      const verdict = verdictOf(kind, obj, value, error);
      next.set(verdict.uid, verdict);
      if (error) return;
      const nameKey = `${kind.compileKind}:${verdict.name}`;
      const owner = owners.get(nameKey);
      if (owner !== undefined) {
        verdict.error = new GatehouseError(
          kind.nameTaken.code,
          `${kind.nameTaken.message}: ${kind.resource.kind} "${owner.metadataName}" has spec.name "${verdict.name}"`,
          { field: 'name' },
        );
        nameTaken.push({ kind, verdict, value: value as object });
        return;
      }
      owners.set(nameKey, verdict);
      ranks.set(nameKey, index);
      values.set(nameKey, value as object);
      (kind.list(defs) as unknown[]).push(value);
    });
    const compiled = compileDefinitions(defs, { rank: (k, n) => ranks.get(`${k}:${n}`) ?? 0, cache: compileCache });
    return { owners, values, next, nameTaken, compiled, defs };
  }

  /** The state holds `defs` from now on; a new revision when their content differs. Returns whether it does. */
  private setDefs(defs: Definitions): boolean {
    const hash = definitionsHash(defs);
    const changed = hash !== this.state.hash;
    // Replaced even when equal: acceptedDefs must name the objects in state.defs.
    this.state = Object.freeze({ revision: changed ? this.state.revision + 1 : this.state.revision, defs, hash });
    if (changed) {
      this.hashes.set(this.state.revision, hash);
      this.hashes.delete(this.state.revision - HISTORY);
    }
    return changed;
  }

  /** An accepted verdict's revision: the first that carried its generation. */
  private accept(v: ResourceVerdict): void {
    const seen = this.since.get(v.uid);
    if (!seen || seen.generation !== v.generation) this.since.set(v.uid, { generation: v.generation, revision: this.state.revision });
    v.sinceRevision = this.since.get(v.uid)!.revision;
  }

  private forget(uid: string): void {
    this.verdicts.delete(uid);
    this.since.delete(uid);
    this.deps.parsed.forget(uid);
    this.acceptedDefs.delete(uid);
  }

  private blocks(kind: AnyKind, uid: string, name: string | undefined, routeKeys: readonly string[]): boolean {
    const b = this.blockers;
    return (
      b.uids.has(uid) ||
      (name !== undefined && (b.names.has(`${kind.compileKind}:${name}`) || (kind.compileKind === 'oauth-server' && b.servers.has(name)))) ||
      routeKeys.some((key) => b.routeKeys.has(key))
    );
  }
}

function block(blocked: Blockers, kind: DefinitionKindName, verdict: ResourceVerdict, value: object): void {
  blocked.uids.add(verdict.uid);
  blocked.names.add(`${kind}:${verdict.name}`);
  for (const key of routeKeysOf(kind, value)) blocked.routeKeys.add(key);
  if (kind === 'api') for (const server of oauth2Refs(value)) blocked.servers.add(server);
}

function routeKeysOf(kind: DefinitionKindName, def: object | undefined): readonly string[] {
  const built = def && compileOne(kind, def, compileCache);
  return built && 'built' in built ? built.built.keys : [];
}

const generationOf = (obj: CustomResource) => obj.metadata?.generation ?? 0;

function verdictOf(kind: AnyKind, obj: CustomResource, value: unknown, error: GatehouseError | null): ResourceVerdict {
  return {
    resource: kind.resource,
    metadataName: obj.metadata?.name ?? '',
    uid: obj.metadata?.uid ?? '',
    generation: generationOf(obj),
    name: value !== null ? kind.nameOf(value as never) : String(obj.spec?.[kind.resource.nameField] ?? obj.metadata?.name ?? ''),
    error,
    sinceRevision: null,
    status: obj.status,
  };
}

/**
 * `defs` with `edits` made (pointers only): a replaced definition keeps its place, a removed one goes, an
 * added one goes last. Undefined when an edit's `before` is not in `defs` (then only the full pass can say).
 */
function withEdits(defs: Definitions, edits: readonly DefinitionEdit[]): Definitions | undefined {
  let out = defs;
  for (const kind of KINDS) {
    const mine = edits.filter((e) => e.kind === kind.compileKind);
    if (mine.length === 0) continue;
    // A copy edited at each edit's place (indexOf is native): cheaper than a Map lookup per element. Creates
    // alone (an admin POST) copy once, by concat: a copy then push grows it again, over twice the cost at 50,000.
    let list = kind.list(defs) as object[];
    if (mine.some((e) => e.before)) list = list.slice();
    const removed = new Set<object>();
    for (const e of mine) {
      if (!e.before) continue;
      const at = list.indexOf(e.before);
      if (at < 0) return undefined;
      if (e.after) list[at] = e.after;
      else removed.add(e.before);
    }
    if (removed.size > 0) list = list.filter((d) => !removed.has(d));
    const created = mine.filter((e) => !e.before && e.after).map((e) => e.after as object);
    if (created.length > 0) list = list.concat(created);
    out = (kind.withList as (defs: Definitions, items: object[]) => Definitions)(out, list);
  }
  return out;
}

/** Whether a CR's new verdict would give it the same status as its previous one. */
function sameVerdict(a: ResourceVerdict | undefined, b: ResourceVerdict): boolean {
  return (
    a !== undefined &&
    a.generation === b.generation &&
    a.sinceRevision === b.sinceRevision &&
    a.status === b.status &&
    a.metadataName === b.metadataName &&
    a.error?.code === b.error?.code &&
    a.error?.message === b.error?.message
  );
}

/**
 * A CR's rank as one string (creation time, kind, name; NUL sorts below every character they hold, so
 * comparing these compares the three in turn), kept per object: the informer gives a new object per
 * change, and building the three-part keys in the comparator dominated a full pass.
 */
const rankKeys = new WeakMap<CustomResource, string>();

function rankKey(kind: AnyKind, obj: CustomResource): string {
  let key = rankKeys.get(obj);
  if (key === undefined) rankKeys.set(obj, (key = `${String(obj.metadata?.creationTimestamp ?? '')}\0${kind.resource.kind}\0${obj.metadata?.name ?? ''}`));
  return key;
}
